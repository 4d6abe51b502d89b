//! `pincer acp --connect` to a pincer gateway: ACP itself, carried over
//! the gateway's `/acp` websocket (one message per text frame), so that
//! everything the agent says reaches the editor as it said it — plans,
//! thoughts, notices, usage, permission questions, config options — with
//! nothing translated through OpenClaw's protocol.
//!
//! What the pipe changes, so that the session runs on the gateway's
//! machine as the OpenClaw-protocol bridge's do:
//! - `initialize`: the editor's files and terminals are not offered (the
//!   agent uses its own machine's);
//! - `session/new`, `load`, `resume`: the session works in the gateway's
//!   directory (named in `initialize`'s answer), or for a session it has
//!   listed, in that session's; MCP servers the editor passes are refused,
//!   as they would run on the gateway's machine;
//! - `session/list`: the editor's directory does not filter the gateway's
//!   sessions;
//! - `session/new`'s answer says where the session runs
//!   (`_meta["pincer/remote"]`).
//!
//! The websocket is the connection: when it drops, the requests waiting
//! on it fail and the pipe ends (the gateway ends the sessions the
//! connection owned). `--protocol openclaw` chooses the bridge, whose
//! runs outlive a dropped connection.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use futures::{SinkExt, StreamExt};
use parking_lot::Mutex;
use serde_json::{Value, json};
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::net::TcpStream;
use tokio::sync::{Notify, mpsc};
use tokio_tungstenite::tungstenite::Message;
use tokio_tungstenite::tungstenite::client::IntoClientRequest;
use tokio_tungstenite::{MaybeTlsStream, WebSocketStream};

use super::Credential;
use crate::acp::transport::{MAX_LINE, Read, read_line};
use crate::gateway::client::{HANDSHAKE_TIMEOUT, describe, socket_config, tls_config};

type Socket = WebSocketStream<MaybeTlsStream<TcpStream>>;

/// How often the pipe pings the gateway, so that a proxy between them
/// does not take a quiet connection for a dead one.
const PING_EVERY: Duration = Duration::from_secs(30);

/// The header a pincer gateway's `/acp` answers its upgrade with.
const CONNECTION_ID: &str = "acp-connection-id";

/// JSON-RPC's "internal error", for requests the lost connection leaves
/// unanswered.
const INTERNAL_ERROR: i64 = -32603;
const INVALID_PARAMS: i64 = -32602;
const PARSE_ERROR: i64 = -32700;
const METHOD_NOT_FOUND: i64 = -32601;

/// The `/acp` address of a gateway's URL: its path with `/acp` added (a
/// gateway behind a proxy's path prefix keeps it), without its query.
pub(super) fn acp_url(url: &str) -> Result<String, String> {
    let mut url = url::Url::parse(url).map_err(|e| e.to_string())?;
    let path = format!("{}/acp", url.path().trim_end_matches('/'));
    url.set_path(&path);
    url.set_query(None);
    url.set_fragment(None);
    Ok(url.to_string())
}

/// Why the gateway's `/acp` is not there to pipe to.
pub(super) struct NoAcp {
    pub why: String,
    /// A pincer gateway refused the credential (`401` with its Bearer
    /// challenge): `auto` stops there rather than offer the same
    /// credential again over OpenClaw's protocol, which would count a
    /// second failure towards the address's lockout.
    pub refused: bool,
}

impl From<String> for NoAcp {
    fn from(why: String) -> Self {
        Self {
            why,
            refused: false,
        }
    }
}

