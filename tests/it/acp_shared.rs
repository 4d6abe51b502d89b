//! In-process: two ACP connections of one process serving one session
//! registry, as `pincer acp --gateway` runs the editor's connection and the
//! gateway's. A session belongs to the connection that opened it; prompts
//! from the other connection run with the owner's connection; the
//! observer hears what every session does, in order.
//!
//! The crate forbids unsafe code, so a test cannot set its own
//! environment: each test runs again in a process of its own (its own
//! executable, filtered to the test) whose HOME and PINCER_HOME are a fresh
//! sandbox; there the user's config points Anthropic at the mock model.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_client_protocol::schema::ProtocolVersion;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    CancelNotification, ContentBlock, InitializeRequest, LoadSessionRequest, NewSessionRequest,
    PromptRequest, PromptResponse, RequestPermissionOutcome, RequestPermissionRequest,
    RequestPermissionResponse, SelectedPermissionOutcome, SessionId, SessionNotification,
    SessionUpdate, SetSessionConfigOptionRequest, StopReason, TextContent,
};
use agent_client_protocol::{Agent, Channel};
use pincer::acp::registry::{Observed, Observer, PROMPT_META_KEY, Registry};
use pincer::acp::{Drain, ServeOptions};
use pretty_assertions::assert_eq;
use serde_json::json;
use support::acp_client::Sandbox;
use support::mock_model::{MockModel, Reply};
use support::sse::{anthropic_text, anthropic_tool_call};
use tokio::sync::{mpsc, oneshot};

const DEADLINE: Duration = Duration::from_secs(20);

type PermissionAsked = (
    RequestPermissionRequest,
    oneshot::Sender<RequestPermissionResponse>,
);

/// One client connection to the in-process server.
struct Peer {
    cx: ConnectionTo<Agent>,
    updates: Arc<Mutex<Vec<SessionNotification>>>,
    permissions: mpsc::UnboundedReceiver<PermissionAsked>,
    close: Option<oneshot::Sender<()>>,
    server: tokio::task::JoinHandle<Result<(), agent_client_protocol::Error>>,
}

impl Peer {
    /// Serves a connection of `registry` and connects a client to it.
    async fn connect(registry: &Arc<Registry>) -> Peer {
        let (server_end, client_end) = Channel::duplex();
        let server = tokio::spawn(pincer::acp::serve(
            server_end,
            Drain::new(),
            ServeOptions {
                model: None,
                registry: Some(registry.clone()),
                observed: false,
                gateway_cwd: None,
                max_sessions: None,
            },
        ));
        let updates = Arc::new(Mutex::new(Vec::new()));
        let (permissions_tx, permissions) = mpsc::unbounded_channel();
        let (cx_tx, cx_rx) = oneshot::channel();
        let (close, closed) = oneshot::channel::<()>();
        let seen = updates.clone();
        tokio::spawn(
            agent_client_protocol::Client
                .v1()
                .on_receive_notification(
                    async move |notification: SessionNotification, _cx| {
                        seen.lock().unwrap().push(notification);
                        Ok(())
                    },
                    agent_client_protocol::on_receive_notification!(),
                )
                .on_receive_request(
                    async move |request: RequestPermissionRequest, responder, cx| {
                        let (tx, rx) = oneshot::channel();
                        permissions_tx.send((request, tx)).unwrap();
                        cx.spawn(async move {
                            if let Ok(response) = rx.await {
                                responder.respond(response)?;
                            }
                            Ok(())
                        })
                    },
                    agent_client_protocol::on_receive_request!(),
                )
                .connect_with(client_end, async move |cx: ConnectionTo<Agent>| {
                    let _ = cx_tx.send(cx);
                    let _ = closed.await;
                    Ok(())
                }),
        );
        let cx = cx_rx.await.unwrap();
        cx.send_request(InitializeRequest::new(ProtocolVersion::V1))
            .block_task()
            .await
            .unwrap();
        Peer {
            cx,
            updates,
            permissions,
            close: Some(close),
            server,
        }
    }

    async fn new_session(&self, cwd: &std::path::Path) -> SessionId {
        self.cx
            .send_request(NewSessionRequest::new(cwd))
            .block_task()
            .await
            .unwrap()
            .session_id
    }

