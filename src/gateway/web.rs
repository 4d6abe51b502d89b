//! The web chat page the gateway serves at `/`: its files embedded in the
//! binary (no build step, nothing fetched at run time), sent with a
//! content-security-policy that allows only this origin's script, style and
//! websocket, so that neither injected markup nor a page that frames this
//! one can run code here.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

/// Script, style and connections from this origin only; no inline script,
/// no plugins, no framing, no form posts elsewhere.
pub const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
    img-src 'self' data: blob:; connect-src 'self'; base-uri 'none'; form-action 'none'; \
    frame-ancestors 'none'";

const ASSETS: &[(&str, &str, &[u8])] = &[
    (
        "/",
        "text/html; charset=utf-8",
        include_bytes!("web/index.html"),
    ),
    (
        "/app.js",
        "text/javascript; charset=utf-8",
        include_bytes!("web/app.js"),
    ),
    (
        "/app.css",
        "text/css; charset=utf-8",
        include_bytes!("web/app.css"),
    ),
    (
        "/markdown.js",
        "text/javascript; charset=utf-8",
        include_bytes!("web/markdown.js"),
    ),
    (
        "/highlight.js",
        "text/javascript; charset=utf-8",
        include_bytes!("web/highlight.js"),
    ),
    (
        "/markdown.css",
        "text/css; charset=utf-8",
        include_bytes!("web/markdown.css"),
    ),
];

/// The page's file at `path`, with its headers; `None` for any other path.
pub fn asset(path: &str) -> Option<Response> {
    let (_, content_type, body) = ASSETS.iter().find(|(p, _, _)| *p == path)?;
    let mut response = (StatusCode::OK, *body).into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    secure(headers);
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    Some(response)
}

/// The headers every page the gateway serves carries: no sniffing, no
/// referrer, no framing.
pub fn secure(headers: &mut axum::http::HeaderMap) {
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
}
