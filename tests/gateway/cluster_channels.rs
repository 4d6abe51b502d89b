//! A chat channel on a team gateway, on a real PostgreSQL store and a
//! real NATS bus (both started by the test): three replicas configured
//! with the same Telegram bot. One replica at a time polls (Telegram ends
//! a second bot instance's poll with 409 Conflict, as the mock does); when
//! it is killed another takes over; every message is answered once, also
//! one the killed poller had taken but not yet confirmed to Telegram.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use crate::support;

use std::time::Duration;

use support::acp_client::{Sandbox, TIMEOUT};
use support::gateway::{Gateway, gateway_command, new_token};
use support::mock_model::{MockModel, Reply, fixture};
use support::services::{Nats, Postgres};
use support::sse::{anthropic_text, anthropic_tool_call};
use support::telegram_api::TelegramApi;

const OWNER: i64 = 111_222_333;

fn replica_home(name: &str, store: &str, bus: &str, api: &TelegramApi) -> Sandbox {
    replica_home_with(name, store, bus, api, "poll_timeout_secs = 5")
}

/// Replica `name`'s home, its Telegram channel with `telegram` besides.
fn replica_home_with(
    name: &str,
    store: &str,
    bus: &str,
    api: &TelegramApi,
    telegram: &str,
) -> Sandbox {
    let sandbox = Sandbox::new();
    std::fs::write(
        sandbox.home().join("config.toml"),
        format!(
            "title_model = \"none\"\n[gateway]\n\n[channels.telegram]\napi_url = \"{}\"\nallow = [\"{OWNER}\"]\n{telegram}\nedit_interval_ms = 200\n\n[cluster]\nstore = \"{store}\"\nbus = \"{bus}\"\nreplica = \"{name}\"\nlease_seconds = 2\n",
            api.url
        ),
    )
    .unwrap();
    sandbox
}

async fn launch(sandbox: &Sandbox, mock: &MockModel, api: &TelegramApi, name: &str) -> Gateway {
    launch_with(sandbox, mock, api, name, &[]).await
}

/// [`launch`], with `env` besides the bot's token.
async fn launch_with(
    sandbox: &Sandbox,
    mock: &MockModel,
    api: &TelegramApi,
    name: &str,
    env: &[(&str, &str)],
) -> Gateway {
    let token = new_token();
    let mut cmd = gateway_command(sandbox, mock, Some(&token), &[]);
    cmd.env("TELEGRAM_BOT_TOKEN", &api.token);
    for (name, value) in env {
        cmd.env(name, value);
    }
    let gateway = Gateway::spawn(cmd, Some(&token)).await;
    let said = format!("cluster: replica `{name}` on store");
    gateway
        .stderr
        .wait_line(TIMEOUT, |l| l.contains(&said).then_some(()))
        .await
        .unwrap_or_else(|| panic!("no {said:?} in:\n{}", gateway.stderr.text()));
    gateway
}

/// Replica `name`'s home on `postgres` and `nats`, with a two-second
/// lease and `channel` (a `[channels.…]` table) in its config.
fn replica_with_channel(name: &str, postgres: &Postgres, nats: &Nats, channel: &str) -> Sandbox {
    let sandbox = Sandbox::new();
    std::fs::write(
        sandbox.home().join("config.toml"),
        format!(
            "title_model = \"none\"\n[gateway]\n\n{channel}\n\n[cluster]\nstore = \"{}\"\nbus = \"{}\"\nreplica = \"{name}\"\nlease_seconds = 2\n",
            postgres.url(),
            nats.url()
        ),
    )
    .unwrap();
    sandbox
}

/// A gateway on `home` with `env` (the channel's credentials) besides.
async fn spawn_replica(home: &Sandbox, mock: &MockModel, env: &[(&str, &str)]) -> Gateway {
    let token = new_token();
    let mut cmd = gateway_command(home, mock, Some(&token), &[]);
    for (name, value) in env {
        cmd.env(name, value);
    }
    Gateway::spawn(cmd, Some(&token)).await
}