    /// Sends a prompt (tagged like the gateway's when `tag` is given) and
    /// returns its answer's future.
    fn prompt(
        &self,
        session: &SessionId,
        text: &str,
        tag: Option<&str>,
        queue: Option<&str>,
    ) -> tokio::task::JoinHandle<Result<PromptResponse, agent_client_protocol::Error>> {
        let mut request = PromptRequest::new(
            session.clone(),
            vec![ContentBlock::Text(TextContent::new(text))],
        );
        if tag.is_some() || queue.is_some() {
            let mut gateway = serde_json::Map::new();
            if let Some(tag) = tag {
                gateway.insert("tag".into(), json!(tag));
            }
            if let Some(queue) = queue {
                gateway.insert("queue".into(), json!(queue));
            }
            let mut meta = serde_json::Map::new();
            meta.insert(PROMPT_META_KEY.to_string(), gateway.into());
            request = request.meta(meta);
        }
        let sent = self.cx.send_request(request);
        tokio::spawn(async move { sent.block_task().await })
    }

    /// The next permission question this client is asked.
    async fn asked(&mut self) -> PermissionAsked {
        tokio::time::timeout(DEADLINE, self.permissions.recv())
            .await
            .expect("no permission request came")
            .unwrap()
    }

    fn updates(&self) -> Vec<SessionNotification> {
        self.updates.lock().unwrap().clone()
    }

    /// Ends the connection and waits until the server has finished with it.
    async fn end(mut self) {
        drop(self.close.take());
        tokio::time::timeout(DEADLINE, self.server)
            .await
            .expect("the server did not end the connection")
            .unwrap()
            .unwrap();
    }
}

/// A prompt's answer, within the deadline.
async fn answered(
    sent: tokio::task::JoinHandle<Result<PromptResponse, agent_client_protocol::Error>>,
) -> Result<PromptResponse, agent_client_protocol::Error> {
    tokio::time::timeout(DEADLINE, sent)
        .await
        .expect("the prompt was not answered in time")
        .unwrap()
}

fn allow(option: &str) -> RequestPermissionResponse {
    RequestPermissionResponse::new(RequestPermissionOutcome::Selected(
        SelectedPermissionOutcome::new(option.to_string()),
    ))
}

/// The variables that tell a test it runs in its own process.
const CHILD_HOME: &str = "PINCER_ACP_SHARED_HOME";
const CHILD_WORK: &str = "PINCER_ACP_SHARED_WORK";

/// A test's home and project directory.
struct Dirs {
    home: std::path::PathBuf,
    work: std::path::PathBuf,
}

impl Dirs {
    fn home(&self) -> std::path::PathBuf {
        self.home.clone()
    }

    fn work(&self) -> std::path::PathBuf {
        self.work.clone()
    }
}

/// In the test's own process, its directories; otherwise runs test `name`
/// in a process of its own (HOME and PINCER_HOME a fresh sandbox, no keys
/// from the environment), fails if it fails, and returns `None`.
fn own_process(name: &str) -> Option<Dirs> {
    if let (Some(home), Some(work)) = (std::env::var_os(CHILD_HOME), std::env::var_os(CHILD_WORK)) {
        return Some(Dirs {
            home: home.into(),
            work: work.into(),
        });
    }
    let sandbox = Sandbox::new();
    // The test's full name in this binary: its module path without the crate.
    let name = format!("{}::{name}", module_path!().split_once("::").unwrap().1);
    let output = std::process::Command::new(std::env::current_exe().unwrap())
        .args([name.as_str(), "--exact", "--nocapture", "--test-threads=1"])
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", sandbox.home())
        .env("PINCER_HOME", sandbox.home())
        .env("RUST_LOG", "warn")
        .env("RUST_BACKTRACE", "1")
        .env(CHILD_HOME, sandbox.home())
        .env(CHILD_WORK, sandbox.work())
        .current_dir(sandbox.work())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.contains("1 passed"),
        "{name} failed in its own process:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    None
}

/// The mock model, which the user's config (in the test's PINCER_HOME)
/// makes Anthropic's address, with a key.
async fn mock_model(dirs: &Dirs) -> MockModel {
    let mock = MockModel::start().await;
    std::fs::write(
        dirs.home.join("config.toml"),
        format!(
            "[providers.anthropic]\nbase_url = \"{}\"\napi_key = \"test-key\"\n",
            mock.anthropic_url()
        ),
    )
    .unwrap();
    mock
}

/// What the observer heard, reduced to what the tests check: every event
/// but the updates, and of those the user's messages, tool calls and the
/// agent's text (consecutive chunks joined).
struct Heard {
    rx: Observer,
    all: Vec<Observed>,
}

