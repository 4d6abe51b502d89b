//! The loopback listener that takes the browser's redirect at the end of an
//! OAuth login (RFC 8252 §7.3): `http://127.0.0.1:<port>/callback` or
//! `http://localhost:<port>/callback`, bound to 127.0.0.1 only.
//!
//! Anything on the machine can connect to that port while a login waits,
//! so the listener trusts nothing it is sent: each connection is read on
//! its own task with a size cap and a deadline (a client that sends
//! nothing, or too much, holds up no one), garbage and other paths get a
//! 400 or 404 and the listener goes on, and a callback is accepted only
//! with the `state` this login sent. A callback with another state ends the
//! login with [`OAuthError::StateMismatch`] (as Claude Code's listener does):
//! the code it carries is never exchanged. The browser's connection is
//! kept open until the login is settled, so the page it shows says how it
//! ended.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::OAuthError;

/// How long one connection may take to send its request.
const READ_DEADLINE: Duration = Duration::from_secs(10);
/// The most of a request that is read: a redirect's request head is well
/// under this.
const MAX_REQUEST: usize = 16 * 1024;
/// Connections read at once; more wait in the kernel's backlog.
const MAX_CONNECTIONS: usize = 16;

/// Where the browser comes back to: a loopback address of the provider's
/// choosing (`localhost` or `127.0.0.1`, a fixed port or any).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LoopbackRedirect {
    /// The host name in the redirect address; the listener is on 127.0.0.1
    /// whatever it says.
    pub host: String,
    /// 0: any free port.
    pub port: u16,
    pub path: String,
}

impl LoopbackRedirect {
    /// `http://127.0.0.1:<any port>/callback`.
    pub fn any_port() -> Self {
        Self {
            host: "127.0.0.1".to_string(),
            port: 0,
            path: "/callback".to_string(),
        }
    }

    /// The loopback redirect an address names, if it names one: `http`,
    /// host `localhost` or `127.0.0.1`, a path (default `/callback`), and a
    /// port when the provider registered a fixed one.
    pub fn parse(address: &str) -> Option<Self> {
        let url = url::Url::parse(address).ok()?;
        if url.scheme() != "http" || url.query().is_some() || url.fragment().is_some() {
            return None;
        }
        let host = match url.host()? {
            url::Host::Domain("localhost") => "localhost",
            url::Host::Ipv4(ip) if ip.is_loopback() => "127.0.0.1",
            _ => return None,
        };
        let path = match url.path() {
            "" | "/" => "/callback",
            path => path,
        };
        Some(Self {
            host: host.to_string(),
            port: url.port().unwrap_or(0),
            path: path.to_string(),
        })
    }
}

/// A bound listener waiting for one login's redirect.
pub struct Listener {
    listener: TcpListener,
    /// Whose login this is, for the errors.
    provider: String,
    redirect_uri: String,
    path: String,
}

/// The redirect that carried this login's code; the browser waits on it
/// for the page that says how the login ended.
pub struct Callback {
    pub code: String,
    browser: TcpStream,
}

impl Callback {
    /// Answers the browser: the login is done, or why it failed.
    pub async fn finish(mut self, outcome: Result<&str, &OAuthError>) {
        let page = match outcome {
            Ok(provider) => page(
                200,
                "Logged in",
                &format!("pincer is logged in to {provider}. You can close this tab."),
            ),
            Err(e) => page(
                400,
                "Login failed",
                &format!("pincer could not log in: {e}"),
            ),
        };
        let _ = self.browser.write_all(page.as_bytes()).await;
        let _ = self.browser.shutdown().await;
    }
}

impl Listener {
    /// Binds 127.0.0.1 on the redirect's port (any free one when it names
    /// none) for `provider`'s login.
    pub async fn bind(provider: &str, redirect: &LoopbackRedirect) -> Result<Self, OAuthError> {
        let listener = TcpListener::bind(("127.0.0.1", redirect.port))
            .await
            .map_err(|e| OAuthError::Listener {
                port: redirect.port,
                message: e.to_string(),
            })?;
        let port = listener
            .local_addr()
            .map_err(|e| OAuthError::Listener {
                port: redirect.port,
                message: e.to_string(),
            })?
            .port();
        Ok(Self {
            listener,
            provider: provider.to_string(),
            redirect_uri: format!("http://{}:{port}{}", redirect.host, redirect.path),
            path: redirect.path.clone(),
        })
    }

    /// The redirect address to send in the authorization request (and the
    /// token exchange).
    pub fn redirect_uri(&self) -> &str {
        &self.redirect_uri
    }

    /// Waits, for at most `timeout`, for the redirect that carries this
    /// login's `state`. Requests that are not a callback are answered and
    /// ignored; a callback with another state, or the provider's refusal,
    /// ends the wait with an error.
    pub async fn wait(self, state: &str, timeout: Duration) -> Result<Callback, OAuthError> {
        let provider = self.provider.clone();
        tokio::time::timeout(timeout, self.accept_callback(state))
            .await
            .map_err(|_| OAuthError::TimedOut {
                provider,
                after: timeout,
            })?
    }