/// The replica holding the channel's lease.
fn holder(postgres: &Postgres) -> String {
    postgres.psql("SELECT replica FROM pincer_leases WHERE name = 'channel:telegram'")
}

/// How many of the bot's messages in the owner's chat read `text`.
fn answers(api: &TelegramApi, text: &str) -> usize {
    api.chat(OWNER).iter().filter(|m| m.text == text).count()
}

async fn answered(api: &TelegramApi, text: &str) {
    api.until_chat(OWNER, text, |shown| shown.iter().any(|m| m.text == text))
        .await;
}

/// The model requests that end with the user's `text` (the last block
/// of the last message but the time: a message after an interrupted turn
/// is joined to the one before it).
fn turns_for(mock: &MockModel, text: &str) -> usize {
    mock.requests()
        .iter()
        .filter(|r| {
            let last = &r.body["messages"]
                .as_array()
                .and_then(|m| m.last())
                .cloned();
            let content = last.as_ref().map(|m| &m["content"]);
            let said = match content {
                Some(serde_json::Value::Array(blocks)) => blocks
                    .iter()
                    .rev()
                    .find(|b| {
                        !b["text"]
                            .as_str()
                            .unwrap_or_default()
                            .starts_with("Current time:")
                    })
                    .map(|b| b["text"].clone()),
                other => other.cloned(),
            };
            said.is_some_and(|said| said.to_string().contains(text))
        })
        .count()
}