/// Dials the gateway's `/acp` with the credential: the socket when the far
/// end is a pincer gateway serving ACP there, else why not (an OpenClaw
/// gateway, an older pincer, a refusal, nobody listening), which `auto`
/// leaves to the OpenClaw-protocol bridge to handle and report, except a
/// refused credential.
pub(super) async fn dial(url: &str, credential: &Credential) -> Result<Socket, NoAcp> {
    let target = acp_url(url)?;
    let mut request = target
        .as_str()
        .into_client_request()
        .map_err(|e| describe(&e))?;
    let secret = match credential {
        Credential::Token(s) | Credential::Password(s) => s.expose(),
    };
    let value = format!("Bearer {secret}")
        .parse()
        .map_err(|_| "the credential cannot be sent in a header".to_string())?;
    request.headers_mut().insert(
        tokio_tungstenite::tungstenite::http::header::AUTHORIZATION,
        value,
    );
    let connector = if target.starts_with("wss://") {
        tokio_tungstenite::Connector::Rustls(tls_config()?)
    } else {
        tokio_tungstenite::Connector::Plain
    };
    let dialled = tokio::time::timeout(
        HANDSHAKE_TIMEOUT,
        tokio_tungstenite::connect_async_tls_with_config(
            request,
            Some(socket_config()),
            true,
            Some(connector),
        ),
    )
    .await
    .map_err(|_| format!("no answer within {} s", HANDSHAKE_TIMEOUT.as_secs()))?;
    match dialled {
        Ok((socket, response)) if response.headers().contains_key(CONNECTION_ID) => Ok(socket),
        Ok((mut socket, _)) => {
            let _ = socket.close(None).await;
            Err(format!("{target} is a websocket but not pincer's ACP").into())
        }
        Err(e) => Err(NoAcp {
            refused: is_bearer_refusal(&e),
            why: describe(&e),
        }),
    }
}

/// A `401` whose challenge is `Bearer`: how pincer's `/acp` refuses a
/// credential.
fn is_bearer_refusal(error: &tokio_tungstenite::tungstenite::Error) -> bool {
    match error {
        tokio_tungstenite::tungstenite::Error::Http(response) => {
            response.status() == 401
                && response
                    .headers()
                    .get("www-authenticate")
                    .and_then(|v| v.to_str().ok())
                    .is_some_and(|v| v.starts_with("Bearer"))
        }
        _ => false,
    }
}

/// What the pipe remembers of the conversation.
#[derive(Default)]
struct State {
    /// The editor's requests not answered yet (their ids as JSON text).
    waiting: HashSet<String>,
    /// The id of `initialize`, whose answer names the gateway's directory.
    initialize: Option<String>,
    /// The ids of `session/new` requests, whose answers say where.
    new: HashSet<String>,
    /// The ids of `session/list` requests, whose rows give each session's
    /// directory.
    list: HashSet<String>,
    /// The gateway's directory.
    cwd: Option<String>,
    /// The directory of each session a listing showed.
    session_cwd: HashMap<String, String>,
}

