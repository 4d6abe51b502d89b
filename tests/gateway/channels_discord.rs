//! The Discord channel end to end: the real `pincer gateway` with the mock
//! model, connected to a local Discord (tests/support/discord_api.rs: REST
//! and the gateway websocket). Each test is one thing a Discord user (or
//! Discord itself) does, and what pincer must answer.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use support::acp_client::{Sandbox, TIMEOUT};
use support::discord_api::{BOT_ID, DiscordApi};
use support::gateway::{Gateway, gateway_command, new_token};
use support::mock_model::{MockModel, Reply};
use support::sse::{anthropic_deltas, anthropic_text, anthropic_tool_call};
use support::wait_until;

/// The owner: on the allow-list.
const OWNER: &str = "1000000000000000001";
/// The owner's direct-message channel with the bot.
const DM: &str = "1200000000000000001";

struct Bench {
    sandbox: Sandbox,
    model: MockModel,
    discord: DiscordApi,
    gateway: Option<Gateway>,
    bot_token: String,
}

impl Bench {
    /// A gateway whose `[channels.discord]` points at a fresh mock (the
    /// gateway URL asked of `GET /gateway/bot`), with `extra` TOML lines in
    /// the table; waits for READY.
    async fn start(extra: &str) -> Self {
        let sandbox = Sandbox::new();
        let model = MockModel::start().await;
        let bot_token = format!("bot-{}", uuid::Uuid::new_v4().simple());
        let discord = DiscordApi::start(&bot_token).await;
        std::fs::write(
            sandbox.home().join("config.toml"),
            format!(
                "[channels.discord]\ntoken_env = \"PINCER_TEST_DISCORD\"\napi_url = \"{}\"\ngateway_url = \"\"\nallow = [\"{OWNER}\"]\nedit_interval_ms = 100\nsandbox = {{ mode = \"off\" }}\n{extra}\n",
                discord.api_url
            ),
        )
        .unwrap();
        let mut bench = Self {
            sandbox,
            model,
            discord,
            gateway: None,
            bot_token,
        };
        bench.spawn(None).await;
        bench.ready(1).await;
        bench
    }

    /// Starts the gateway with the bot token (or `token`).
    async fn spawn(&mut self, token: Option<&str>) {
        let gw = new_token();
        let mut cmd = gateway_command(&self.sandbox, &self.model, Some(&gw), &[]);
        cmd.env("PINCER_TEST_DISCORD", token.unwrap_or(&self.bot_token));
        self.gateway = Some(Gateway::spawn(cmd, Some(&gw)).await);
    }

    /// Waits for the `n`th gateway connection to be identified or resumed.
    async fn ready(&self, n: usize) {
        let discord = self.discord.clone();
        wait_until(
            &format!("connection {n} to the Discord gateway"),
            TIMEOUT,
            || discord.live() == Some(n - 1),
        )
        .await;
    }