/// Watches the poll for `how_long`: never more than one replica polls.
async fn one_poller(api: &TelegramApi, how_long: Duration) {
    let conflicts = api.conflicts();
    let until = std::time::Instant::now() + how_long;
    while std::time::Instant::now() < until {
        assert!(
            api.pollers() <= 1,
            "{} replicas poll at once: {:?}",
            api.pollers(),
            api.calls()
                .iter()
                .map(|c| format!("{} {} {:?}", c.method, c.body, c.error))
                .collect::<Vec<_>>()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(api.conflicts(), conflicts, "a poll was ended by another");
}

#[tokio::test]
async fn one_replica_polls_telegram_and_each_message_is_answered_once_across_kills_and_restarts() {
    let (postgres, nats) = tokio::join!(
        tokio::task::spawn_blocking(Postgres::start),
        tokio::task::spawn_blocking(Nats::start)
    );
    let (postgres, nats) = (postgres.unwrap(), nats.unwrap());
    let mock = MockModel::start().await;
    let api = TelegramApi::start().await;
    for text in ["Answer one.", "Answer two.", "Answer three."] {
        mock.push(Reply::sse(anthropic_text(text, 30)));
    }
    mock.push(Reply::Stall {
        body: fixture("anthropic/text.sse"),
        events: 4,
    });
    mock.push(Reply::sse(anthropic_text("Answer five.", 40)));
    let bus = nats.url();
    let names = ["r1", "r2", "r3"];
    let homes: Vec<Sandbox> = names
        .iter()
        .map(|name| replica_home(name, &postgres.url(), &bus, &api))
        .collect();
    let (r1, r2, r3) = tokio::join!(
        launch(&homes[0], &mock, &api, "r1"),
        launch(&homes[1], &mock, &api, "r2"),
        launch(&homes[2], &mock, &api, "r3")
    );
    let mut replicas: Vec<Option<Gateway>> = vec![Some(r1), Some(r2), Some(r3)];
    api.until("a poll", |api| api.is_polling().then_some(()))
        .await;
    // Three replicas run; one polls, for many lease checks.
    one_poller(&api, Duration::from_secs(3)).await;
    api.dm(OWNER, "first");
    answered(&api, "Answer one.").await;

    // The poller is killed; a message comes while nobody polls.
    let first = holder(&postgres);
    // `pincer cluster status` shows who holds the channel.
    let status = crate::cluster::status(&homes[0], &postgres.url()).await;
    assert_eq!(
        status["leases"].as_array().map(Vec::len),
        Some(1),
        "{status}"
    );
    assert_eq!(status["leases"][0]["name"], "channel:telegram", "{status}");
    assert_eq!(status["leases"][0]["replica"], first.as_str(), "{status}");
    let index = names.iter().position(|n| *n == first).unwrap();
    replicas[index].take().unwrap().stop().await;
    api.dm(OWNER, "second");
    answered(&api, "Answer two.").await;
    let second = holder(&postgres);
    assert_ne!(second, first, "the dead replica's lease was taken");

    // It comes back: the living poller keeps the channel.
    replicas[index] = Some(launch(&homes[index], &mock, &api, &first).await);
    tokio::time::sleep(Duration::from_secs(1)).await;
    let settled = api.conflicts();
    one_poller(&api, Duration::from_secs(3)).await;
    api.dm(OWNER, "third");
    answered(&api, "Answer three.").await;
    assert_eq!(holder(&postgres), second);

    // The poller takes a message and is killed before it confirmed it to
    // Telegram (its next polls fail): the next poller is given it again,
    // and leaves it, the turn having started on the dead replica.
    api.refuse_confirmations(true);
    let before = mock.requests().len();
    api.dm(OWNER, "fourth");
    let deadline = std::time::Instant::now() + TIMEOUT;
    while mock.requests().len() == before && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_eq!(
        mock.requests().len(),
        before + 1,
        "the turn started; Telegram's calls: {:?}",
        api.calls()
            .iter()
            .map(|c| format!("{} {} {:?}", c.method, c.body, c.error))
            .collect::<Vec<_>>()
    );
    assert_eq!(api.unconfirmed(), 1, "the update is not confirmed");
    let index = names.iter().position(|n| *n == second).unwrap();
    replicas[index].take().unwrap().stop().await;
    api.refuse_confirmations(false);
    // Given again to the next poller, which confirms it without a turn.
    api.until("the update confirmed", |api| {
        (api.unconfirmed() == 0).then_some(())
    })
    .await;
    let third = holder(&postgres);
    assert!(third != second, "{third}");
    api.dm(OWNER, "fifth");
    answered(&api, "Answer five.").await;
    assert_eq!(turns_for(&mock, "fourth"), 1, "the message ran once");
    let last = mock.requests().pop().unwrap().body.to_string();
    assert!(
        ["first", "Answer one.", "second", "third", "fourth", "fifth"]
            .iter()
            .all(|said| last.contains(said)),
        "the session's history went with it: {last}"
    );

    // Every message was answered once, by exactly one turn each.
    tokio::time::sleep(Duration::from_secs(1)).await;
    for (asked, answer) in [
        ("first", "Answer one."),
        ("second", "Answer two."),
        ("third", "Answer three."),
        ("fifth", "Answer five."),
    ] {
        assert_eq!(answers(&api, answer), 1, "{answer}");
        assert_eq!(turns_for(&mock, asked), 1, "{asked}");
    }
    assert_eq!(mock.requests().len(), 5);
    assert!(api.conflicts() <= settled + 1, "{}", api.conflicts());
    assert_eq!(
        postgres.psql("SELECT count(*) FROM pincer_inbound WHERE id LIKE 'telegram:%'"),
        "5"
    );
    assert_eq!(mock.violations(), Vec::<String>::new());
    for replica in replicas.into_iter().flatten() {
        replica.stop().await;
    }
}

/// An update the platform delivers by webhook.
fn update(id: i64, message: i64, text: &str) -> serde_json::Value {
    serde_json::json!({"update_id": id, "message": {
        "message_id": message, "from": {"id": OWNER, "is_bot": false, "first_name": "Owner"},
        "chat": {"id": OWNER, "type": "private"}, "date": 1_764_020_000, "text": text}})
}

/// Posts `update` to `gateway`'s Telegram webhook with `secret`; the
/// response's status.
async fn post_update(gateway: &Gateway, secret: &str, update: &serde_json::Value) -> u16 {
    reqwest::Client::new()
        .post(format!("http://{}/channels/telegram", gateway.addr))
        .header("X-Telegram-Bot-Api-Secret-Token", secret)
        .json(update)
        .send()
        .await
        .unwrap()
        .status()
        .as_u16()
}

#[tokio::test]
async fn a_webhook_delivered_to_two_replicas_is_answered_once_and_a_store_down_asks_to_send_again()
{
    let (postgres, nats) = tokio::join!(
        tokio::task::spawn_blocking(Postgres::start),
        tokio::task::spawn_blocking(Nats::start)
    );
    let (mut postgres, nats) = (postgres.unwrap(), nats.unwrap());
    let mock = MockModel::start().await;
    let api = TelegramApi::start().await;
    let secret = format!("s_{}", uuid::Uuid::new_v4().simple());
    // Unsandboxed: a command is asked about in the chat.
    let webhook = "sandbox = { mode = \"off\" }\nmode = \"webhook\"\nwebhook_secret_env = \"TG_HOOK_SECRET\"\nwebhook_url = \"https://bot.example.com/channels/telegram\"";
    let bus = nats.url();
    let homes: Vec<Sandbox> = ["r1", "r2"]
        .iter()
        .map(|name| replica_home_with(name, &postgres.url(), &bus, &api, webhook))
        .collect();
    let env = [("TG_HOOK_SECRET", secret.as_str())];
    let (r1, r2) = tokio::join!(
        launch_with(&homes[0], &mock, &api, "r1", &env),
        launch_with(&homes[1], &mock, &api, "r2", &env)
    );
    // Both take webhooks once their channel runs.
    for replica in [&r1, &r2] {
        let mut admin = replica.admin().await;
        let deadline = std::time::Instant::now() + TIMEOUT;
        loop {
            let status = admin
                .call_ok("channels.status", serde_json::json!({}))
                .await;
            if status["channelAccounts"]["telegram"][0]["running"] == true {
                break;
            }
            assert!(std::time::Instant::now() < deadline, "{status}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    mock.push(Reply::sse(anthropic_text("Hooked once.", 20)));
    mock.push(Reply::sse(anthropic_text("Hooked twice.", 30)));

    // Telegram retries an update whose delivery it thought failed; behind
    // a load balancer the retry lands on the other replica, here at once.
    let first = update(100, 1, "first by hook");
    let (a, b) = tokio::join!(
        post_update(&r1, &secret, &first),
        post_update(&r2, &secret, &first)
    );
    assert_eq!((a, b), (200, 200));
    answered(&api, "Hooked once.").await;
    // And once more to each, later.
    assert_eq!(post_update(&r2, &secret, &first).await, 200);
    assert_eq!(post_update(&r1, &secret, &first).await, 200);

    // The next message reaches the other replica than the one that ran
    // the first: the session's replica answers it, with its history, and
    // the reply is sent once.
    let ran_first =
        postgres.psql("SELECT replica FROM pincer_sessions WHERE key LIKE 'telegram:%'");
    let other = if ran_first == "r1" { &r2 } else { &r1 };
    assert_eq!(
        post_update(other, &secret, &update(101, 2, "second by hook")).await,
        200
    );
    answered(&api, "Hooked twice.").await;
    let last = mock.requests().pop().unwrap().body.to_string();
    assert!(
        ["first by hook", "Hooked once.", "second by hook"]
            .iter()
            .all(|said| last.contains(said)),
        "{last}"
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(answers(&api, "Hooked once."), 1);
    assert_eq!(answers(&api, "Hooked twice."), 1);
    assert_eq!(
        turns_for(&mock, "first by hook"),
        1,
        "{:#?}",
        mock.requests()
            .iter()
            .map(|r| r.body["messages"].clone())
            .collect::<Vec<_>>()
    );
    assert_eq!(mock.requests().len(), 2);
    assert_eq!(
        postgres.psql("SELECT count(*) FROM pincer_inbound WHERE id LIKE 'telegram:%'"),
        "2"
    );

    // A question the session's replica asks in the chat is answered by a
    // press that reaches the other replica.
    let owner = if ran_first == "r1" { &r1 } else { &r2 };
    let marker = homes[if ran_first == "r1" { 0 } else { 1 }]
        .work()
        .join("pressed");
    mock.push(Reply::sse(anthropic_tool_call(
        "toolu_hook",
        "bash",
        &serde_json::json!({"command": format!("echo ran > {}", marker.display())}),
    )));
    mock.push(Reply::sse(anthropic_text("Ran it.", 50)));
    assert_eq!(
        post_update(owner, &secret, &update(110, 10, "make the marker")).await,
        200
    );
    let question = api
        .until_chat(OWNER, "the question", |m| {
            m.iter().any(|m| !m.buttons.is_empty())
        })
        .await
        .into_iter()
        .find(|m| !m.buttons.is_empty())
        .unwrap();
    let allow = question.buttons[0].1.clone();
    let press = serde_json::json!({"update_id": 111, "callback_query": {
        "id": "cq-elsewhere",
        "from": {"id": OWNER, "is_bot": false, "first_name": "Owner"},
        "message": {"message_id": question.id, "chat": {"id": OWNER, "type": "private"},
            "date": 1_764_020_001, "text": question.text},
        "data": allow}});
    assert_eq!(post_update(other, &secret, &press).await, 200);
    answered(&api, "Ran it.").await;
    assert_eq!(std::fs::read_to_string(&marker).unwrap(), "ran\n");
    let pressed = api
        .until("the press answered", |api| {
            api.calls_of("answercallbackquery")
                .into_iter()
                .find(|c| c.body["callback_query_id"] == "cq-elsewhere")
        })
        .await;
    assert_eq!(pressed.body["text"], "✅ Allowed once.");
    assert_eq!(mock.requests().len(), 4);
    // Asked in the chat once: the other replica, which heard the question
    // too, left it to the session's.
    let asked = api
        .calls_of("sendmessage")
        .iter()
        .filter(|c| {
            c.body["text"]
                .as_str()
                .unwrap_or_default()
                .contains("asks to run")
        })
        .count();
    assert_eq!(asked, 1, "the question was put in the chat {asked} times");

    // With the store down, a message is not run, and the chat is told to
    // send it again; once the store is back, it is answered.
    postgres.stop();
    assert_eq!(
        post_update(&r1, &secret, &update(102, 3, "third by hook")).await,
        200
    );
    api.until_chat(OWNER, "the store-down notice", |shown| {
        shown.iter().any(|m| {
            m.text.contains("cannot reach its cluster's store")
                && m.text.contains("send that again")
        })
    })
    .await;
    assert_eq!(mock.requests().len(), 4, "run without the store");
    postgres.start_again();
    mock.push(Reply::sse(anthropic_text("Hooked thrice.", 40)));
    let deadline = std::time::Instant::now() + TIMEOUT;
    let mut id = 103;
    while answers(&api, "Hooked thrice.") == 0 {
        // Sent again, as the user does, until the replica reaches the
        // store again.
        assert_eq!(
            post_update(&r1, &secret, &update(id, id, "third by hook")).await,
            200
        );
        id += 1;
        assert!(
            std::time::Instant::now() < deadline,
            "never answered once the store was back"
        );
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert_eq!(mock.violations(), Vec::<String>::new());
    for replica in [r1, r2] {
        replica.stop().await;
    }
}

/// Discord allows a bot one gateway connection per shard: three replicas
/// configured with the same bot hold one connection between them (its
/// lease in the store). When its replica is killed, another identifies
/// once the lease has run out, and each message is answered once.
#[tokio::test]
async fn one_replica_holds_discord_s_connection_and_another_takes_it_when_that_one_dies() {
    use support::discord_api::DiscordApi;
    const USER: &str = "1000000000000000001";
    const DM: &str = "1200000000000000001";
    let (postgres, nats) = tokio::join!(
        tokio::task::spawn_blocking(Postgres::start),
        tokio::task::spawn_blocking(Nats::start)
    );
    let (postgres, nats) = (postgres.unwrap(), nats.unwrap());
    let mock = MockModel::start().await;
    for text in ["Answer one.", "Answer two."] {
        mock.push(Reply::sse(anthropic_text(text, 30)));
    }
    let bot_token = format!("bot-{}", uuid::Uuid::new_v4().simple());
    let discord = DiscordApi::start(&bot_token).await;
    let names = ["r1", "r2", "r3"];
    let discord_table = format!(
        "[channels.discord]\ntoken_env = \"PINCER_TEST_DISCORD\"\napi_url = \"{}\"\ngateway_url = \"\"\nallow = [\"{USER}\"]\nedit_interval_ms = 100\nsandbox = {{ mode = \"off\" }}",
        discord.api_url
    );
    let homes: Vec<Sandbox> = names
        .iter()
        .map(|name| replica_with_channel(name, &postgres, &nats, &discord_table))
        .collect();
    let env = [("PINCER_TEST_DISCORD", bot_token.as_str())];
    let launch = async |home: &Sandbox| spawn_replica(home, &mock, &env).await;
    let (r1, r2, r3) = tokio::join!(launch(&homes[0]), launch(&homes[1]), launch(&homes[2]));
    let mut replicas = [Some(r1), Some(r2), Some(r3)];
    let identified = |discord: &DiscordApi| {
        discord
            .connections()
            .iter()
            .filter(|c| c.sent.iter().any(|p| p["op"] == 2))
            .count()
    };
    support::wait_until("a replica identifies", TIMEOUT, || discord.live().is_some()).await;
    // Many lease checks later, still one connection.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(identified(&discord), 1, "{:?}", discord.connections());
    assert_eq!(discord.connections().len(), 1);
    let first = postgres.psql("SELECT replica FROM pincer_leases WHERE name = 'channel:discord'");
    discord.dm(USER, DM, "first");
    let answered = |text: &'static str| {
        let discord = discord.clone();
        move || discord.texts().iter().any(|t| t == text)
    };
    support::wait_until("the first answer", TIMEOUT, answered("Answer one.")).await;

    // Its replica is killed: another identifies once the lease is out.
    let index = names.iter().position(|n| *n == first).unwrap();
    replicas[index].take().unwrap().stop().await;
    support::wait_until("another replica identifies", TIMEOUT, || {
        identified(&discord) == 2 && discord.live() == Some(1)
    })
    .await;
    let second = postgres.psql("SELECT replica FROM pincer_leases WHERE name = 'channel:discord'");
    assert_ne!(second, first);
    discord.dm(USER, DM, "second");
    support::wait_until("the second answer", TIMEOUT, answered("Answer two.")).await;
    tokio::time::sleep(Duration::from_secs(2)).await;
    assert_eq!(identified(&discord), 2, "a third connection");
    for text in ["Answer one.", "Answer two."] {
        let shown = discord.texts().iter().filter(|t| *t == text).count();
        assert_eq!(
            shown,
            1,
            "{text:?} shown {shown} times: {:?}",
            discord.texts()
        );
    }
    assert_eq!(mock.requests().len(), 2, "a message ran twice");
}

/// Slack's Events API on two replicas behind one URL: an event posted to
/// both at once (Slack's retry landing on the other) is answered once, and
/// the next one, posted to the replica that does not run the chat's
/// session, is answered once by the one that does, with the history.
#[tokio::test]
async fn a_slack_event_posted_to_two_replicas_is_answered_once_by_the_session_s_replica() {
    use support::slack_api::{SlackApi, dm, event_callback, sign};
    const BOT: &str = "xoxb-cluster-bot";
    const APP: &str = "xapp-cluster-app";
    const SECRET: &str = "0123456789abcdef0123456789abcdef";
    let (postgres, nats) = tokio::join!(
        tokio::task::spawn_blocking(Postgres::start),
        tokio::task::spawn_blocking(Nats::start)
    );
    let (postgres, nats) = (postgres.unwrap(), nats.unwrap());
    let mock = MockModel::start().await;
    mock.push(Reply::sse(anthropic_text("Slacked once.", 20)));
    mock.push(Reply::sse(anthropic_text("Slacked twice.", 30)));
    let slack = SlackApi::start(BOT, APP).await;
    let slack_table = format!(
        "[channels.slack]\napi_url = \"{}\"\nallow = [\"U1\"]\nmode = \"events\"\nedit_interval_ms = 150\nsandbox = {{ mode = \"off\" }}",
        slack.url
    );
    let homes: Vec<Sandbox> = ["r1", "r2"]
        .iter()
        .map(|name| replica_with_channel(name, &postgres, &nats, &slack_table))
        .collect();
    let env = [
        ("SLACK_BOT_TOKEN", BOT),
        ("SLACK_APP_TOKEN", APP),
        ("SLACK_SIGNING_SECRET", SECRET),
    ];
    let launch = async |home: &Sandbox| spawn_replica(home, &mock, &env).await;
    let (r1, r2) = tokio::join!(launch(&homes[0]), launch(&homes[1]));
    // Signed now, posted again while the channel still starts (503).
    let post = async |gateway: &Gateway, body: &str| -> u16 {
        let deadline = std::time::Instant::now() + TIMEOUT;
        loop {
            let ts = jiff::Timestamp::now().as_second().to_string();
            let status = reqwest::Client::new()
                .post(format!("http://{}/channels/slack", gateway.addr))
                .header("content-type", "application/json")
                .header("x-slack-request-timestamp", &ts)
                .header("x-slack-signature", sign(SECRET, &ts, body.as_bytes()))
                .body(body.to_string())
                .timeout(TIMEOUT)
                .send()
                .await
                .unwrap()
                .status()
                .as_u16();
            if status != 503 || std::time::Instant::now() > deadline {
                return status;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    let first = event_callback(dm("D1", "U1", "first by event", "9.000100"), "EvC1").to_string();
    let (a, b) = tokio::join!(post(&r1, &first), post(&r2, &first));
    assert_eq!((a, b), (200, 200));
    slack
        .wait("the first answer", |s| {
            s.texts().iter().any(|t| t == "Slacked once.")
        })
        .await;
    assert_eq!(post(&r2, &first).await, 200);
    assert_eq!(post(&r1, &first).await, 200);

    let ran_first = postgres.psql("SELECT replica FROM pincer_sessions WHERE key LIKE 'slack:%'");
    let other = if ran_first == "r1" { &r2 } else { &r1 };
    let second = event_callback(dm("D1", "U1", "second by event", "9.000200"), "EvC2").to_string();
    assert_eq!(post(other, &second).await, 200);
    slack
        .wait("the second answer", |s| {
            s.texts().iter().any(|t| t == "Slacked twice.")
        })
        .await;
    let last = mock.requests().pop().unwrap().body.to_string();
    assert!(
        ["first by event", "Slacked once.", "second by event"]
            .iter()
            .all(|said| last.contains(said)),
        "{last}"
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(mock.requests().len(), 2, "an event ran twice");
    // One message posted per reply (then edited as it streams), each
    // showing its whole text once.
    assert_eq!(slack.calls_of("chat.postMessage").len(), 2);
    for text in ["Slacked once.", "Slacked twice."] {
        let shown = slack.texts().iter().filter(|t| *t == text).count();
        assert_eq!(shown, 1, "{text:?}: {:?}", slack.texts());
    }
    assert_eq!(
        postgres.psql("SELECT count(*) FROM pincer_inbound WHERE id LIKE 'slack:%'"),
        "2"
    );
}

/// WhatsApp's webhook on two replicas behind one URL: a notification
/// posted to both at once, and again to each, is answered once, and the
/// next, posted to the replica without the chat's session, is answered
/// once by the one with it, with the history.
#[tokio::test]
async fn a_whatsapp_notification_posted_to_two_replicas_is_answered_once() {
    use support::whatsapp_api::{GraphApi, Meta, text_message};
    const PHONE_ID: &str = "106540352242922";
    const USER: &str = "16505551234";
    let (postgres, nats) = tokio::join!(
        tokio::task::spawn_blocking(Postgres::start),
        tokio::task::spawn_blocking(Nats::start)
    );
    let (postgres, nats) = (postgres.unwrap(), nats.unwrap());
    let mock = MockModel::start().await;
    mock.push(Reply::sse(anthropic_text("Sent once.", 20)));
    mock.push(Reply::sse(anthropic_text("Sent twice.", 30)));
    let unique = uuid::Uuid::new_v4().simple().to_string();
    let token = format!("EAAG-{unique}");
    let secret = format!("secret-{unique}");
    let api = GraphApi::start(&token, PHONE_ID).await;
    let whatsapp_table = format!(
        "[channels.whatsapp]\nphone_number_id = \"{PHONE_ID}\"\napi_url = \"{}\"\nallow = [\"{USER}\"]\nsandbox = {{ mode = \"off\" }}",
        api.url()
    );
    let homes: Vec<Sandbox> = ["r1", "r2"]
        .iter()
        .map(|name| replica_with_channel(name, &postgres, &nats, &whatsapp_table))
        .collect();
    let verify = format!("verify-{unique}");
    let env = [
        ("WHATSAPP_TOKEN", token.as_str()),
        ("WHATSAPP_VERIFY_TOKEN", verify.as_str()),
        ("WHATSAPP_APP_SECRET", secret.as_str()),
    ];
    let launch = async |home: &Sandbox| {
        let gateway = spawn_replica(home, &mock, &env).await;
        gateway
            .stderr
            .wait_line(TIMEOUT, |l| {
                l.contains("channel whatsapp started").then_some(())
            })
            .await
            .unwrap_or_else(|| panic!("no WhatsApp channel: {}", gateway.stderr.text()));
        gateway
    };
    let (r1, r2) = tokio::join!(launch(&homes[0]), launch(&homes[1]));
    let (to_r1, to_r2) = (
        Meta::new(r1.addr, &secret, PHONE_ID),
        Meta::new(r2.addr, &secret, PHONE_ID),
    );
    let said = |wamid: &str, text: &str| {
        to_r1.envelope(USER, "Sheena Nelson", vec![text_message(USER, wamid, text)])
    };
    let first = said("wamid.C1", "first by hook");
    let (a, b) = tokio::join!(to_r1.notify(&api, &first), to_r2.notify(&api, &first));
    assert_eq!((a.0, b.0), (200, 200));
    api.wait_messages(1, TIMEOUT).await;
    assert_eq!(to_r2.notify(&api, &first).await.0, 200);
    assert_eq!(to_r1.notify(&api, &first).await.0, 200);

    let ran_first =
        postgres.psql("SELECT replica FROM pincer_sessions WHERE key LIKE 'whatsapp:%'");
    let other = if ran_first == "r1" { &to_r2 } else { &to_r1 };
    assert_eq!(
        other
            .notify(&api, &said("wamid.C2", "second by hook"))
            .await
            .0,
        200
    );
    api.wait_messages(2, TIMEOUT).await;
    let last = mock.requests().pop().unwrap().body.to_string();
    assert!(
        ["first by hook", "Sent once.", "second by hook"]
            .iter()
            .all(|said| last.contains(said)),
        "{last}"
    );
    tokio::time::sleep(Duration::from_millis(500)).await;
    let texts: Vec<String> = api
        .messages()
        .iter()
        .filter_map(|m| m["text"]["body"].as_str().map(str::to_string))
        .collect();
    assert_eq!(texts, ["Sent once.", "Sent twice."]);
    assert_eq!(mock.requests().len(), 2, "a notification ran twice");
}