impl Heard {
    fn new(registry: &Registry) -> Heard {
        Heard {
            rx: registry.observe().unwrap(),
            all: Vec::new(),
        }
    }

    /// Takes what has arrived until `line` is among the lines.
    async fn until(&mut self, line: &str) -> Vec<String> {
        let deadline = tokio::time::Instant::now() + DEADLINE;
        loop {
            if self.lines().iter().any(|l| l == line) {
                return self.lines();
            }
            match tokio::time::timeout_at(deadline, self.rx.recv()).await {
                Ok(Some(event)) => self.all.push(event),
                _ => panic!(
                    "the observer never heard `{line}`; it heard {:#?}",
                    self.lines()
                ),
            }
        }
    }

    fn updates(&mut self) -> Vec<SessionNotification> {
        while let Ok(event) = self.rx.try_recv() {
            self.all.push(event);
        }
        self.all
            .iter()
            .filter_map(|e| match e {
                Observed::Update(n) => Some(n.clone()),
                _ => None,
            })
            .collect()
    }

    fn lines(&self) -> Vec<String> {
        let mut lines: Vec<String> = Vec::new();
        let mut text: Option<String> = None;
        for event in &self.all {
            let line = match event {
                Observed::Update(n) => match &n.update {
                    SessionUpdate::AgentMessageChunk(chunk) => {
                        if let ContentBlock::Text(t) = &chunk.content {
                            text.get_or_insert_default().push_str(&t.text);
                        }
                        continue;
                    }
                    SessionUpdate::UserMessageChunk(chunk) => match &chunk.content {
                        ContentBlock::Text(t) => format!("user: {}", t.text),
                        _ => "user: (not text)".to_string(),
                    },
                    SessionUpdate::ToolCall(call) => format!("tool call {}", call.tool_call_id.0),
                    _ => continue,
                },
                Observed::PromptStarted { tag, text, .. } => {
                    format!("started {} {text}", tag.as_deref().unwrap_or("-"))
                }
                Observed::PromptEnded { tag, result, .. } => {
                    format!("ended {} {result:?}", tag.as_deref().unwrap_or("-"))
                }
                Observed::PermissionResolved {
                    tool_call_id,
                    option,
                    ..
                } => format!(
                    "permission {tool_call_id} {}",
                    option.as_ref().map_or("-", |(id, _)| id.as_str())
                ),
                Observed::Opened { session } => format!("opened {}", session.0),
                Observed::Closed { session } => format!("closed {}", session.0),
                Observed::BackgroundFinished { session, .. } => {
                    format!("background finished {}", session.0)
                }
                Observed::HelperStarted { child, .. } => format!("helper {}", child.0),
                Observed::HelperEnded { child, stop, .. } => {
                    format!("helper ended {} {stop}", child.0)
                }
            };
            if let Some(text) = text.take() {
                lines.push(format!("text: {text}"));
            }
            lines.push(line);
        }
        if let Some(text) = text {
            lines.push(format!("text: {text}"));
        }
        lines
    }
}

fn bash(id: &str, command: &str) -> Reply {
    Reply::sse(anthropic_tool_call(
        id,
        "bash",
        &json!({"command": command}),
    ))
}

fn text(answer: &str) -> Reply {
    Reply::sse(anthropic_text(answer, 100))
}

fn user_chunks(updates: &[SessionNotification]) -> Vec<String> {
    updates
        .iter()
        .filter_map(|n| match &n.update {
            SessionUpdate::UserMessageChunk(chunk) => match &chunk.content {
                ContentBlock::Text(t) => Some(t.text.clone()),
                _ => None,
            },
            _ => None,
        })
        .collect()
}

