//! OpenClaw's Control UI, served in place of pincer's own page when the
//! user points `[gateway] control_ui` at an installed `openclaw` package
//! (or its `dist/control-ui` directory): its files as OpenClaw's gateway
//! serves them, and what the UI asks of the server around them.
//!
//! - `index.html` for the page's own paths (the UI moves to deep paths
//!   such as `/chat/main` and is reloaded there), its relative `./`
//!   references made absolute so that they resolve from any depth; files
//!   from the directory, and `…/assets/<file>` from `assets/` whatever
//!   the prefix, as OpenClaw's server does.
//! - A content-security-policy that allows the index's own inline scripts
//!   by their hashes and nothing else inline.
//! - `/control-ui-config.json` and `/avatar/<agent>`, for a caller that
//!   proves the gateway's credential (`Authorization: Bearer`).
//!
//! Only files under the directory are served: a path with `..`, a
//! backslash or a NUL, or one that resolves (through a link) outside it,
//! is not found.

use std::path::{Path, PathBuf};

use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use sha2::{Digest, Sha256};

use super::web::secure;

/// The Control UI's files, found once at start.
#[derive(Debug)]
pub struct ControlUi {
    root: PathBuf,
    /// `index.html` as served: its `./` references made absolute.
    index: Vec<u8>,
    csp: String,
}

impl ControlUi {
    /// The UI in `path`: an `openclaw` package (its `dist/control-ui`) or
    /// that directory itself.
    pub fn load(path: &Path) -> Result<Self, String> {
        let candidates = [path.join("dist").join("control-ui"), path.to_path_buf()];
        let Some(root) = candidates
            .iter()
            .find(|dir| dir.join("index.html").is_file())
        else {
            return Err(format!(
                "[gateway] control_ui = {}: no OpenClaw Control UI there (neither dist/control-ui/index.html nor index.html); point it at the installed `openclaw` package, e.g. node_modules/openclaw",
                path.display()
            ));
        };
        let root = root
            .canonicalize()
            .map_err(|e| format!("[gateway] control_ui: {}: {e}", root.display()))?;
        let html = std::fs::read_to_string(root.join("index.html"))
            .map_err(|e| format!("[gateway] control_ui: cannot read its index.html: {e}"))?;
        let hashes = inline_script_hashes(&html);
        let index = html
            .replace("=\"./", "=\"/")
            .replace("='./", "='/")
            .into_bytes();
        let csp = format!(
            "default-src 'self'; base-uri 'none'; object-src 'none'; frame-ancestors 'none'; \
             script-src 'self'{}; style-src 'self' 'unsafe-inline'; img-src 'self' data: blob:; \
             media-src 'self' data: blob:; font-src 'self'; worker-src 'self'; connect-src 'self'; \
             form-action 'none'",
            hashes
                .iter()
                .map(|h| format!(" 'sha256-{h}'"))
                .collect::<String>()
        );
        Ok(Self { root, index, csp })
    }

    /// The answer to a `GET` or `HEAD` of `path` that is not a websocket.
    pub fn serve(&self, path: &str, headers: &HeaderMap, credential_ok: bool) -> Response {
        if path == "/control-ui-config.json"
            || path == "/__openclaw/control-ui-config.json"
            || path == "/__openclaw__/control-ui-config.json"
        {
            return self.config(credential_ok);
        }
        if let Some(agent) = path.strip_prefix("/avatar/") {
            return avatar(agent, credential_ok);
        }
        // Anything under `…/assets/` is an asset, whatever the prefix.
        let relative = match path.rfind("/assets/") {
            Some(at) => &path[at + 1..],
            None => path.trim_start_matches('/'),
        };
        if !relative.is_empty() {
            if let Some(file) = self.file(relative) {
                return self.file_response(&file, relative);
            }
            // A missing file with an extension is not a page.
            let last = relative.rsplit('/').next().unwrap_or_default();
            if last.contains('.') {
                return (StatusCode::NOT_FOUND, "not found\n").into_response();
            }
        }
        let wants_html = headers
            .get(header::ACCEPT)
            .and_then(|a| a.to_str().ok())
            .is_none_or(|a| a.contains("text/html") || a.contains("*/*"));
        if !wants_html {
            return (StatusCode::NOT_FOUND, "not found\n").into_response();
        }
        self.respond(self.index.clone(), "text/html; charset=utf-8", false)
    }

