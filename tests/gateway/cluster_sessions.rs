//! Sessions shared by the replicas of a team gateway, on a real
//! PostgreSQL store and a real NATS bus (both started by the test): a
//! client on any replica follows, answers, aborts and sends to a session
//! that runs on another.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use serde_json::{Value, json};

use support::acp_client::{Sandbox, TIMEOUT};
use support::gateway::{Client, Gateway, gateway_command, new_key, new_token};
use support::mock_model::{MockModel, Reply, fixture};
use support::services::{Nats, Postgres};
use support::sse::{
    anthropic_deltas, anthropic_text, anthropic_text_then_tool_call, anthropic_tool_call,
};

/// Replica `name`'s home, on `store` and `bus`.
fn replica_home(name: &str, store: &str, bus: &str) -> Sandbox {
    let sandbox = Sandbox::new();
    std::fs::write(
        sandbox.home().join("config.toml"),
        format!(
            "title_model = \"none\"\n[gateway]\n\n[cluster]\nstore = \"{store}\"\nbus = \"{bus}\"\nreplica = \"{name}\"\n"
        ),
    )
    .unwrap();
    sandbox
}

async fn launch(sandbox: &Sandbox, mock: &MockModel, name: &str, bus: &str) -> Gateway {
    let token = new_token();
    let cmd = gateway_command(sandbox, mock, Some(&token), &[]);
    let gateway = Gateway::spawn(cmd, Some(&token)).await;
    let said = format!("cluster: replica `{name}` on store");
    let line = gateway
        .stderr
        .wait_line(TIMEOUT, |l| l.contains(&said).then(|| l.to_string()))
        .await
        .unwrap_or_else(|| panic!("no {said:?} in:\n{}", gateway.stderr.text()));
    assert!(line.ends_with(&format!("and bus {bus}")), "{line}");
    gateway
}

/// A run's `chat` events and its `agent` events of the streams every
/// replica tells, as a client received them, without the times (each
/// replica stamps its own).
fn run_events(client: &Client, run: &str) -> Vec<Value> {
    client
        .events
        .iter()
        .filter(|e| e["payload"]["runId"] == run)
        .filter(|e| {
            e["event"] == "chat"
                || (e["event"] == "agent"
                    && ["assistant", "tool", "lifecycle"]
                        .contains(&e["payload"]["stream"].as_str().unwrap_or_default()))
        })
        .map(|e| {
            let mut e = json!({"event": e["event"], "payload": e["payload"]});
            untimed(&mut e);
            e
        })
        .collect()
}

/// Publishes junk on the events' subject and sends r1 `request` (bytes
/// as they go on the bus); returns r1's answer to it.
fn garbage_on_the_bus(port: u16, request: &str) -> String {
    use std::io::{BufRead, BufReader, Write};
    let stream = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
    stream.set_read_timeout(Some(TIMEOUT)).unwrap();
    let mut reader = BufReader::new(stream);
    let mut line = String::new();
    reader.read_line(&mut line).unwrap();
    assert!(line.starts_with("INFO "), "{line}");
    // r1's subject is its name in hex.
    reader
        .get_mut()
        .write_all(
            format!(
                "CONNECT {{\"verbose\":false}}\r\nSUB junk.reply 1\r\nPUB pincer.events 9\r\n{{\"from\":1\r\nPUB pincer.replica.7231 junk.reply {}\r\n{request}\r\n",
                request.len()
            )
            .as_bytes(),
        )
        .unwrap();
    loop {
        line.clear();
        reader.read_line(&mut line).unwrap();
        if line.starts_with("MSG junk.reply") {
            line.clear();
            reader.read_line(&mut line).unwrap();
            return line;
        }
        if line.starts_with("PING") {
            reader.get_mut().write_all(b"PONG\r\n").unwrap();
        }
    }
}

/// The transcripts under `dir`, at any depth.
fn transcripts(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            found.extend(transcripts(&path));
        } else if path.extension().is_some_and(|e| e == "jsonl") {
            found.push(path);
        }
    }
    found
}

fn untimed(value: &mut Value) {
    match value {
        Value::Object(map) => {
            for key in ["ts", "timestamp", "startedAt", "endedAt"] {
                map.remove(key);
            }
            map.values_mut().for_each(untimed);
        }
        Value::Array(items) => items.iter_mut().for_each(untimed),
        _ => {}
    }
}