    async fn until_texts(&self, what: &str, expected: &[&str]) {
        let discord = self.discord.clone();
        let expected: Vec<String> = expected.iter().map(|s| s.to_string()).collect();
        let deadline = tokio::time::Instant::now() + TIMEOUT;
        while discord.texts() != expected {
            assert!(
                tokio::time::Instant::now() < deadline,
                "{what}: shown {:?}, expected {expected:?}",
                discord.texts()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// A body pincer sent, without the mock's bookkeeping.
fn sent(body: &Value) -> Value {
    let mut body = body.clone();
    body.as_object_mut().unwrap().remove("__id");
    body
}

#[tokio::test]
async fn a_direct_message_is_answered_in_streamed_edits_ending_with_the_whole_text() {
    let bench = Bench::start("").await;
    let parts = [
        "Here is the first part of the answer, ",
        "then a second part that makes it longer, ",
        "and a third one ",
        "to finish it.",
    ];
    let whole = parts.concat();
    bench.model.push(Reply::Sse {
        body: anthropic_deltas(&parts),
        delay: Duration::from_millis(150),
        gate: None,
    });
    bench.discord.dm(OWNER, DM, "hello there");
    bench.until_texts("the reply", &[&whole]).await;

    let asked = &bench.model.requests()[0].body;
    let last = asked["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .clone();
    assert_eq!(last["role"], "user");
    assert!(last.to_string().contains("hello there"), "{last}");

    // One message, streamed: created with a beginning, then edited.
    let posts = bench.discord.posts();
    assert_eq!(posts.len(), 1);
    assert!(posts[0].path == format!("/channels/{DM}/messages"));
    let first = posts[0].body["content"].as_str().unwrap();
    assert!(
        first.len() < whole.len() && whole.starts_with(first),
        "{first}"
    );
    let patches = bench.discord.calls("PATCH", "");
    assert!(!patches.is_empty());
    for patch in &patches {
        assert_eq!(
            patch.path,
            format!(
                "/channels/{DM}/messages/{}",
                posts[0].body["__id"].as_str().unwrap()
            )
        );
        assert_eq!(patch.body["allowed_mentions"], json!({"parse": []}));
    }
    assert_eq!(
        sent(&patches.last().unwrap().body),
        json!({"content": whole, "components": [], "allowed_mentions": {"parse": []}})
    );
    // Typing was shown in the chat while the agent worked.
    let typing = bench.discord.calls("POST", "/typing");
    assert!(
        typing
            .iter()
            .any(|t| t.path == format!("/channels/{DM}/typing"))
    );
}

#[tokio::test]
async fn a_long_reply_is_split_under_2000_characters() {
    let bench = Bench::start("").await;
    let paragraphs: Vec<String> = (0..12)
        .map(|i| {
            format!(
                "Paragraph {i}: {}",
                "lorem ipsum dolor sit amet ".repeat(14).trim()
            )
        })
        .collect();
    let text = paragraphs.join("\n\n");
    assert!(text.chars().count() > 4000);
    bench.model.push(Reply::sse(anthropic_text(&text, 10)));
    bench.discord.dm(OWNER, DM, "write a lot");
    let discord = bench.discord.clone();
    wait_until("the whole reply", TIMEOUT, || {
        discord.texts().join("\n\n") == text
    })
    .await;
    let texts = bench.discord.texts();
    assert!(texts.len() >= 3, "{}", texts.len());
    for piece in &texts {
        assert!(piece.chars().count() <= 2000, "{}", piece.chars().count());
    }
}

#[tokio::test]
async fn an_approval_is_answered_with_a_button() {
    let bench = Bench::start("").await;
    let marker = format!("discord-approved-{}", uuid::Uuid::new_v4().simple());
    bench.model.push(Reply::sse(anthropic_tool_call(
        "toolu_d1",
        "bash",
        &json!({"command": format!("echo ran > {marker}")}),
    )));
    bench.model.push(Reply::sse(anthropic_text("Done.", 10)));
    bench.discord.dm(OWNER, DM, "Make the marker.");

    let discord = bench.discord.clone();
    wait_until("the question with buttons", TIMEOUT, || {
        discord
            .posts()
            .iter()
            .any(|p| p.body["components"] != json!([]))
    })
    .await;
    let question = bench
        .discord
        .posts()
        .into_iter()
        .find(|p| p.body["components"] != json!([]))
        .unwrap();
    let first = question.body["components"][0]["components"][0]["custom_id"]
        .as_str()
        .unwrap()
        .to_string();
    let id = first
        .strip_prefix("ap:")
        .and_then(|r| r.strip_suffix(":allow-once"))
        .unwrap_or_else(|| panic!("{first}"));
    assert_eq!(
        question.body["components"],
        json!([{"type": 1, "components": [
            {"type": 2, "style": 2, "label": "Allow once", "custom_id": format!("ap:{id}:allow-once")},
            {"type": 2, "style": 2, "label": "Always allow", "custom_id": format!("ap:{id}:allow-always")},
            {"type": 2, "style": 4, "label": "Deny", "custom_id": format!("ap:{id}:deny")},
        ]}])
    );
    assert!(!bench.sandbox.work().join(&marker).exists());

    let message = question.body["__id"].as_str().unwrap();
    let pressed = std::time::Instant::now();
    let (interaction, token) =
        bench
            .discord
            .press_in_dm(OWNER, DM, message, &format!("ap:{id}:allow-once"));
    let callback = format!("/interactions/{interaction}/{token}/callback");
    wait_until("the interaction's callback", TIMEOUT, || {
        !discord.calls("POST", &callback).is_empty()
    })
    .await;
    let answered = &discord.calls("POST", &callback)[0];
    assert_eq!(answered.body, json!({"type": 6}));
    assert!(answered.at.duration_since(pressed) < Duration::from_secs(3));

    let work = bench.sandbox.work();
    wait_until("the command ran", TIMEOUT, || work.join(&marker).exists()).await;
    let question_text = question.body["content"].as_str().unwrap().to_string();
    let settled = format!("{question_text}\n\n✅ Allowed once.");
    bench
        .until_texts("the question settled and the reply", &[&settled, "Done."])
        .await;
    // The settled question has no buttons left.
    let shown = bench.discord.shown();
    assert_eq!(shown[0].1["components"], json!([]));
}

#[tokio::test]
async fn an_unknown_user_is_refused_until_paired() {
    let bench = Bench::start("").await;
    let stranger = "1000000000000000777";
    let their_dm = "1200000000000000777";
    // In a guild channel, a stranger's mention gets nothing at all.
    bench.discord.guild_message(
        stranger,
        "1100000000000000001",
        "1200000000000000555",
        &format!("<@{BOT_ID}> hi"),
        true,
    );
    bench.discord.dm(stranger, their_dm, "let me in");
    let discord = bench.discord.clone();
    wait_until("the pairing answer", TIMEOUT, || discord.posts().len() == 1).await;
    let post = &bench.discord.posts()[0];
    assert_eq!(post.path, format!("/channels/{their_dm}/messages"));
    let text = post.body["content"].as_str().unwrap();
    let code = text
        .split("\n\n")
        .nth(1)
        .unwrap_or_else(|| panic!("{text}"))
        .trim()
        .to_string();
    assert!(
        text.contains(&format!("pincer channels approve {code}")),
        "{text}"
    );
    assert!(bench.model.requests().is_empty());

    let approved = bench
        .sandbox
        .command(&["channels", "approve", &code])
        .output()
        .await
        .unwrap();
    assert!(approved.status.success(), "{approved:?}");
    assert_eq!(
        String::from_utf8_lossy(&approved.stdout),
        format!("Approved user{stranger} ({stranger}) on discord.\n")
    );

    bench.model.push(Reply::sse(anthropic_text("Welcome.", 10)));
    bench.discord.dm(stranger, their_dm, "now?");
    wait_until("the paired user's answer", TIMEOUT, || {
        discord.texts().last().map(String::as_str) == Some("Welcome.")
    })
    .await;
    assert_eq!(bench.model.requests().len(), 1);
    assert!(
        bench
            .discord
            .posts()
            .iter()
            .all(|p| !p.path.contains("1200000000000000555"))
    );
}

#[tokio::test]
async fn a_429_is_waited_out_for_its_retry_after() {
    let bench = Bench::start("").await;
    bench
        .discord
        .rate_limit("POST", &format!("/channels/{DM}/messages"), 1.5);
    bench
        .model
        .push(Reply::sse(anthropic_text("Slow but sure.", 10)));
    bench.discord.dm(OWNER, DM, "hi");
    bench.until_texts("the reply", &["Slow but sure."]).await;
    let tries: Vec<_> = bench
        .discord
        .rest()
        .into_iter()
        .filter(|r| r.method == "POST" && r.path.ends_with("/messages"))
        .collect();
    assert_eq!(
        tries.iter().map(|r| r.status).collect::<Vec<_>>(),
        vec![429, 200]
    );
    let gap = tries[1].at.duration_since(tries[0].at);
    assert!(gap >= Duration::from_millis(1500), "{gap:?}");
}

#[tokio::test]
async fn no_reply_is_never_sent() {
    let bench = Bench::start("").await;
    bench.model.push(Reply::sse(anthropic_text("NO_REPLY", 10)));
    bench.discord.dm(OWNER, DM, "nothing to say?");
    bench.model.wait_for_requests(1, TIMEOUT).await;
    bench.model.push(Reply::sse(anthropic_text("Second.", 10)));
    bench.discord.dm(OWNER, DM, "and now?");
    // The chat's messages go out in order: had the first reply been
    // sent, it would be shown before this one.
    bench
        .until_texts("the second reply only", &["Second."])
        .await;
    assert_eq!(bench.model.requests().len(), 2);
}

#[tokio::test]
async fn everyone_in_a_reply_pings_nobody() {
    let bench = Bench::start("").await;
    let text = format!("@everyone @here the build is green, <@{OWNER}> and <@&42>");
    bench.model.push(Reply::sse(anthropic_text(&text, 10)));
    bench.discord.dm(OWNER, DM, "announce it");
    bench.until_texts("the reply", &[&text]).await;
    let (_, body) = bench.discord.shown().remove(0);
    assert_eq!(
        sent(&body),
        json!({"content": text, "components": [], "allowed_mentions": {"parse": []}})
    );
}

#[tokio::test]
async fn a_dropped_socket_and_a_restart_resume_the_session_and_lose_nothing() {
    let mut bench = Bench::start("").await;
    bench.model.push(Reply::sse(anthropic_text("One.", 10)));
    bench.discord.dm(OWNER, DM, "first");
    bench.until_texts("the first reply", &["One."]).await;

    // The socket drops; a message written meanwhile is replayed on Resume.
    let session = bench.discord.session_id().unwrap();
    let seq = bench.discord.seq();
    bench.discord.drop_socket();
    bench.model.push(Reply::sse(anthropic_text("Two.", 10)));
    bench.discord.dm(OWNER, DM, "second");
    let second = bench.discord.seq();
    bench.ready(2).await;
    bench
        .until_texts("the reply to the replayed message", &["One.", "Two."])
        .await;
    let resumed = &bench.discord.connections()[1];
    assert!(
        resumed.target.starts_with("/resume/?v=10&encoding=json"),
        "{}",
        resumed.target
    );
    assert_eq!(
        resumed.sent[0],
        json!({"op": 6, "d": {"token": bench.bot_token, "session_id": session, "seq": seq}})
    );

    // The gateway stops; what is written while it is down comes after the
    // stored sequence number (that of the last dispatch the gateway took,
    // the message at least), and a new gateway resumes from it.
    let at_stop = bench.discord.seq();
    bench.gateway.take().unwrap().stop().await;
    let discord = bench.discord.clone();
    wait_until("the old socket closed", TIMEOUT, || !discord.connected()).await;
    bench.model.push(Reply::sse(anthropic_text("Three.", 10)));
    bench.discord.dm(OWNER, DM, "third");
    bench.spawn(None).await;
    bench.ready(3).await;
    bench
        .until_texts(
            "the reply to what came while down",
            &["One.", "Two.", "Three."],
        )
        .await;
    let restarted = bench.discord.connections()[2].sent[0].clone();
    let stored = restarted["d"]["seq"].as_u64().unwrap();
    assert!((second..=at_stop).contains(&stored), "{restarted}");
    assert_eq!(
        restarted,
        json!({"op": 6, "d": {"token": bench.bot_token, "session_id": session, "seq": stored}})
    );
    assert_eq!(bench.model.requests().len(), 3);
    // Identified once: every later connection resumed.
    let identifies = bench
        .discord
        .connections()
        .iter()
        .flat_map(|c| c.sent.clone())
        .filter(|p| p["op"] == 2)
        .count();
    assert_eq!(identifies, 1);
}

#[tokio::test]
async fn a_missing_heartbeat_ack_is_a_zombie_connection_that_resumes() {
    let bench = Bench::start("").await;
    // Fast heartbeats for this test; the first connection had the default.
    bench.discord.set_heartbeat_interval(200);
    bench
        .discord
        .send_op(json!({"op": 7, "d": null, "s": null, "t": null}));
    bench.ready(2).await;
    let session = bench.discord.session_id().unwrap();
    assert_eq!(bench.discord.connections()[1].sent[0]["op"], 6);

    bench.discord.ack_heartbeats(false);
    bench.ready(3).await;
    let zombie = &bench.discord.connections()[1];
    assert!(zombie.sent.iter().filter(|p| p["op"] == 1).count() >= 1);
    assert_eq!(
        bench.discord.connections()[2].sent[0]["d"]["session_id"],
        json!(session)
    );
    bench.discord.ack_heartbeats(true);
    bench
        .model
        .push(Reply::sse(anthropic_text("Still here.", 10)));
    bench.discord.dm(OWNER, DM, "ping");
    bench.until_texts("the reply", &["Still here."]).await;
}

#[tokio::test]
async fn a_refused_token_stops_the_channel_once_and_the_gateway_goes_on() {
    let sandbox = Sandbox::new();
    let model = MockModel::start().await;
    let discord = DiscordApi::start("the-right-token").await;
    std::fs::write(
        sandbox.home().join("config.toml"),
        format!(
            "[channels.discord]\ntoken_env = \"PINCER_TEST_DISCORD\"\napi_url = \"{}\"\ngateway_url = \"{}\"\nallow = [\"{OWNER}\"]\n",
            discord.api_url, discord.gateway_url
        ),
    )
    .unwrap();
    let gw = new_token();
    let mut cmd = gateway_command(&sandbox, &model, Some(&gw), &[]);
    cmd.env("PINCER_TEST_DISCORD", "a-wrong-token");
    let gateway = Gateway::spawn(cmd, Some(&gw)).await;
    let stopped = gateway
        .stderr
        .wait_line(TIMEOUT, |line| {
            line.contains("channel discord stopped")
                .then(|| line.to_string())
        })
        .await
        .unwrap_or_else(|| panic!("no stop line; stderr:\n{}", gateway.stderr.text()));
    assert!(stopped.contains("close 4004"), "{stopped}");
    assert!(stopped.contains("[channels.discord]"), "{stopped}");
    assert!(!stopped.contains("a-wrong-token"), "{stopped}");

    // The gateway and its other clients work on.
    model.push(Reply::sse(anthropic_text("Fine.", 10)));
    let mut client = gateway.admin().await;
    let run = client.chat_send("main", "still there?").await;
    let end = client.chat_end(&run).await;
    assert_eq!(end["payload"]["state"], "final");

    // One identify, refused; no second try.
    let connections = discord.connections();
    assert_eq!(connections.len(), 1);
    assert_eq!(connections[0].sent.len(), 1);
    assert_eq!(connections[0].sent[0]["op"], 2);
    assert_eq!(connections[0].sent[0]["d"]["intents"], 37376);
    assert!(discord.rest().is_empty());
    gateway.stop().await;
}

#[tokio::test]
async fn the_gateway_s_heartbeat_requests_and_invalid_sessions_are_followed() {
    let bench = Bench::start("").await;
    // A long interval: heartbeats now come only when asked for.
    bench.discord.set_heartbeat_interval(60_000);
    bench
        .discord
        .send_op(json!({"op": 7, "d": null, "s": null, "t": null}));
    bench.ready(2).await;
    let discord = bench.discord.clone();
    let seq = discord.seq();
    bench
        .discord
        .send_op(json!({"op": 1, "d": null, "s": null, "t": null}));
    wait_until("a heartbeat on request", TIMEOUT, || {
        discord.connections()[1]
            .sent
            .contains(&json!({"op": 1, "d": seq}))
    })
    .await;

    // Not resumable: a new session, identified at the gateway's URL.
    let old = discord.session_id().unwrap();
    bench
        .discord
        .send_op(json!({"op": 9, "d": false, "s": null, "t": null}));
    bench.ready(3).await;
    let fresh = &discord.connections()[2];
    assert!(
        fresh.target.starts_with("/?v=10&encoding=json"),
        "{}",
        fresh.target
    );
    assert_eq!(fresh.sent[0]["op"], 2);
    let new = discord.session_id().unwrap();
    assert_ne!(new, old);

    // Resumable: the new session is resumed.
    bench
        .discord
        .send_op(json!({"op": 9, "d": true, "s": null, "t": null}));
    bench.ready(4).await;
    let resumed = &discord.connections()[3];
    assert_eq!(resumed.sent[0]["op"], 6);
    assert_eq!(resumed.sent[0]["d"]["session_id"], json!(new));

    bench.model.push(Reply::sse(anthropic_text("Back.", 10)));
    bench.discord.dm(OWNER, DM, "still there?");
    bench.until_texts("the reply", &["Back."]).await;
}

#[tokio::test]
async fn in_a_guild_channel_the_agent_answers_only_when_mentioned_without_the_mention() {
    let bench = Bench::start("").await;
    let guild = "1100000000000000001";
    let channel = "1200000000000000002";
    bench
        .discord
        .guild_message(OWNER, guild, channel, "just chatting with friends", false);
    bench.model.push(Reply::sse(anthropic_text("On it.", 10)));
    bench.discord.guild_message(
        OWNER,
        guild,
        channel,
        &format!("<@{BOT_ID}> run the tests"),
        true,
    );
    bench
        .until_texts("the reply to the mention", &["On it."])
        .await;
    assert_eq!(
        bench.discord.posts()[0].path,
        format!("/channels/{channel}/messages")
    );
    let requests = bench.model.requests();
    assert_eq!(requests.len(), 1, "the unmentioned message ran nothing");
    let asked = requests[0].body["messages"].to_string();
    assert!(asked.contains("run the tests"), "{asked}");
    assert!(!asked.contains("just chatting"), "{asked}");
    assert!(!asked.contains(&format!("<@{BOT_ID}>")), "{asked}");
}

#[tokio::test]
async fn a_stored_session_whose_resume_url_is_gone_is_given_up_for_a_new_one() {
    let sandbox = Sandbox::new();
    let model = MockModel::start().await;
    let bot_token = format!("bot-{}", uuid::Uuid::new_v4().simple());
    let discord = DiscordApi::start(&bot_token).await;
    std::fs::write(
        sandbox.home().join("config.toml"),
        format!(
            "[channels.discord]\ntoken_env = \"PINCER_TEST_DISCORD\"\napi_url = \"{}\"\nallow = [\"{OWNER}\"]\n",
            discord.api_url
        ),
    )
    .unwrap();
    // A host that hangs up on every connection (held for the whole test,
    // so that no other test's listener takes its port).
    let gone = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let dead = format!("ws://{}", gone.local_addr().unwrap());
    tokio::spawn(async move {
        while let Ok((socket, _)) = gone.accept().await {
            drop(socket);
        }
    });
    let kept = sandbox.home().join("channels").join("discord");
    std::fs::create_dir_all(&kept).unwrap();
    std::fs::write(
        kept.join("session.json"),
        json!({"session_id": "old", "resume_url": dead, "seq": 41}).to_string(),
    )
    .unwrap();
    let gw = new_token();
    let mut cmd = gateway_command(&sandbox, &model, Some(&gw), &[]);
    cmd.env("PINCER_TEST_DISCORD", &bot_token);
    let gateway = Gateway::spawn(cmd, Some(&gw)).await;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    while discord.live() != Some(0) {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no new session; stderr:\n{}",
            gateway.stderr.text()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(discord.connections()[0].sent[0]["op"], 2);
    gateway.stop().await;
}