    /// The file at `relative` under the root, if it is one there.
    fn file(&self, relative: &str) -> Option<PathBuf> {
        if relative.contains("..") || relative.contains('\\') || relative.contains('\0') {
            return None;
        }
        let path = self.root.join(relative).canonicalize().ok()?;
        (path.starts_with(&self.root) && path.is_file()).then_some(path)
    }

    fn file_response(&self, file: &Path, relative: &str) -> Response {
        if relative == "index.html" {
            return self.respond(self.index.clone(), "text/html; charset=utf-8", false);
        }
        match std::fs::read(file) {
            Ok(body) => self.respond(
                body,
                content_type(relative),
                relative.starts_with("assets/"),
            ),
            Err(_) => (StatusCode::NOT_FOUND, "not found\n").into_response(),
        }
    }

    fn respond(&self, body: Vec<u8>, content_type: &'static str, immutable: bool) -> Response {
        let mut response = (StatusCode::OK, body).into_response();
        let headers = response.headers_mut();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
        if let Ok(csp) = HeaderValue::from_str(&self.csp) {
            headers.insert(header::CONTENT_SECURITY_POLICY, csp);
        }
        secure(headers);
        headers.insert(
            header::CACHE_CONTROL,
            HeaderValue::from_static(if immutable {
                "public, max-age=31536000, immutable"
            } else {
                "no-cache"
            }),
        );
        response
    }

    /// `control-ui-config.json`: what the UI shows of the assistant and
    /// which of OpenClaw's features it offers (none of pincer's lacks).
    fn config(&self, credential_ok: bool) -> Response {
        if !credential_ok {
            return unauthorized();
        }
        let body = serde_json::json!({
            "basePath": "",
            "assistantName": "pincer",
            "assistantAvatar": null,
            "assistantAvatarSource": null,
            "assistantAvatarStatus": null,
            "assistantAvatarReason": null,
            "assistantAgentId": "main",
            "serverVersion": concat!("pincer ", env!("CARGO_PKG_VERSION")),
            "embedSandbox": "strict",
            "allowExternalEmbedUrls": false,
            "automaticallyFetchFavicons": false,
            "communityInvite": false,
            "terminalEnabled": false,
            "cliAgentsEnabled": false,
            "pluginAssetsRequireAuth": true,
            "pluginFrameGrants": [],
        });
        let mut response = (StatusCode::OK, body.to_string()).into_response();
        let headers = response.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
        secure(headers);
        response
    }
}

/// `/avatar/<agent>`: pincer's one agent has no picture (`?meta=1` says
/// so); any other agent is not found.
fn avatar(agent: &str, credential_ok: bool) -> Response {
    if !credential_ok {
        return unauthorized();
    }
    if agent != "main" {
        return (StatusCode::NOT_FOUND, "no such agent\n").into_response();
    }
    (StatusCode::NOT_FOUND, "the agent has no avatar\n").into_response()
}

fn unauthorized() -> Response {
    let mut response = (
        StatusCode::UNAUTHORIZED,
        r#"{"error":{"message":"Unauthorized","type":"unauthorized"}}"#,
    )
        .into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Bearer realm=\"pincer gateway\""),
    );
    response
}

/// The base64 SHA-256 of each inline `<script>` (one without `src`).
fn inline_script_hashes(html: &str) -> Vec<String> {
    let mut hashes = Vec::new();
    let mut rest = html;
    while let Some(start) = rest.find("<script") {
        let after = &rest[start..];
        let Some(open_end) = after.find('>') else {
            break;
        };
        let tag = &after[..open_end];
        let body_start = open_end + 1;
        let Some(close) = after[body_start..].find("</script>") else {
            break;
        };
        if !tag.contains(" src=") {
            let body = &after[body_start..body_start + close];
            let digest = Sha256::digest(body.as_bytes());
            hashes.push(base64::engine::general_purpose::STANDARD.encode(digest));
        }
        rest = &after[body_start + close..];
    }
    hashes
}