    async fn accept_callback(self, state: &str) -> Result<Callback, OAuthError> {
        let mut reading = tokio::task::JoinSet::new();
        loop {
            tokio::select! {
                accepted = self.listener.accept(), if reading.len() < MAX_CONNECTIONS => {
                    match accepted {
                        Ok((socket, _)) => {
                            reading.spawn(read_target(socket));
                        }
                        // A connection that failed before it was accepted
                        // (reset, out of descriptors) leaves the listener as it was.
                        Err(e) => tracing::debug!(error = %e, "OAuth callback: accept failed"),
                    }
                }
                Some(read) = reading.join_next() => {
                    let Ok(Some((mut socket, target))) = read else { continue };
                    match self.judge(&target, state) {
                        Verdict::Ignore(response) => {
                            // Each write is bounded, so a client that does not
                            // read cannot hold the listener.
                            let _ = tokio::time::timeout(READ_DEADLINE, socket.write_all(response.as_bytes())).await;
                        }
                        Verdict::Refuse(e) => {
                            let callback = Callback { code: String::new(), browser: socket };
                            callback.finish(Err(&e)).await;
                            return Err(e);
                        }
                        Verdict::Accept(code) => return Ok(Callback { code, browser: socket }),
                    }
                }
            }
        }
    }

    fn judge(&self, target: &str, state: &str) -> Verdict {
        let Ok(url) = url::Url::parse("http://127.0.0.1").and_then(|base| base.join(target)) else {
            return Verdict::Ignore(page(400, "Bad request", "This is not a login redirect."));
        };
        if url.path() != self.path {
            return Verdict::Ignore(page(404, "Not found", "This is not a login redirect."));
        }
        let mut code = None;
        let mut given_state = None;
        let mut error = None;
        for (key, value) in url.query_pairs() {
            match key.as_ref() {
                "code" => code = Some(value.into_owned()),
                "state" => given_state = Some(value.into_owned()),
                "error" => error = Some(value.into_owned()),
                _ => {}
            }
        }
        match (given_state, code, error) {
            // Every redirect a provider sends carries the state; a request
            // without one (a browser's probe, a stray request) is not this
            // login's business.
            (None, _, _) => Verdict::Ignore(page(
                400,
                "Bad request",
                "This address takes the login provider's redirect.",
            )),
            (Some(given), _, _) if given != state => Verdict::Refuse(OAuthError::StateMismatch),
            (Some(_), _, Some(error)) => Verdict::Refuse(OAuthError::Denied(error)),
            (Some(_), Some(code), None) if !code.is_empty() => Verdict::Accept(code),
            (Some(_), _, None) => Verdict::Refuse(OAuthError::NoCode),
        }
    }
}

enum Verdict {
    /// Not a callback: answer this and keep listening.
    Ignore(String),
    /// A callback that ends the login without a code to exchange.
    Refuse(OAuthError),
    Accept(String),
}

/// Reads one request head (capped, with a deadline) and returns the request
/// target of a well-formed `GET`; anything else is answered here and
/// dropped.
async fn read_target(mut socket: TcpStream) -> Option<(TcpStream, String)> {
    let mut buffer = Vec::with_capacity(2048);
    let head = tokio::time::timeout(READ_DEADLINE, async {
        let mut chunk = [0u8; 2048];
        loop {
            let n = socket.read(&mut chunk).await.ok()?;
            if n == 0 {
                return None;
            }
            buffer.extend_from_slice(&chunk[..n]);
            let mut headers = [httparse::EMPTY_HEADER; 64];
            let mut request = httparse::Request::new(&mut headers);
            match request.parse(&buffer) {
                Ok(httparse::Status::Complete(_)) => {
                    return Some(
                        (request.method == Some("GET"))
                            .then(|| request.path.map(str::to_string))
                            .flatten(),
                    );
                }
                Ok(httparse::Status::Partial) if buffer.len() < MAX_REQUEST => {}
                _ => return Some(None),
            }
        }
    })
    .await;
    match head {
        Ok(Some(Some(target))) => Some((socket, target)),
        Ok(Some(None)) => {
            let response = page(400, "Bad request", "This is not a login redirect.");
            let _ =
                tokio::time::timeout(READ_DEADLINE, socket.write_all(response.as_bytes())).await;
            None
        }
        // Closed, or too slow: nothing to answer.
        Ok(None) | Err(_) => None,
    }
}

/// A small HTML response that closes the connection.
fn page(status: u16, title: &str, text: &str) -> String {
    let reason = match status {
        200 => "OK",
        404 => "Not Found",
        _ => "Bad Request",
    };
    let body = format!(
        "<!doctype html>\n<html><head><meta charset=\"utf-8\"><title>pincer: {}</title></head>\n<body><p>{}</p></body></html>\n",
        escape(title),
        escape(text)
    );
    format!(
        "HTTP/1.1 {status} {reason}\r\ncontent-type: text/html; charset=utf-8\r\ncache-control: no-store\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    )
}

/// Text for an HTML page: the provider's error text is not markup.
fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    #[test]
    fn loopback_redirects_are_recognised_and_others_are_not() {
        assert_eq!(
            LoopbackRedirect::parse("http://localhost/callback"),
            Some(LoopbackRedirect {
                host: "localhost".to_string(),
                port: 0,
                path: "/callback".to_string()
            })
        );
        assert_eq!(
            LoopbackRedirect::parse("http://127.0.0.1:8085/oauth2callback"),
            Some(LoopbackRedirect {
                host: "127.0.0.1".to_string(),
                port: 8085,
                path: "/oauth2callback".to_string()
            })
        );
        for page in [
            "https://console.anthropic.com/oauth/code/callback",
            "http://example.com/callback",
            "https://localhost/callback",
            "http://10.0.0.1/callback",
            "not a url",
        ] {
            assert_eq!(LoopbackRedirect::parse(page), None, "{page}");
        }
    }

    #[test]
    fn pages_escape_what_they_show() {
        let response = page(400, "t", "<script>alert('x')</script> & more");
        assert!(response.starts_with("HTTP/1.1 400 Bad Request\r\n"));
        assert!(response.contains("&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt; &amp; more"));
        let (head, body) = response.split_once("\r\n\r\n").unwrap();
        assert!(head.contains(&format!("content-length: {}", body.len())));
    }
}