/// Serves the editor on stdin/stdout through the socket until stdin closes
/// and every request has been answered, or the socket ends.
pub(super) async fn serve_stdio(socket: Socket, url: String) -> Result<(), String> {
    let (mut sink, mut frames) = socket.split();
    let state = Arc::new(Mutex::new(State::default()));
    let answered = Arc::new(Notify::new());
    let (to_editor, mut editor_lines) = mpsc::channel::<String>(256);
    let (to_gateway, mut gateway_frames) = mpsc::channel::<Message>(256);

    let stdout = tokio::spawn(async move {
        let mut stdout = tokio::io::stdout();
        while let Some(line) = editor_lines.recv().await {
            let written = async {
                stdout.write_all(line.as_bytes()).await?;
                stdout.write_all(b"\n").await?;
                stdout.flush().await
            };
            if written.await.is_err() {
                return;
            }
        }
    });
    let mut writer = tokio::spawn(async move {
        let mut ping = tokio::time::interval(PING_EVERY);
        ping.tick().await;
        loop {
            let message = tokio::select! {
                message = gateway_frames.recv() => match message {
                    Some(message) => message,
                    None => break,
                },
                _ = ping.tick() => Message::Ping(Vec::new().into()),
            };
            if sink.send(message).await.is_err() {
                return;
            }
        }
        let _ = sink.close().await;
    });

    let reader = {
        let (state, answered, to_editor, url) = (
            state.clone(),
            answered.clone(),
            to_editor.clone(),
            url.clone(),
        );
        let back = to_gateway.clone();
        async move {
            while let Some(frame) = frames.next().await {
                let text = match frame {
                    Ok(Message::Text(text)) => text,
                    Ok(Message::Close(_)) => {
                        return "the gateway closed the connection".to_string();
                    }
                    Ok(_) => continue,
                    Err(e) => return format!("the connection to the gateway failed: {e}"),
                };
                let routed = from_gateway(&state, text.as_str(), &url);
                answered.notify_waiters();
                match routed {
                    Routed::Editor(line) => {
                        if to_editor.send(line).await.is_err() {
                            return "the editor went away".to_string();
                        }
                    }
                    Routed::Gateway(line) => {
                        if back.send(Message::text(line)).await.is_err() {
                            return "the connection to the gateway failed".to_string();
                        }
                    }
                    Routed::Dropped => {}
                }
            }
            "the gateway closed the connection".to_string()
        }
    };
    let editor = {
        let (state, answered, to_editor) = (state.clone(), answered.clone(), to_editor.clone());
        async move {
            let mut stdin = BufReader::new(tokio::io::stdin());
            let mut buffer = Vec::new();
            loop {
                let line = match read_line(&mut stdin, &mut buffer, MAX_LINE).await {
                    Ok(Read::Line(line)) => line,
                    Ok(Read::NotUtf8) => {
                        let _ = to_editor
                            .send(error(&Value::Null, PARSE_ERROR, "the line is not UTF-8"))
                            .await;
                        continue;
                    }
                    Ok(Read::TooLong) => {
                        let message = format!("the line is longer than {MAX_LINE} bytes");
                        let _ = to_editor
                            .send(error(&Value::Null, PARSE_ERROR, &message))
                            .await;
                        continue;
                    }
                    Ok(Read::End) | Err(_) => break,
                };
                if line.trim().is_empty() {
                    continue;
                }
                match to_gateway_line(&state, &line) {
                    Ok(line) => {
                        if to_gateway.send(Message::text(line)).await.is_err() {
                            break;
                        }
                    }
                    Err(refusal) => {
                        let _ = to_editor.send(refusal).await;
                    }
                }
            }
            // Stdin ended: what the editor asked is still answered.
            loop {
                let notified = answered.notified();
                if state.lock().waiting.is_empty() {
                    break;
                }
                notified.await;
            }
            let _ = to_gateway.send(Message::Close(None)).await;
        }
    };

    let result = tokio::select! {
        lost = reader => Err(lost),
        () = editor => Ok(()),
    };
    if let Err(lost) = &result {
        // Whatever the editor still waits for will not come.
        let waiting: Vec<String> = state.lock().waiting.drain().collect();
        let message = format!("{lost} ({url}); the session ended with it");
        for id in waiting {
            let id: Value = serde_json::from_str(&id).unwrap_or(Value::Null);
            let _ = to_editor.send(error(&id, INTERNAL_ERROR, &message)).await;
        }
    }
    // The close (or what is left to send) goes out; a gateway that does
    // not take it is not waited for long.
    if tokio::time::timeout(Duration::from_secs(2), &mut writer)
        .await
        .is_err()
    {
        writer.abort();
    }
    drop(to_editor);
    let _ = stdout.await;
    result.map_err(|lost| format!("{lost} ({url})"))
}

/// A JSON-RPC error answer.
fn error(id: &Value, code: i64, message: &str) -> String {
    json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}).to_string()
}

/// A line of the editor's as the gateway gets it, or the answer that
/// refuses it here.
fn to_gateway_line(state: &Mutex<State>, line: &str) -> Result<String, String> {
    let Ok(mut message) = serde_json::from_str::<Value>(line) else {
        // The gateway answers what is not JSON with a parse error.
        return Ok(line.to_string());
    };
    let (Some(method), Some(id)) = (
        message["method"].as_str().map(String::from),
        message.get("id").cloned(),
    ) else {
        return Ok(line.to_string());
    };
    let key = id.to_string();
    let mut state = state.lock();
    let params = &mut message["params"];
    match method.as_str() {
        "initialize" => {
            if params.is_object() {
                let capabilities = &mut params["clientCapabilities"];
                if !capabilities.is_object() {
                    *capabilities = json!({});
                }
                capabilities["fs"] = json!({"readTextFile": false, "writeTextFile": false});
                capabilities["terminal"] = json!(false);
            }
            state.initialize = Some(key.clone());
        }
        "session/new" | "session/load" | "session/resume" if params.is_object() => {
            let servers = params["mcpServers"]
                .as_array()
                .is_some_and(|s| !s.is_empty());
            if servers {
                return Err(error(
                    &id,
                    INVALID_PARAMS,
                    "the session runs on the gateway's machine, where the MCP servers this \
                     editor passes cannot run; configure them on the gateway instead",
                ));
            }
            let own = params["sessionId"]
                .as_str()
                .and_then(|s| state.session_cwd.get(s).cloned());
            if let Some(cwd) = own.or_else(|| state.cwd.clone()) {
                params["cwd"] = json!(cwd);
            }
            if method == "session/new" {
                state.new.insert(key.clone());
            }
        }
        "session/list" => {
            if let Some(params) = params.as_object_mut() {
                params.remove("cwd");
            }
            state.list.insert(key.clone());
        }
        _ => {}
    }
    state.waiting.insert(key);
    Ok(message.to_string())
}