fn content_type(path: &str) -> &'static str {
    let extension = path.rsplit('.').next().unwrap_or_default();
    match extension {
        "html" => "text/html; charset=utf-8",
        "js" | "mjs" => "application/javascript; charset=utf-8",
        "css" => "text/css; charset=utf-8",
        "json" => "application/json",
        "webmanifest" => "application/manifest+json",
        "svg" => "image/svg+xml",
        "png" => "image/png",
        "ico" => "image/x-icon",
        "webp" => "image/webp",
        "jpg" | "jpeg" => "image/jpeg",
        "woff2" => "font/woff2",
        "woff" => "font/woff",
        "txt" => "text/plain; charset=utf-8",
        _ => "application/octet-stream",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ui() -> (tempfile::TempDir, ControlUi) {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("dist").join("control-ui");
        std::fs::create_dir_all(root.join("assets")).unwrap();
        std::fs::write(
            root.join("index.html"),
            "<html><script>window.x=1</script><script type=\"module\" src=\"./assets/app.js\"></script><link href=\"./favicon.svg\"></html>",
        )
        .unwrap();
        std::fs::write(root.join("assets").join("app.js"), "console.log(1)").unwrap();
        std::fs::write(root.join("favicon.svg"), "<svg/>").unwrap();
        std::fs::write(dir.path().join("secret.txt"), "not the UI's").unwrap();
        let ui = ControlUi::load(dir.path()).unwrap();
        (dir, ui)
    }

    async fn body(response: Response) -> (StatusCode, String) {
        let status = response.status();
        let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
            .await
            .unwrap();
        (status, String::from_utf8_lossy(&bytes).to_string())
    }

    #[tokio::test]
    async fn pages_and_assets_from_any_depth_and_nothing_outside() {
        let (_dir, ui) = ui();
        let html = HeaderMap::new();
        let (status, index) = body(ui.serve("/chat/main", &html, false)).await;
        assert_eq!(status, StatusCode::OK);
        assert!(
            index.contains("src=\"/assets/app.js\"") && index.contains("href=\"/favicon.svg\"")
        );
        let (status, js) = body(ui.serve("/chat/assets/app.js", &html, false)).await;
        assert_eq!((status, js.as_str()), (StatusCode::OK, "console.log(1)"));
        let response = ui.serve("/", &html, false);
        let csp = response.headers()[header::CONTENT_SECURITY_POLICY]
            .to_str()
            .unwrap()
            .to_string();
        let inline =
            base64::engine::general_purpose::STANDARD.encode(Sha256::digest(b"window.x=1"));
        assert!(csp.contains(&format!("'sha256-{inline}'")), "{csp}");
        assert!(!csp.contains("unsafe-eval") && !csp.contains("script-src 'self' 'unsafe-inline'"));
        for path in [
            "/../secret.txt",
            "/assets/../../secret.txt",
            "/%2e%2e/secret.txt",
            "/missing.js",
        ] {
            let (status, text) = body(ui.serve(path, &html, false)).await;
            assert!(!text.contains("not the UI's"), "{path}");
            assert!(
                status == StatusCode::NOT_FOUND || text.contains("<html>"),
                "{path}: {status}"
            );
        }
        // The config and the avatar need the credential.
        assert_eq!(
            ui.serve("/control-ui-config.json", &html, false).status(),
            StatusCode::UNAUTHORIZED
        );
        let (status, config) = body(ui.serve("/control-ui-config.json", &html, true)).await;
        assert_eq!(status, StatusCode::OK);
        let config: serde_json::Value = serde_json::from_str(&config).unwrap();
        assert_eq!(config["assistantName"], "pincer");
        assert_eq!(config["terminalEnabled"], false);
        assert_eq!(
            ui.serve("/avatar/main", &html, false).status(),
            StatusCode::UNAUTHORIZED
        );
    }

    #[test]
    fn a_directory_without_the_ui_is_refused_at_start() {
        let dir = tempfile::tempdir().unwrap();
        let error = ControlUi::load(dir.path()).unwrap_err();
        assert!(error.contains("no OpenClaw Control UI there"), "{error}");
    }
}