#[tokio::test]
async fn a_prompt_from_another_connection_runs_with_the_owners_connection() {
    let Some(sandbox) =
        own_process("a_prompt_from_another_connection_runs_with_the_owners_connection")
    else {
        return;
    };
    let mock = mock_model(&sandbox).await;
    let registry = Registry::new();
    let mut heard = Heard::new(&registry);
    let mut editor = Peer::connect(&registry).await;
    let mut phone = Peer::connect(&registry).await;
    let session = editor.new_session(&sandbox.work()).await;
    let opened = format!("opened {}", session.0);
    heard.until(&opened).await;

    mock.push(bash("call_1", "echo shared"));
    mock.push(text("All done."));
    let answer = phone.prompt(&session, "run it", Some("run-1"), None);
    // The editor, which owns the session, is asked; the phone is not.
    let (request, respond) = editor.asked().await;
    assert_eq!(request.session_id, session);
    assert_eq!(request.tool_call.tool_call_id.0.as_ref(), "call_1");
    respond.send(allow("allow_once")).unwrap();
    let response = answered(answer).await.unwrap();
    assert_eq!(response.stop_reason, StopReason::EndTurn);
    assert!(phone.permissions.try_recv().is_err());

    let lines = heard.until("ended run-1 Ok(EndTurn)").await;
    assert_eq!(
        lines,
        vec![
            opened,
            "started run-1 run it".to_string(),
            "user: run it".to_string(),
            "tool call call_1".to_string(),
            "permission call_1 allow_once".to_string(),
            "text: All done.".to_string(),
            "ended run-1 Ok(EndTurn)".to_string(),
        ]
    );
    // Every update went to the editor, first the phone's message, and the
    // observer heard exactly those; the phone got none.
    support::wait_until("the editor got every update", DEADLINE, || {
        editor.updates() == heard.updates()
    })
    .await;
    let updates = editor.updates();
    assert_eq!(user_chunks(&updates), vec!["run it".to_string()]);
    assert!(updates.iter().any(
        |n| matches!(&n.update, SessionUpdate::ToolCall(c) if c.tool_call_id.0.as_ref() == "call_1")
    ));
    assert_eq!(phone.updates(), Vec::new());

    // A config option changed from the phone: the editor is told.
    let before = editor.updates().len();
    phone
        .cx
        .send_request(SetSessionConfigOptionRequest::new(
            session.clone(),
            "queue",
            "follow-up",
        ))
        .block_task()
        .await
        .unwrap();
    support::wait_until("the editor heard of the option", DEADLINE, || {
        editor.updates()[before..]
            .iter()
            .any(|n| matches!(n.update, SessionUpdate::ConfigOptionUpdate(_)))
    })
    .await;
    assert_eq!(phone.updates(), Vec::new());
    phone.end().await;
    editor.end().await;
}

#[tokio::test]
async fn a_connection_that_ends_closes_only_the_sessions_it_owns() {
    let Some(sandbox) = own_process("a_connection_that_ends_closes_only_the_sessions_it_owns")
    else {
        return;
    };
    let _mock = mock_model(&sandbox).await;
    let registry = Registry::new();
    let mut heard = Heard::new(&registry);
    let editor = Peer::connect(&registry).await;
    let gateway = Peer::connect(&registry).await;
    let editors = editor.new_session(&sandbox.work()).await;
    let gateways = gateway.new_session(&sandbox.work()).await;

    gateway.end().await;
    assert!(registry.is_open(&editors.0));
    assert!(!registry.is_open(&gateways.0));
    heard.until(&format!("closed {}", gateways.0)).await;

    let other = Peer::connect(&registry).await;
    let others = other.new_session(&sandbox.work()).await;
    editor.end().await;
    assert!(!registry.is_open(&editors.0));
    assert!(registry.is_open(&others.0));
    let lines = heard.until(&format!("closed {}", editors.0)).await;
    assert_eq!(
        lines,
        vec![
            format!("opened {}", editors.0),
            format!("opened {}", gateways.0),
            format!("closed {}", gateways.0),
            format!("opened {}", others.0),
            format!("closed {}", editors.0),
        ]
    );
    other.end().await;
    assert!(!registry.is_open(&others.0));
}