#[tokio::test]
async fn a_session_on_one_replica_is_followed_answered_aborted_and_sent_to_from_the_others() {
    let (postgres, nats) = tokio::join!(
        tokio::task::spawn_blocking(Postgres::start),
        tokio::task::spawn_blocking(Nats::start)
    );
    let (postgres, nats) = (postgres.unwrap(), nats.unwrap());
    let mock = MockModel::start().await;
    let homes: Vec<Sandbox> = (1..=3)
        .map(|i| replica_home(&format!("r{i}"), &postgres.url(), &nats.url()))
        .collect();
    let marker = homes[0].work().join("ran");
    let command = format!("touch {}", marker.display());
    mock.push(Reply::sse(anthropic_tool_call(
        "toolu_b",
        "bash",
        &json!({"command": command}),
    )));
    mock.push(Reply::sse(anthropic_deltas(&[
        "The file ",
        "is ",
        "there.",
    ])));
    mock.push(Reply::Stall {
        body: fixture("anthropic/text.sse"),
        events: 4,
    });
    mock.push(Reply::sse(anthropic_text("Sent from the second.", 20)));
    let bus = nats.url();
    let (r1, r2, r3) = tokio::join!(
        launch(&homes[0], &mock, "r1", &bus),
        launch(&homes[1], &mock, "r2", &bus),
        launch(&homes[2], &mock, "r3", &bus)
    );
    let mut sender = r1.admin().await;
    let mut watcher_here = r1.operator(&["operator.read"], &["tool-events"]).await;
    let mut there = r2
        .operator(&["operator.read", "operator.write"], &["tool-events"])
        .await;
    let mut approver = r3
        .operator(&["operator.approvals", "operator.read"], &[])
        .await;
    let key = new_key();

    // A run on r1 asks; r3 answers.
    let run = sender.chat_send(&key, "touch it").await;
    let requested = approver.next_event("exec.approval.requested").await["payload"].clone();
    let id = requested["id"].as_str().unwrap().to_string();
    assert_eq!(requested["request"]["sessionKey"], key, "{requested}");
    assert_eq!(requested["request"]["command"], command, "{requested}");
    let listed = approver.call_ok("exec.approval.list", json!({})).await;
    assert_eq!(listed.as_array().unwrap().len(), 1, "{listed}");
    assert_eq!(listed[0]["id"], id, "{listed}");
    let got = approver
        .call_ok("exec.approval.get", json!({"id": id}))
        .await;
    assert_eq!(got["commandText"], command, "{got}");
    // A decision the question does not offer is refused where it is made.
    let wrong = approver
        .call(
            "exec.approval.resolve",
            json!({"id": id, "decision": "maybe"}),
        )
        .await;
    assert_eq!(wrong["ok"], false, "{wrong}");
    assert!(!marker.exists(), "the command ran before it was approved");
    let resolved = approver
        .call_ok(
            "exec.approval.resolve",
            json!({"id": id, "decision": "allow-once"}),
        )
        .await;
    assert_eq!(resolved, json!({"ok": true}));
    let event = approver.next_event("exec.approval.resolved").await;
    assert_eq!(event["payload"]["id"], id);
    assert_eq!(event["payload"]["resolvedBy"], "client");
    for client in [&mut sender, &mut watcher_here, &mut there] {
        let end = client.chat_end(&run).await;
        assert_eq!(end["payload"]["state"], "final", "{end}");
        assert_eq!(end["payload"]["sessionKey"], key, "{end}");
    }
    assert!(marker.exists(), "the approved command did not run");
    // Every delta and the final, in order, the same on both replicas.
    let seen_here = run_events(&watcher_here, &run);
    let seen_there = run_events(&there, &run);
    let deltas = seen_there
        .iter()
        .filter(|e| e["event"] == "chat" && e["payload"]["state"] == "delta")
        .count();
    assert!(deltas >= 2, "{seen_there:#?}");
    assert_eq!(seen_there, seen_here);
    let resolved_again = approver
        .call(
            "exec.approval.resolve",
            json!({"id": id, "decision": "deny"}),
        )
        .await;
    assert_eq!(resolved_again["ok"], false, "{resolved_again}");
    assert_eq!(
        approver.call_ok("exec.approval.list", json!({})).await,
        json!([])
    );

    // Garbage on the bus (an event no replica wrote, a request that is no
    // request) is refused and changes nothing.
    let answer = tokio::task::spawn_blocking({
        let port = nats.port();
        move || garbage_on_the_bus(port, "hello")
    })
    .await
    .unwrap();
    assert!(answer.contains("malformed request"), "{answer}");
    // A chat channel's message does not choose the sandbox it runs in:
    // one naming a sandbox is no request, and one for a channel r1 does
    // not run is refused, nothing run.
    let content = json!([{"type": "text", "text": "rm -rf"}]);
    for (request, refused) in [
        (
            json!({"send": {"key": "telegram:dm:1", "run": "forged-1", "content": content,
                "unattended": {"mode": "off"}}}),
            "malformed request",
        ),
        (
            json!({"send": {"key": "telegram:dm:1", "run": "forged-2", "content": content,
                "unattended": true}}),
            "runs no channel `telegram`",
        ),
        // One that says it is queued runs only if the store's queue has
        // it, to be claimed.
        (
            json!({"send": {"key": key, "run": "forged-3", "content": content,
                "queued": true}}),
            "in_flight",
        ),
    ] {
        let answer = tokio::task::spawn_blocking({
            let port = nats.port();
            move || garbage_on_the_bus(port, &request.to_string())
        })
        .await
        .unwrap();
        assert!(answer.contains(refused), "{answer}");
    }
    assert_eq!(mock.requests().len(), 2, "nothing forged ran");

    // A run on r1 that streams on and on; r2 stops it.
    let long = sender.chat_send(&key, "talk forever").await;
    there.chat_state(&long, "delta").await;
    let aborted = there
        .call_ok("chat.abort", json!({"sessionKey": key, "runId": long}))
        .await;
    assert_eq!(
        aborted,
        json!({"ok": true, "aborted": true, "runIds": [long]})
    );
    for client in [&mut sender, &mut there] {
        let end = client.chat_end(&long).await;
        assert_eq!(end["payload"]["state"], "aborted", "{end}");
    }

    // A client on r2 that takes only the sessions it follows subscribes
    // to the session r1 runs.
    let mut follower = r2
        .operator(
            &["operator.read", "operator.write"],
            &["session-scoped-events"],
        )
        .await;
    follower
        .call_ok("chat.subscribe", json!({"sessionKey": key}))
        .await;
    // r2 sends to the session r1 runs: r1 runs it, all see it.
    let third = there.chat_send(&key, "from the second replica").await;
    for client in [&mut there, &mut watcher_here, &mut follower] {
        let end = client.chat_end(&third).await;
        assert_eq!(end["payload"]["state"], "final", "{end}");
    }
    let requests = mock.requests();
    assert_eq!(requests.len(), 4);
    // One transcript, on r1; r2 and r3 ran nothing.
    let on_r1 = transcripts(&homes[0].home().join("sessions"));
    assert_eq!(on_r1.len(), 1, "{on_r1:?}");
    let text = std::fs::read_to_string(&on_r1[0]).unwrap();
    assert!(text.contains("from the second replica"), "{text}");
    for home in &homes[1..] {
        let none: Vec<std::path::PathBuf> = Vec::new();
        assert_eq!(transcripts(&home.home().join("sessions")), none);
    }
    // The approval was settled once, by the client: no replica tells it
    // again as an editor's answer. (A call reads what came before it.)
    approver.call_ok("health", json!({})).await;
    sender.call_ok("health", json!({})).await;
    for client in [&approver, &sender] {
        let resolved = client.payloads_of("exec.approval.resolved");
        assert_eq!(resolved.len(), 1, "{resolved:?}");
        assert_eq!(resolved[0]["resolvedBy"], "client", "{resolved:?}");
    }
    // On a machine without the session (r3's home), the CLI lists and
    // shows it from the store.
    let session = postgres.psql(&format!(
        "SELECT session_id FROM pincer_sessions WHERE key = '{key}'"
    ));
    // Every replica lists it, once, with the row its replica wrote.
    for client in [&mut approver, &mut there, &mut sender] {
        let listed = client.call_ok("sessions.list", json!({})).await;
        let rows: Vec<&Value> = listed["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|row| row["key"] == key)
            .collect();
        assert_eq!(rows.len(), 1, "{listed}");
        assert_eq!(rows[0]["sessionId"], json!(session), "{listed}");
        assert_eq!(rows[0]["derivedTitle"], "touch it", "{listed}");
        assert_eq!(listed["count"], 1, "{listed}");
    }
    // A replica that never had it (r3) reads its history from the store.
    let history = approver
        .call_ok("chat.history", json!({"sessionKey": key}))
        .await;
    assert_eq!(history["sessionId"], json!(session), "{history}");
    let messages = history["messages"].to_string();
    for said in [
        "touch it",
        "The file is there.",
        "from the second replica",
        "Sent from the second.",
    ] {
        assert!(messages.contains(said), "{said:?} not in {messages}");
    }
    let out = homes[2]
        .command(&["sessions", "list", "--json"])
        .output()
        .await
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let listed: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(listed.len(), 1, "{listed:?}");
    assert_eq!(
        (
            &listed[0]["sessionId"],
            &listed[0]["key"],
            &listed[0]["replica"],
            &listed[0]["inCluster"]
        ),
        (&json!(session), &json!(key), &json!("r1"), &json!(true))
    );
    let out = homes[2]
        .command(&["sessions", "show", &session])
        .output()
        .await
        .unwrap();
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for said in [
        "touch it",
        "The file is there.",
        "from the second replica",
        "Sent from the second.",
    ] {
        assert!(shown.contains(said), "{said:?} not in:\n{shown}");
    }
    // An editor there lists it (`pincer acp`, the same config) and loads
    // it: the transcript is copied from the store, replayed, and goes on
    // in the editor.
    let mut acp = support::spawn_anthropic(&homes[2], &mock);
    acp.initialize().await;
    let listed = acp.call("session/list", json!({})).await;
    let sessions = listed["sessions"].as_array().cloned().unwrap_or_default();
    let found: Vec<&Value> = sessions
        .iter()
        .filter(|s| s["sessionId"] == session)
        .collect();
    assert_eq!(found.len(), 1, "{listed}");
    assert_eq!(found[0]["title"], json!(key), "{listed}");
    assert_eq!(
        found[0]["_meta"]["pincer/cluster"]["replica"], "r1",
        "{listed}"
    );
    // Listed again and again, over one connection kept to the store.
    for _ in 0..3 {
        let again = acp.call("session/list", json!({})).await;
        assert_eq!(again["sessions"], listed["sessions"], "{again}");
    }
    tokio::time::sleep(std::time::Duration::from_millis(500)).await;
    assert_eq!(
        postgres.psql(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'pincer (reading)'"
        ),
        "1"
    );
    assert_ne!(
        postgres.psql(
            "SELECT count(*) FROM pg_stat_activity WHERE application_name = 'pincer replica r1'"
        ),
        "0"
    );
    let id = acp
        .send(
            "session/load",
            json!({"sessionId": session, "cwd": homes[2].work(), "mcpServers": []}),
        )
        .await;
    let (response, before) = acp.until_response(id).await;
    assert!(response.get("error").is_none(), "{response}");
    let replayed = serde_json::to_string(&support::acp_client::updates_of(&before)).unwrap();
    for said in ["touch it", "The file is there.", "Sent from the second."] {
        assert!(replayed.contains(said), "{said:?} not replayed: {replayed}");
    }
    mock.push(Reply::sse(anthropic_text("In the editor now.", 20)));
    let id = acp
        .send(
            "session/prompt",
            support::prompt(&session, "and in my editor?"),
        )
        .await;
    let (response, _) = acp.drive(id, |method, _| panic!("asked {method}")).await;
    assert_eq!(response["result"]["stopReason"], "end_turn", "{response}");
    let body = mock.requests().last().unwrap().body.to_string();
    assert!(
        body.contains("touch it") && body.contains("and in my editor?"),
        "{body}"
    );
    acp.assert_stdout_was_json_rpc();
    drop(acp);
    assert_eq!(mock.violations(), Vec::<String>::new());
    for replica in [r1, r2, r3] {
        replica.stop().await;
    }
}

/// The text of a `chat` event's message.
fn chat_text(event: &Value) -> String {
    event["payload"]["message"]["content"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|block| block["text"].as_str())
        .collect()
}

#[tokio::test]
async fn a_replica_that_starts_while_a_run_goes_on_reads_the_run_from_the_store_then_follows_it() {
    let (postgres, nats) = tokio::join!(
        tokio::task::spawn_blocking(Postgres::start),
        tokio::task::spawn_blocking(Nats::start)
    );
    let (postgres, nats) = (postgres.unwrap(), nats.unwrap());
    let mock = MockModel::start().await;
    let homes: Vec<Sandbox> = (1..=3)
        .map(|i| replica_home(&format!("r{i}"), &postgres.url(), &nats.url()))
        .collect();
    let marker = homes[0].work().join("ran");
    let command = format!("touch {}", marker.display());
    mock.push(Reply::sse(anthropic_text_then_tool_call(
        &["Before ", "the question."],
        "toolu_q",
        "bash",
        &json!({"command": command}),
    )));
    mock.push(Reply::sse(anthropic_deltas(&["After ", "it ", "ran."])));
    let bus = nats.url();
    let r1 = launch(&homes[0], &mock, "r1", &bus).await;
    let mut sender = r1.admin().await;
    let mut watcher = r1
        .operator(&["operator.approvals", "operator.read"], &["tool-events"])
        .await;
    let key = new_key();

    // A run on r1 says something and asks; only then does r2 start.
    let run = sender.chat_send(&key, "touch it").await;
    let requested = watcher.next_event("exec.approval.requested").await["payload"].clone();
    let id = requested["id"].as_str().unwrap().to_string();
    let deadline = std::time::Instant::now() + TIMEOUT;
    loop {
        let running = postgres.psql("SELECT coalesce(running, '') FROM pincer_sessions");
        let stored = postgres.psql(&format!(
            "SELECT count(*) FROM pincer_run_events WHERE run = '{run}'"
        ));
        if running == run && stored.parse::<u64>().unwrap() >= 3 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the run was not marked and its events not stored: {running:?}, {stored}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let r2 = launch(&homes[1], &mock, "r2", &bus).await;
    let mut there = r2
        .operator(
            &["operator.read", "operator.write", "operator.approvals"],
            &["tool-events"],
        )
        .await;

    // r2 read the run from the store: it lists the question asked before
    // it started, and its answer there reaches the run on r1.
    let deadline = std::time::Instant::now() + TIMEOUT;
    loop {
        let listed = there.call_ok("exec.approval.list", json!({})).await;
        if listed.as_array().unwrap().iter().any(|a| a["id"] == id) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "r2 never listed the question asked before it started: {listed}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    there
        .call_ok(
            "exec.approval.resolve",
            json!({"id": id, "decision": "allow-once"}),
        )
        .await;
    let mut ends = Vec::new();
    for client in [&mut sender, &mut there] {
        let end = client.chat_end(&run).await;
        assert_eq!(end["payload"]["state"], "final", "{end}");
        ends.push(end);
    }
    assert!(marker.exists(), "the approved command did not run");

    // What r2's client got of the run is the end of what r1's got, event
    // for event: the same numbers, nothing lost or doubled, and its first
    // text carries what the run said before r2 started.
    let seen_here = run_events(&sender, &run);
    let seen_there = run_events(&there, &run);
    assert!(seen_there.len() >= 3, "{seen_there:#?}");
    assert!(
        seen_here.ends_with(&seen_there),
        "r1's client:\n{seen_here:#?}\nr2's client:\n{seen_there:#?}"
    );
    let first = there
        .events
        .iter()
        .find(|e| e["event"] == "chat" && e["payload"]["runId"] == run)
        .unwrap();
    // Its first text starts where the run's did: the whole text so far
    // when r2 had caught up before the client came, else the first word,
    // the client seeing the catching up.
    let text = chat_text(first);
    assert!(text.starts_with("Before "), "{first}");
    let last = chat_text(&ends[1]);
    assert!(
        last.starts_with("Before the question.") && last.ends_with("After it ran."),
        "{}",
        ends[1]
    );
    assert_eq!(chat_text(&ends[0]), last);

    // r3 starts while the next run streams (60 words, 100 ms apart, so
    // that a slow machine still starts r3 in time): it reads what it
    // missed from the store (at its start, or at the first event it hears
    // after a gap), and its client gets the run's text from the first
    // word.
    let parts: Vec<String> = (0..60).map(|i| format!("w{i} ")).collect();
    let parts: Vec<&str> = parts.iter().map(String::as_str).collect();
    mock.push(Reply::Sse {
        body: anthropic_deltas(&parts),
        delay: std::time::Duration::from_millis(100),
        gate: None,
    });
    let run = sender.chat_send(&key, "go on").await;
    sender
        .next_where("the fifth word", |f| {
            f["event"] == "chat" && f["payload"]["runId"] == run && chat_text(f).contains("w4 ")
        })
        .await;
    let r3 = launch(&homes[2], &mock, "r3", &bus).await;
    let mut third = r3.operator(&["operator.read"], &[]).await;
    let end = third.chat_end(&run).await;
    assert_eq!(end["payload"]["state"], "final", "{end}");
    let here_end = sender.chat_end(&run).await;
    assert_eq!(chat_text(&end), chat_text(&here_end));
    let seen_here = run_events(&sender, &run);
    let seen_third = run_events(&third, &run);
    let deltas = seen_third
        .iter()
        .filter(|e| e["event"] == "chat" && e["payload"]["state"] == "delta")
        .count();
    assert!(deltas >= 2, "r3 started too late: {seen_third:#?}");
    assert!(
        seen_here.ends_with(&seen_third),
        "r1's client:\n{seen_here:#?}\nr3's client:\n{seen_third:#?}"
    );
    // Its first text starts with the first word, streamed before r3 was
    // there (all of it when r3 read the run before the client came; the
    // first word when the client saw the catching up).
    let first = seen_third.iter().find(|e| e["event"] == "chat").unwrap();
    assert!(chat_text(first).starts_with("w0 "), "{first}");
    for replica in [r1, r2, r3] {
        replica.stop().await;
    }
}

/// Replica `name`'s home with a lease of `lease` seconds.
fn replica_home_with_lease(name: &str, store: &str, bus: &str, lease: u64) -> Sandbox {
    let sandbox = replica_home(name, store, bus);
    let config = sandbox.home().join("config.toml");
    let mut text = std::fs::read_to_string(&config).unwrap();
    text.push_str(&format!("lease_seconds = {lease}\n"));
    std::fs::write(config, text).unwrap();
    sandbox
}

#[tokio::test]
async fn a_replica_killed_mid_run_leaves_a_session_another_replica_takes_over() {
    let (postgres, nats) = tokio::join!(
        tokio::task::spawn_blocking(Postgres::start),
        tokio::task::spawn_blocking(Nats::start)
    );
    let (postgres, nats) = (postgres.unwrap(), nats.unwrap());
    let mock = MockModel::start().await;
    // r1 has an idle session, and a run that asks before a command; r1
    // dies with the question open.
    mock.push(Reply::sse(anthropic_text("Idle now.", 10)));
    mock.push(Reply::sse(anthropic_tool_call(
        "toolu_k",
        "bash",
        &json!({"command": "echo never"}),
    )));
    mock.push(Reply::sse(anthropic_text("Back again.", 20)));
    mock.push(Reply::sse(anthropic_text("Still here.", 30)));
    let bus = nats.url();
    let homes: Vec<Sandbox> = (1..=3)
        .map(|i| replica_home_with_lease(&format!("r{i}"), &postgres.url(), &bus, 2))
        .collect();
    let (r1, r2, r3) = tokio::join!(
        launch(&homes[0], &mock, "r1", &bus),
        launch(&homes[1], &mock, "r2", &bus),
        launch(&homes[2], &mock, "r3", &bus)
    );
    let mut sender = r1.admin().await;
    let mut there = r2.admin().await;
    let idle_key = new_key();
    let idle = sender.chat_send(&idle_key, "say one thing").await;
    assert_eq!(sender.chat_end(&idle).await["payload"]["state"], "final");
    let key = new_key();
    let run = sender.chat_send(&key, "talk forever").await;
    there.next_event("exec.approval.requested").await;
    let listed = there.call_ok("exec.approval.list", json!({})).await;
    assert_eq!(listed.as_array().map(Vec::len), Some(1), "{listed}");
    // The store knows r1 holds the session and runs it.
    let query = format!("SELECT replica, running FROM pincer_sessions WHERE key = '{key}'");
    let mut held = postgres.psql(&query);
    for _ in 0..50 {
        if held == format!("r1|{run}") {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        held = postgres.psql(&query);
    }
    assert_eq!(held, format!("r1|{run}"));
    let killed = std::time::Instant::now();
    r1.stop().await;
    // The run ends as interrupted for the client elsewhere, within a few
    // leases (the presence renewed every third of one, looked for every
    // half).
    let end = there.chat_end(&run).await;
    assert_eq!(end["payload"]["state"], "error", "{end}");
    let message = end["payload"]["errorMessage"].as_str().unwrap_or_default();
    assert!(
        message.contains("interrupted") && message.contains("`r1`"),
        "{end}"
    );
    assert!(killed.elapsed() < std::time::Duration::from_secs(10));
    // Its question went with it, on every replica.
    let listed = there.call_ok("exec.approval.list", json!({})).await;
    assert_eq!(listed, json!([]), "{listed}");
    // r1's idle session is taken over too: r2 lists it, though no
    // message came for it.
    let deadline = std::time::Instant::now() + TIMEOUT;
    loop {
        let listed = there.call_ok("sessions.list", json!({})).await;
        let found = listed["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .any(|row| row["key"] == idle_key.as_str());
        if found {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "r1's idle session was never listed again: {listed}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    // The session goes on from another replica, with its history.
    let next = there.chat_send(&key, "are you there?").await;
    let end = there.chat_end(&next).await;
    assert_eq!(end["payload"]["state"], "final", "{end}");
    let requests = mock.requests();
    assert_eq!(requests.len(), 3, "one request per turn, none run twice");
    let body = requests[2].body.to_string();
    assert!(
        body.contains("talk forever") && body.contains("are you there?"),
        "{body}"
    );
    // The store's transcript says so; it loads on the replica that has it.
    let notice = postgres.psql(
        "SELECT count(*) FROM pincer_session_lines WHERE line LIKE '%interrupted: replica `r1`%'",
    );
    assert_eq!(notice, "1");
    let holder = postgres.psql(&format!(
        "SELECT replica FROM pincer_sessions WHERE key = '{key}'"
    ));
    assert!(holder == "r2" || holder == "r3", "{holder}");
    let home = if holder == "r2" { &homes[1] } else { &homes[2] };
    // It has the session's transcript (and maybe the idle one's).
    let found = transcripts(&home.home().join("sessions"));
    let texts: Vec<String> = found
        .iter()
        .map(|path| std::fs::read_to_string(path).unwrap())
        .filter(|text| text.contains("talk forever"))
        .collect();
    assert_eq!(texts.len(), 1, "{found:?}");
    assert!(texts[0].contains("are you there?"), "{}", texts[0]);
    // The replica that has it now goes too, the session idle: the other
    // takes it over once the lease ran out.
    let (holder, mut last, other) = if holder == "r2" {
        (r2, r3.admin().await, r3)
    } else {
        (r3, there, r2)
    };
    let holder_name = postgres.psql(&format!(
        "SELECT replica FROM pincer_sessions WHERE key = '{key}'"
    ));
    holder.stop().await;
    // Sent while the store still counts the killed replica as alive (as
    // in the moments before its lease runs out; here made to last, so
    // that a slow machine does not decide the test): the message waits
    // in the store's queue, which `pincer cluster status` counts, and
    // the other replica runs it once it has taken the session over.
    let seen = |when: &str| {
        postgres.psql(&format!(
            "UPDATE pincer_replicas SET seen_at = now() {when} WHERE name = '{holder_name}'"
        ))
    };
    seen("+ interval '1 hour'");
    let after = last.chat_send(&key, "and now?").await;
    let status = crate::cluster::status(&homes[0], &postgres.url()).await;
    assert_eq!(status["queued"], 1, "{status}");
    seen("- interval '1 hour'");
    let end = last.chat_end(&after).await;
    assert_eq!(end["payload"]["state"], "final", "{end}");
    assert_eq!(
        postgres.psql(&format!(
            "SELECT claimed_by IS NOT NULL FROM pincer_run_queue WHERE run = '{after}'"
        )),
        "t"
    );
    let requests = mock.requests();
    assert_eq!(requests.len(), 4);
    let body = requests[3].body.to_string();
    assert!(
        ["talk forever", "are you there?", "Back again.", "and now?"]
            .iter()
            .all(|said| body.contains(said)),
        "{body}"
    );
    assert_eq!(mock.violations(), Vec::<String>::new());
    other.stop().await;
}

#[tokio::test]
async fn a_bus_that_cannot_be_reached_or_has_no_store_stops_the_start_without_its_password() {
    let postgres = tokio::task::spawn_blocking(Postgres::start).await.unwrap();
    let mut nats = tokio::task::spawn_blocking(Nats::start).await.unwrap();
    let mock = MockModel::start().await;
    // Nothing listens on the bus's port once it is stopped.
    let port = nats.port();
    nats.stop();
    let bus = format!("nats://pincer:hunter2-secret@127.0.0.1:{port}");
    let refused = |home: &Sandbox| {
        let token = new_token();
        let mut command = gateway_command(home, &mock, Some(&token), &[]);
        async move {
            let out = tokio::time::timeout(TIMEOUT, command.output())
                .await
                .expect("the gateway gave up in time")
                .unwrap();
            assert!(!out.status.success());
            String::from_utf8_lossy(&out.stderr).to_string()
        }
    };
    let home = replica_home("r1", &postgres.url(), &bus);
    let stderr = refused(&home).await;
    assert!(
        stderr.contains(&format!(
            "cannot reach the cluster's bus nats://pincer:***@127.0.0.1:{port}"
        )),
        "{stderr}"
    );
    assert!(!stderr.contains("hunter2-secret"), "{stderr}");
    // A bus without a store is no cluster.
    let home = Sandbox::new();
    std::fs::write(
        home.home().join("config.toml"),
        format!("title_model = \"none\"\n[gateway]\n\n[cluster]\nbus = \"{bus}\"\n"),
    )
    .unwrap();
    let stderr = refused(&home).await;
    assert!(
        stderr.contains("[cluster] bus needs [cluster] store too"),
        "{stderr}"
    );
    assert!(!stderr.contains("hunter2-secret"), "{stderr}");
}

#[tokio::test]
async fn a_workflow_whose_replica_died_resumes_on_another_from_the_steps_the_store_kept() {
    let (postgres, nats) = tokio::join!(
        tokio::task::spawn_blocking(Postgres::start),
        tokio::task::spawn_blocking(Nats::start)
    );
    let (postgres, nats) = (postgres.unwrap(), nats.unwrap());
    let mock = MockModel::start().await;
    let bus = nats.url();
    let homes: Vec<Sandbox> = (1..=2)
        .map(|i| replica_home_with_lease(&format!("r{i}"), &postgres.url(), &bus, 2))
        .collect();
    // A model step, then a command that asks; the same workflow on both.
    let marker = homes[1].work().join("noted");
    for home in &homes {
        let dir = home.home().join("workflows");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("note.toml"),
            format!(
                "description = \"Note a word\"\n[[steps]]\nid = \"think\"\nkind = \"llm\"\nprompt = \"Say one word.\"\nnext = \"write\"\n[[steps]]\nid = \"write\"\nkind = \"tool\"\ntool = \"bash\"\nparams = {{ command = \"echo {{{{ steps.think.output }}}} > {}\" }}\n",
                marker.display()
            ),
        )
        .unwrap();
    }
    mock.push_side(Reply::sse(anthropic_text("Pelican", 10)));
    let (r1, r2) = tokio::join!(
        launch(&homes[0], &mock, "r1", &bus),
        launch(&homes[1], &mock, "r2", &bus)
    );
    let mut sender = r1.admin().await;
    let mut there = r2.admin().await;
    let key = new_key();
    let run = sender.chat_send(&key, "/workflow note").await;
    // The model step is done and the command asks: r1 dies there.
    there.next_event("exec.approval.requested").await;
    assert_eq!(mock.side_requests().len(), 1);
    r1.stop().await;
    let end = there.chat_end(&run).await;
    assert_eq!(end["payload"]["state"], "error", "{end}");
    assert!(!marker.exists());

    // r2 has the session, and the steps r1 finished, from the store:
    // the run resumes at the command, the model not asked again.
    let resumed = there.chat_send(&key, "/workflow resume").await;
    let requested = there.next_event("exec.approval.requested").await["payload"].clone();
    let id = requested["id"].as_str().unwrap().to_string();
    assert!(
        requested["request"]["command"]
            .as_str()
            .is_some_and(|c| c.contains("echo Pelican")),
        "{requested}"
    );
    there
        .call_ok(
            "exec.approval.resolve",
            json!({"id": id, "decision": "allow-once"}),
        )
        .await;
    let end = there.chat_end(&resumed).await;
    assert_eq!(end["payload"]["state"], "final", "{end}");
    assert_eq!(std::fs::read_to_string(&marker).unwrap(), "Pelican\n");
    assert_eq!(mock.side_requests().len(), 1, "the model step ran once");
    assert_eq!(
        postgres.psql(&format!(
            "SELECT replica FROM pincer_sessions WHERE key = '{key}'"
        )),
        "r2"
    );
    r2.stop().await;
}

/// Replica `name`'s home, on a store and a bus reached over TLS: `store`
/// (its URL says how the server is checked) and `bus`, whose server is
/// vouched for by the roots in `bus_ca`.
fn replica_home_tls(name: &str, store: &str, bus: &str, bus_ca: &std::path::Path) -> Sandbox {
    let sandbox = Sandbox::new();
    std::fs::write(
        sandbox.home().join("config.toml"),
        format!(
            "title_model = \"none\"\n[gateway]\n\n[cluster]\nstore = \"{store}\"\nbus = \"{bus}\"\nbus_ca = \"{}\"\nreplica = \"{name}\"\n",
            bus_ca.display()
        ),
    )
    .unwrap();
    sandbox
}

/// A team whose database and NATS server take TLS only: two replicas
/// check both servers against the team's CA (the store's password
/// exchange bound to the connection), share a session over them, and a
/// replica that trusts another CA does not start.
#[tokio::test]
async fn replicas_on_a_store_and_a_bus_that_take_tls_only_check_them_and_share_sessions() {
    let ca = std::sync::Arc::new(support::bridge::TestCa::new());
    let (postgres, nats) = tokio::join!(
        tokio::task::spawn_blocking({
            let ca = ca.clone();
            move || Postgres::start_tls(&ca)
        }),
        tokio::task::spawn_blocking({
            let ca = ca.clone();
            move || Nats::start_tls(&ca)
        })
    );
    let (postgres, nats) = (postgres.unwrap(), nats.unwrap());
    let roots = tempfile::tempdir().unwrap();
    let team_ca = roots.path().join("team-ca.pem");
    std::fs::write(&team_ca, &ca.ca_pem).unwrap();
    let other_ca = roots.path().join("other-ca.pem");
    std::fs::write(
        &other_ca,
        support::bridge::TestCa::named("another CA").ca_pem,
    )
    .unwrap();
    let store_trusting = |roots: &std::path::Path| {
        format!(
            "postgres://teller:teller-secret@localhost:{}/pincer?sslmode=verify-full&sslrootcert={}&channel_binding=require",
            postgres.port(),
            roots.display()
        )
    };
    let store = store_trusting(&team_ca);
    let bus = format!("tls://localhost:{}", nats.port());
    let mock = MockModel::start().await;
    mock.push(Reply::sse(anthropic_deltas(&[
        "Over ",
        "TLS ",
        "both ways.",
    ])));
    mock.push(Reply::sse(anthropic_text("Sent from the second.", 20)));
    let homes = [
        replica_home_tls("r1", &store, &bus, &team_ca),
        replica_home_tls("r2", &store, &bus, &team_ca),
    ];
    let (r1, r2) = tokio::join!(
        launch(&homes[0], &mock, "r1", &bus),
        launch(&homes[1], &mock, "r2", &bus)
    );
    let mut sender = r1.admin().await;
    let mut there = r2
        .operator(&["operator.read", "operator.write"], &["tool-events"])
        .await;
    let key = new_key();
    let run = sender.chat_send(&key, "say it").await;
    for client in [&mut sender, &mut there] {
        let end = client.chat_end(&run).await;
        assert_eq!(end["payload"]["state"], "final", "{end}");
    }
    assert_eq!(run_events(&there, &run), run_events(&sender, &run));
    // r2 sends to the session r1 runs, through the queue in the store.
    let second = there.chat_send(&key, "and again").await;
    for client in [&mut there, &mut sender] {
        let end = client.chat_end(&second).await;
        assert_eq!(end["payload"]["state"], "final", "{end}");
    }
    assert_eq!(mock.requests().len(), 2);
    // Both replicas' connections to the store are encrypted (the server
    // takes no other).
    let encrypted = postgres.psql(
        "SELECT count(DISTINCT application_name) FROM pg_stat_ssl JOIN pg_stat_activity USING (pid)
         WHERE usename = 'teller' AND ssl",
    );
    assert_ne!(encrypted, "0");

    // A replica that trusts another CA reaches neither server.
    let refused = async |home: &Sandbox| {
        let token = new_token();
        let mut command = gateway_command(home, &mock, Some(&token), &[]);
        let out = tokio::time::timeout(TIMEOUT, command.output())
            .await
            .expect("the gateway gave up in time")
            .unwrap();
        assert!(!out.status.success());
        String::from_utf8_lossy(&out.stderr).to_string()
    };
    let stderr = refused(&replica_home_tls("r3", &store, &bus, &other_ca)).await;
    assert!(
        stderr.contains("cannot reach the cluster's bus"),
        "{stderr}"
    );
    assert!(stderr.contains("UnknownIssuer"), "{stderr}");
    let stderr = refused(&replica_home_tls(
        "r4",
        &store_trusting(&other_ca),
        &bus,
        &team_ca,
    ))
    .await;
    assert!(
        stderr.contains("cannot reach the cluster store"),
        "{stderr}"
    );
    assert!(stderr.contains("UnknownIssuer"), "{stderr}");
    assert!(!stderr.contains("teller-secret"), "{stderr}");
    assert_eq!(mock.requests().len(), 2, "a refused replica ran nothing");

    // The system's roots (here `SSL_CERT_FILE`, which they honour, names
    // the team's CA): `sslrootcert=system` for the store, and no `bus_ca`.
    let system = replica_home(
        "r5",
        &format!(
            "postgres://teller:teller-secret@localhost:{}/pincer?sslrootcert=system",
            postgres.port()
        ),
        &bus,
    );
    let token = new_token();
    let mut command = gateway_command(&system, &mock, Some(&token), &[]);
    command.env("SSL_CERT_FILE", &team_ca);
    let r5 = Gateway::spawn(command, Some(&token)).await;
    let said = "cluster: replica `r5` on store";
    r5.stderr
        .wait_line(TIMEOUT, |l| l.contains(said).then_some(()))
        .await
        .unwrap_or_else(|| panic!("no {said:?} in:\n{}", r5.stderr.text()));
    r5.stop().await;
}

/// The history a session's model request carried, as one string.
fn asked_with(mock: &MockModel, n: usize) -> String {
    mock.requests()[n].body["messages"].to_string()
}

/// `sessions.patch`, `sessions.reset` and `sessions.delete` from any
/// replica act on the cluster's session: the replica that runs it changes,
/// resets or deletes it, the
/// store forgets the old history (a deleted session's lines are gone), and
/// no replica brings it back: not the one that ran it, nor one that takes
/// its key later.
#[tokio::test]
async fn a_session_patched_reset_or_deleted_from_any_replica_is_so_everywhere_and_never_comes_back()
{
    let (postgres, nats) = tokio::join!(
        tokio::task::spawn_blocking(Postgres::start),
        tokio::task::spawn_blocking(Nats::start)
    );
    let (postgres, nats) = (postgres.unwrap(), nats.unwrap());
    let mock = MockModel::start().await;
    for said in ["One.", "Two.", "Three.", "Four."] {
        mock.push(Reply::sse(anthropic_text(said, 20)));
    }
    let bus = nats.url();
    let homes = [
        replica_home("r1", &postgres.url(), &bus),
        replica_home("r2", &postgres.url(), &bus),
    ];
    let (r1, r2) = tokio::join!(
        launch(&homes[0], &mock, "r1", &bus),
        launch(&homes[1], &mock, "r2", &bus)
    );
    let mut here = r1.admin().await;
    let mut there = r2.admin().await;
    let key = new_key();
    let first = here.chat_send(&key, "remember pelicans").await;
    here.chat_end(&first).await;
    let old = postgres.psql(&format!(
        "SELECT session_id FROM pincer_sessions WHERE key = '{key}'"
    ));

    // r2 renames the session r1 runs: r1 changes it.
    let patched = there
        .call_ok(
            "sessions.patch",
            json!({"key": key, "label": "Pelican notes", "expectedSessionId": old}),
        )
        .await;
    assert_eq!(patched["sessionId"], json!(old), "{patched}");
    assert_eq!(patched["entry"]["label"], "Pelican notes", "{patched}");
    let listed = here.call_ok("sessions.list", json!({})).await;
    let row = listed["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|row| row["key"] == key)
        .cloned()
        .unwrap_or_default();
    assert_eq!(row["label"], "Pelican notes", "{listed}");
    let stale = there
        .call(
            "sessions.patch",
            json!({"key": key, "label": "x", "expectedSessionId": "sess_other"}),
        )
        .await;
    assert_eq!(stale["ok"], false, "{stale}");

    // r2 resets the session r1 runs: r1 gives the key a new session, and
    // the store says so.
    let reset = there
        .call_ok("sessions.reset", json!({"key": key, "reason": "new"}))
        .await;
    let new = reset["sessionId"].as_str().unwrap().to_string();
    assert_ne!(new, old, "{reset}");
    assert_eq!(
        postgres.psql(&format!(
            "SELECT session_id || ' ' || replica FROM pincer_sessions WHERE key = '{key}'"
        )),
        format!("{new} r1")
    );
    let history = there
        .call_ok("chat.history", json!({"sessionKey": key}))
        .await;
    assert!(
        !history["messages"].to_string().contains("pelicans"),
        "{history}"
    );
    let second = there.chat_send(&key, "what did I say?").await;
    there.chat_end(&second).await;
    assert!(
        !asked_with(&mock, 1).contains("pelicans"),
        "the reset session remembered"
    );

    // r2 deletes it: it is gone from r1 and from the store, lines and all.
    let deleted = there.call_ok("sessions.delete", json!({"key": key})).await;
    assert_eq!(deleted["deleted"], true, "{deleted}");
    assert_eq!(
        postgres.psql(&format!(
            "SELECT count(*) FROM pincer_sessions WHERE key = '{key}'"
        )),
        "0"
    );
    assert_eq!(
        postgres.psql(&format!(
            "SELECT count(*) FROM pincer_session_lines WHERE session_id = '{new}'"
        )),
        "0"
    );
    // The next message, on either replica, starts afresh.
    let third = here.chat_send(&key, "anything before?").await;
    here.chat_end(&third).await;
    assert!(
        !asked_with(&mock, 2).contains("what did I say"),
        "the deleted session came back"
    );

    // Deleted where it runs: the store forgets it too, and r1 does not
    // bring it back from the store on the next message.
    let deleted = here.call_ok("sessions.delete", json!({"key": key})).await;
    assert_eq!(deleted["deleted"], true, "{deleted}");
    let fourth = here.chat_send(&key, "and now?").await;
    here.chat_end(&fourth).await;
    assert!(
        !asked_with(&mock, 3).contains("anything before"),
        "the deleted session came back"
    );
}