/// Where a frame of the gateway's goes.
#[derive(Debug, PartialEq)]
enum Routed {
    /// To the editor, as this line.
    Editor(String),
    /// Back to the gateway: the pipe's own answer.
    Gateway(String),
    /// Nowhere.
    Dropped,
}

/// The editor's files and terminals are not the gateway's to use: the
/// pipe never offered them, and answers a request for them itself, so
/// that a gateway (or whoever holds its address) cannot reach the
/// editor's machine through an editor that serves them anyway.
fn editors_own(method: &str) -> bool {
    method.starts_with("fs/") || method.starts_with("terminal/")
}

/// A frame of the gateway's, routed.
fn from_gateway(state: &Mutex<State>, text: &str, url: &str) -> Routed {
    let Ok(message) = serde_json::from_str::<Value>(text) else {
        return Routed::Editor(text.replace(['\n', '\r'], " "));
    };
    if let Some(method) = message.get("method").and_then(Value::as_str) {
        if editors_own(method) {
            return match message.get("id") {
                Some(id) => Routed::Gateway(error(
                    id,
                    METHOD_NOT_FOUND,
                    &format!("{method}: the editor's files and terminals stay on its machine"),
                )),
                None => Routed::Dropped,
            };
        }
        return Routed::Editor(compact(text, &message));
    }
    Routed::Editor(answer(state, text, message, url))
}

/// An answer of the gateway's to the editor, with what the pipe learns
/// from it.
fn answer(state: &Mutex<State>, text: &str, mut message: Value, url: &str) -> String {
    let Some(id) = message.get("id").map(Value::to_string) else {
        return compact(text, &message);
    };
    let mut state = state.lock();
    if !state.waiting.remove(&id) {
        return compact(text, &message);
    }
    let result = &mut message["result"];
    if state.initialize.as_deref() == Some(id.as_str()) {
        state.cwd = result["_meta"][crate::acp::GATEWAY_META]["cwd"]
            .as_str()
            .map(String::from);
    }
    if state.list.remove(&id) {
        for row in result["sessions"].as_array().into_iter().flatten() {
            if let (Some(session), Some(cwd)) = (row["sessionId"].as_str(), row["cwd"].as_str()) {
                state
                    .session_cwd
                    .insert(session.to_string(), cwd.to_string());
            }
        }
    }
    if state.new.remove(&id) && result.is_object() {
        let cwd = state.cwd.clone();
        if !result["_meta"].is_object() {
            result["_meta"] = json!({});
        }
        result["_meta"]["pincer/remote"] = json!({"gateway": url, "cwd": cwd, "protocol": "acp"});
    }
    message.to_string()
}