#[tokio::test]
async fn the_observer_hears_a_steering_handover_and_a_cancelled_waiting_prompt_in_order() {
    let Some(sandbox) = own_process(
        "the_observer_hears_a_steering_handover_and_a_cancelled_waiting_prompt_in_order",
    ) else {
        return;
    };
    let mock = mock_model(&sandbox).await;
    let registry = Registry::new();
    let mut heard = Heard::new(&registry);
    let mut editor = Peer::connect(&registry).await;
    let phone = Peer::connect(&registry).await;
    let session = editor.new_session(&sandbox.work()).await;

    // A second tagged prompt while the first one's tool waits: it steers.
    mock.push(bash("call_1", "echo one"));
    mock.push(text("Read the second."));
    let first = phone.prompt(&session, "first", Some("t1"), None);
    let (_, respond) = editor.asked().await;
    let second = phone.prompt(&session, "second", Some("t2"), None);
    support::wait_until("the second prompt waits", DEADLINE, || {
        registry.waiting(&session.0) == 1
    })
    .await;
    respond.send(allow("allow_once")).unwrap();
    let first = answered(first).await.unwrap();
    let second = answered(second).await.unwrap();
    assert_eq!(
        (first.stop_reason, second.stop_reason),
        (StopReason::EndTurn, StopReason::EndTurn)
    );

    // A prompt waiting when the session is cancelled (from the phone).
    mock.push(bash("call_3", "echo three"));
    let third = phone.prompt(&session, "third", Some("t3"), None);
    let _pending = editor.asked().await;
    let fourth = phone.prompt(&session, "fourth", Some("t4"), None);
    support::wait_until("the fourth prompt waits", DEADLINE, || {
        registry.waiting(&session.0) == 1
    })
    .await;
    phone
        .cx
        .send_notification(CancelNotification::new(session.clone()))
        .unwrap();
    let fourth = answered(fourth).await.unwrap();
    let third = answered(third).await.unwrap();
    assert_eq!(
        (third.stop_reason, fourth.stop_reason),
        (StopReason::Cancelled, StopReason::Cancelled)
    );

    let lines = heard.until("ended t3 Ok(Cancelled)").await;
    assert_eq!(
        lines,
        vec![
            format!("opened {}", session.0),
            "started t1 first".to_string(),
            "user: first".to_string(),
            "tool call call_1".to_string(),
            "permission call_1 allow_once".to_string(),
            // The run takes the second prompt in after the tool: the first
            // request is answered, then the second begins.
            "ended t1 Ok(EndTurn)".to_string(),
            "started t2 second".to_string(),
            "user: second".to_string(),
            "text: Read the second.".to_string(),
            "ended t2 Ok(EndTurn)".to_string(),
            "started t3 third".to_string(),
            "user: third".to_string(),
            "tool call call_3".to_string(),
            "ended t4 Ok(Cancelled)".to_string(),
            "permission call_3 -".to_string(),
            "ended t3 Ok(Cancelled)".to_string(),
        ]
    );
    // The model read the second prompt right after the first one's tool.
    let requests = mock.requests();
    assert_eq!(requests.len(), 3);
    let read = requests[1].body["messages"].to_string();
    assert!(read.contains("second"), "{read}");
}