/// A message as one line: as it came when it was one.
fn compact(text: &str, message: &Value) -> String {
    if text.contains(['\n', '\r']) {
        message.to_string()
    } else {
        text.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[test]
    fn the_acp_address_keeps_a_proxy_s_path_and_drops_the_query() {
        assert_eq!(
            acp_url("ws://127.0.0.1:18789").unwrap(),
            "ws://127.0.0.1:18789/acp"
        );
        assert_eq!(
            acp_url("ws://127.0.0.1:18789/").unwrap(),
            "ws://127.0.0.1:18789/acp"
        );
        assert_eq!(
            acp_url("wss://example.com/pincer/?x=1").unwrap(),
            "wss://example.com/pincer/acp"
        );
    }

    /// The editor's files, terminals, directory and MCP servers stay
    /// with the editor; the gateway's directory comes from `initialize`.
    #[test]
    fn the_session_runs_where_the_gateway_is() {
        let state = Mutex::new(State::default());
        let init = to_gateway_line(
            &state,
            r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":1,"clientCapabilities":{"fs":{"readTextFile":true,"writeTextFile":true},"terminal":true}}}"#,
        )
        .unwrap();
        let init: Value = serde_json::from_str(&init).unwrap();
        assert_eq!(
            init["params"]["clientCapabilities"],
            json!({"fs": {"readTextFile": false, "writeTextFile": false}, "terminal": false})
        );
        from_gateway(
            &state,
            r#"{"jsonrpc":"2.0","id":0,"result":{"protocolVersion":1,"_meta":{"pincer/gateway":{"cwd":"/srv/work"}}}}"#,
            "ws://gw",
        );
        let new = to_gateway_line(
            &state,
            r#"{"jsonrpc":"2.0","id":1,"method":"session/new","params":{"cwd":"/home/me/x","mcpServers":[]}}"#,
        )
        .unwrap();
        assert_eq!(
            serde_json::from_str::<Value>(&new).unwrap()["params"]["cwd"],
            "/srv/work"
        );
        let Routed::Editor(answer) = from_gateway(
            &state,
            r#"{"jsonrpc":"2.0","id":1,"result":{"sessionId":"s1"}}"#,
            "ws://gw",
        ) else {
            panic!("an answer goes to the editor")
        };
        let answer: Value = serde_json::from_str(&answer).unwrap();
        assert_eq!(
            answer["result"]["_meta"]["pincer/remote"],
            json!({"gateway": "ws://gw", "cwd": "/srv/work", "protocol": "acp"})
        );

        let refused = to_gateway_line(
            &state,
            r#"{"jsonrpc":"2.0","id":2,"method":"session/new","params":{"cwd":"/x","mcpServers":[{"name":"m","command":"m","args":[],"env":[]}]}}"#,
        )
        .unwrap_err();
        let refused: Value = serde_json::from_str(&refused).unwrap();
        assert_eq!(refused["id"], 2);
        assert_eq!(refused["error"]["code"], INVALID_PARAMS);

        // A listed session loads in its own directory.
        let list = to_gateway_line(
            &state,
            r#"{"jsonrpc":"2.0","id":"l","method":"session/list","params":{"cwd":"/home/me/x"}}"#,
        )
        .unwrap();
        assert_eq!(
            serde_json::from_str::<Value>(&list).unwrap()["params"],
            json!({})
        );
        from_gateway(
            &state,
            r#"{"jsonrpc":"2.0","id":"l","result":{"sessions":[{"sessionId":"s9","cwd":"/srv/other"}]}}"#,
            "ws://gw",
        );
        let load = to_gateway_line(
            &state,
            r#"{"jsonrpc":"2.0","id":3,"method":"session/load","params":{"sessionId":"s9","cwd":"/home/me/x","mcpServers":[]}}"#,
        )
        .unwrap();
        assert_eq!(
            serde_json::from_str::<Value>(&load).unwrap()["params"]["cwd"],
            "/srv/other"
        );
        assert_eq!(
            state.lock().waiting,
            HashSet::from(["3".to_string()]),
            "answered requests are no longer waited for"
        );
    }

    /// Whatever the far end asks of the editor's files or terminals is
    /// answered by the pipe and never reaches the editor; other requests
    /// (a permission question) do.
    #[test]
    fn the_gateway_cannot_reach_the_editor_s_files_or_terminals() {
        let state = Mutex::new(State::default());
        for method in ["fs/write_text_file", "fs/read_text_file", "terminal/create"] {
            let frame = json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": {"path": "/home/me/.bashrc", "content": "x"}});
            let Routed::Gateway(refusal) = from_gateway(&state, &frame.to_string(), "ws://gw")
            else {
                panic!("{method} reached the editor")
            };
            let refusal: Value = serde_json::from_str(&refusal).unwrap();
            assert_eq!(refusal["id"], 7);
            assert_eq!(refusal["error"]["code"], METHOD_NOT_FOUND);
            let notice = json!({"jsonrpc": "2.0", "method": method, "params": {}});
            assert_eq!(
                from_gateway(&state, &notice.to_string(), "ws://gw"),
                Routed::Dropped
            );
        }
        let ask = json!({"jsonrpc": "2.0", "id": 8, "method": "session/request_permission", "params": {}});
        assert_eq!(
            from_gateway(&state, &ask.to_string(), "ws://gw"),
            Routed::Editor(ask.to_string())
        );
    }
}