#[tokio::test]
async fn a_prompt_may_ask_to_steer_a_session_that_follows_up() {
    let Some(sandbox) = own_process("a_prompt_may_ask_to_steer_a_session_that_follows_up") else {
        return;
    };
    let mock = mock_model(&sandbox).await;
    let registry = Registry::new();
    let mut heard = Heard::new(&registry);
    let mut editor = Peer::connect(&registry).await;
    let phone = Peer::connect(&registry).await;
    let session = editor.new_session(&sandbox.work()).await;
    editor
        .cx
        .send_request(SetSessionConfigOptionRequest::new(
            session.clone(),
            "queue",
            "follow-up",
        ))
        .block_task()
        .await
        .unwrap();

    // Two calls in one batch; the steering prompt skips the second.
    mock.push(Reply::sse(support::sse::anthropic_tool_calls(&[
        ("call_1", "bash", r#"{"command":"echo one"}"#),
        ("call_2", "bash", r#"{"command":"echo two"}"#),
    ])));
    mock.push(text("Steered."));
    let first = editor.prompt(&session, "first", None, None);
    let (_, respond) = editor.asked().await;
    let second = phone.prompt(&session, "second", Some("s"), Some("steer"));
    support::wait_until("the second prompt waits", DEADLINE, || {
        registry.waiting(&session.0) == 1
    })
    .await;
    respond.send(allow("allow_once")).unwrap();
    assert_eq!(
        answered(first).await.unwrap().stop_reason,
        StopReason::EndTurn
    );
    assert_eq!(
        answered(second).await.unwrap().stop_reason,
        StopReason::EndTurn
    );
    let lines = heard.until("ended s Ok(EndTurn)").await;
    assert_eq!(
        lines,
        vec![
            format!("opened {}", session.0),
            "started - first".to_string(),
            "tool call call_1".to_string(),
            "permission call_1 allow_once".to_string(),
            // Skipped for the steering message: it still starts and ends.
            "tool call call_2".to_string(),
            "ended - Ok(EndTurn)".to_string(),
            "started s second".to_string(),
            "user: second".to_string(),
            "text: Steered.".to_string(),
            "ended s Ok(EndTurn)".to_string(),
        ]
    );
    // The second call was skipped for the message, not asked about.
    assert!(editor.permissions.try_recv().is_err());
    assert_eq!(support::tool_results(&mock, 1).len(), 2);
    assert!(support::tool_results(&mock, 1)[1].1);

    // A queue mode pincer does not know is refused, and the observer
    // still hears that the request ended.
    let refused = phone.prompt(&session, "third", Some("bad"), Some("sideways"));
    let error = answered(refused).await.unwrap_err();
    assert!(error.to_string().contains("follow-up"), "{error}");
    heard.until("ended bad Err(\"_meta[\\\"pincer/gateway\\\"].queue is \\\"sideways\\\"; it takes \\\"steer\\\" or \\\"follow-up\\\"\")").await;
}

#[tokio::test]
async fn loading_a_session_open_on_another_connection_keeps_one_session_and_its_run() {
    let Some(sandbox) =
        own_process("loading_a_session_open_on_another_connection_keeps_one_session_and_its_run")
    else {
        return;
    };
    let mock = mock_model(&sandbox).await;
    let registry = Registry::new();
    let mut heard = Heard::new(&registry);
    let mut gateway = Peer::connect(&registry).await;
    let mut editor = Peer::connect(&registry).await;
    let session = gateway.new_session(&sandbox.work()).await;

    mock.push(Reply::fixture("anthropic/text.sse"));
    let hello = gateway.prompt(&session, "hello", Some("g1"), None);
    assert_eq!(
        answered(hello).await.unwrap().stop_reason,
        StopReason::EndTurn
    );

    // While a run of the gateway waits on its permission question, the
    // editor opens the session: the run goes on, nothing is replaced.
    mock.push(bash("call_1", "echo one"));
    mock.push(text("Ran it."));
    let running = gateway.prompt(&session, "run", Some("g2"), None);
    let (_, respond) = gateway.asked().await;
    let loaded = editor
        .cx
        .send_request(LoadSessionRequest::new(session.clone(), sandbox.work()))
        .block_task()
        .await;
    assert!(loaded.is_ok(), "{loaded:?}");
    // The editor got the history as a replay before the answer, up to the
    // prompt the run works on.
    assert_eq!(
        user_chunks(&editor.updates()),
        vec!["hello".to_string(), "run".to_string()]
    );
    // The editor, its new owner, is told the slash commands.
    support::wait_until("the editor got the commands", DEADLINE, || {
        editor
            .updates()
            .iter()
            .any(|n| matches!(n.update, SessionUpdate::AvailableCommandsUpdate(_)))
    })
    .await;
    respond.send(allow("allow_once")).unwrap();
    assert_eq!(
        answered(running).await.unwrap().stop_reason,
        StopReason::EndTurn
    );

    // The editor owns it now: a prompt from the gateway asks the editor.
    mock.push(bash("call_2", "echo two"));
    mock.push(text("Ran it again."));
    let again = gateway.prompt(&session, "again", Some("g3"), None);
    let (request, respond) = editor.asked().await;
    assert_eq!(request.tool_call.tool_call_id.0.as_ref(), "call_2");
    respond.send(allow("allow_once")).unwrap();
    assert_eq!(
        answered(again).await.unwrap().stop_reason,
        StopReason::EndTurn
    );
    heard.until("ended g3 Ok(EndTurn)").await;
    assert!(gateway.permissions.try_recv().is_err());

    // One writer: the transcript is one chain, each entry after the one
    // before it.
    let path = find_transcript(&sandbox.home(), &session.0);
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&path)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let entries: Vec<&serde_json::Value> = lines.iter().skip(1).collect();
    for pair in entries.windows(2) {
        assert_eq!(
            pair[1]["parentId"], pair[0]["id"],
            "two writers: {:#?}",
            entries
        );
    }
    let users = entries
        .iter()
        .filter(|e| e["message"]["role"] == "user")
        .count();
    assert_eq!(users, 3);

    // The gateway's connection ending leaves the editor's session open.
    gateway.end().await;
    assert!(registry.is_open(&session.0));
    editor.end().await;
    assert!(!registry.is_open(&session.0));
}

/// The transcript file of session `id` under `root`.
fn find_transcript(root: &std::path::Path, id: &str) -> std::path::PathBuf {
    for entry in walk(root) {
        if entry
            .file_name()
            .is_some_and(|n| n.to_string_lossy().contains(id))
            && entry.extension().is_some_and(|e| e == "jsonl")
        {
            return entry;
        }
    }
    panic!("no transcript of {id} under {}", root.display());
}

fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}
