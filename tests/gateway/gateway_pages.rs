//! What the Control UI's pages beyond the chat read from the gateway:
//! helpers as background tasks (`tasks.list`), the sessions list's
//! filters and facets (the activity and dashboards pages), the sessions'
//! queues as lanes (`diagnostics.lanes`), the machine pincer runs on
//! (`environments.list`), and OpenClaw's features pincer has not got
//! answered as their empty lists.

use crate::support;

use pretty_assertions::assert_eq;
use serde_json::json;
use support::acp_client::Sandbox;
use support::gateway::{Gateway, new_key};
use support::mock_model::{MockModel, Reply};
use support::sse::{anthropic_deltas, anthropic_text, anthropic_tool_call};

#[tokio::test]
async fn a_helper_is_a_background_task_and_the_activity_page_s_filters_leave_it_out() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    mock.push(Reply::sse(anthropic_tool_call(
        "t1",
        "task",
        &json!({"description": "check the docs", "prompt": "JOB-DOCS: read the docs"}),
    )));
    mock.push_for(
        "JOB-DOCS",
        Reply::sse(anthropic_text("The docs are fine.", 10)),
    );
    mock.push(Reply::sse(anthropic_text("Your helper agrees.", 10)));
    let gateway = Gateway::start(&sandbox, &mock).await;
    let mut client = gateway.admin().await;
    let key = new_key();
    let run = client.chat_send(&key, "check the docs with a helper").await;
    client.chat_end(&run).await;

    let listed = client.call_ok("tasks.list", json!({})).await;
    let tasks = listed["tasks"].as_array().unwrap();
    assert_eq!(tasks.len(), 1, "{listed}");
    let task = &tasks[0];
    assert_eq!(
        (
            &task["kind"],
            &task["status"],
            &task["title"],
            &task["sessionKey"],
            &task["agentId"]
        ),
        (
            &json!("subagent"),
            &json!("completed"),
            &json!("check the docs"),
            &json!(key),
            &json!("main")
        ),
        "{task}"
    );
    let helper_key = task["childSessionKey"].as_str().unwrap().to_string();
    assert!(helper_key.starts_with("agent:main:subagent:"), "{task}");
    assert!(task["endedAt"].as_u64().unwrap() > 0, "{task}");
    assert!(listed.get("nextCursor").is_none(), "{listed}");
    // The chat's side panel asks per session and per state.
    for (params, count) in [
        (
            json!({"sessionKey": key, "status": ["completed", "failed"], "sortBy": "endedAt"}),
            1,
        ),
        (
            json!({"sessionKey": key, "status": ["queued", "running"]}),
            0,
        ),
        (json!({"status": "completed", "agentId": "main"}), 1),
        (json!({"sessionKey": "agent:main:someone-else"}), 0),
        (json!({"limit": 1, "cursor": "1"}), 0),
    ] {
        let listed = client.call_ok("tasks.list", params.clone()).await;
        assert_eq!(
            listed["tasks"].as_array().unwrap().len(),
            count,
            "{params}: {listed}"
        );
    }
    for (params, says) in [
        (json!({"limit": 0}), "`limit` must be from 1 to 500"),
        (
            json!({"cursor": "later"}),
            "invalid or expired tasks.list cursor",
        ),
        (json!({"status": "paused"}), "tasks.list: `status`"),
    ] {
        let refused = client.call("tasks.list", params.clone()).await;
        let message = refused["error"]["message"].as_str().unwrap_or_default();
        assert!(message.contains(says), "{params}: {refused}");
    }

    // The activity page leaves helpers out, and asks for summaries and
    // people pincer has not got: "unavailable", and none.
    let activity = client
        .call_ok(
            "sessions.list",
            json!({
                "archived": "all", "includeGlobal": true, "includeUnknown": true,
                "includePeople": true, "excludeSubagents": true,
                "includeActivitySummary": true, "includeDerivedTitles": true,
                "sortBy": "activity", "limit": 100, "activeMinutes": 10080
            }),
        )
        .await;
    let rows = activity["sessions"].as_array().unwrap();
    assert_eq!(
        (rows.len(), &activity["count"]),
        (1, &json!(1)),
        "{activity}"
    );
    assert_eq!(rows[0]["key"], json!(key));
    assert_eq!(rows[0]["activitySummary"], json!({"state": "unavailable"}));
    assert_eq!(
        (
            &activity["people"],
            &activity["peopleIncomplete"],
            &activity["peopleSessionCount"]
        ),
        (&json!([]), &json!(false), &json!(0)),
        "{activity}"
    );
    // Without the flags the helper is listed, and the facets are not.
    let all = client.call_ok("sessions.list", json!({})).await;
    assert_eq!(all["count"], 2, "{all}");
    assert!(all.get("people").is_none() && all["sessions"][0].get("activitySummary").is_none());
    // One parent's helpers, counted before the page is cut.
    let spawned = client
        .call_ok("sessions.list", json!({"spawnedBy": key, "limit": 1}))
        .await;
    assert_eq!(
        (
            &spawned["count"],
            &spawned["sessions"][0]["key"],
            &spawned["hasMore"]
        ),
        (&json!(1), &json!(helper_key), &json!(false)),
        "{spawned}"
    );
    // The dashboards page lists the sessions with a board: pincer has no
    // boards.
    let boards = client
        .call_ok(
            "sessions.list",
            json!({"includeGlobal": true, "includeUnknown": true, "configuredAgentsOnly": true,
                   "limit": 200, "hasBoard": true, "archived": "all", "agentId": "main"}),
        )
        .await;
    assert_eq!(
        (&boards["count"], &boards["sessions"]),
        (&json!(0), &json!([]))
    );
    let unboarded = client
        .call_ok("sessions.list", json!({"hasBoard": false}))
        .await;
    assert_eq!(unboarded["count"], 2, "{unboarded}");
    let refused = client
        .call("sessions.list", json!({"sortBy": "name"}))
        .await;
    assert_eq!(refused["ok"], json!(false), "{refused}");
    // Nothing runs now.
    let busy = client
        .call_ok("sessions.list", json!({"activeOnly": true}))
        .await;
    assert_eq!(busy["count"], 0, "{busy}");
    let lanes = client.call_ok("diagnostics.lanes", json!({})).await;
    assert_eq!(lanes["lanes"], json!([]), "{lanes}");
}

/// A session whose run is going, with a message waiting behind it, is a
/// lane with one active and one queued, and the only session
/// `activeOnly` lists.
#[tokio::test]
async fn a_busy_session_is_a_lane_with_what_waits_in_it() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let gateway = Gateway::start(&sandbox, &mock).await;
    let mut client = gateway.admin().await;
    let (busy_key, quiet_key) = (new_key(), new_key());
    mock.push(Reply::sse(anthropic_text("Quiet one.", 5)));
    let quiet = client.chat_send(&quiet_key, "a quick one").await;
    client.chat_end(&quiet).await;
    mock.push(Reply::Stall {
        body: anthropic_deltas(&["Working ", "on it ", "slowly"]),
        events: 2,
    });
    mock.push(Reply::sse(anthropic_text("Second.", 5)));
    let first = client.chat_send(&busy_key, "the slow one").await;
    client
        .next_where("the slow run's start", |f| {
            f["event"] == "agent" && f["payload"]["runId"] == json!(first)
        })
        .await;
    let second = client.chat_send(&busy_key, "and then this").await;
    assert_ne!(first, second);
    let lanes = client.call_ok("diagnostics.lanes", json!({})).await;
    assert_eq!(
        lanes["lanes"],
        json!([{
            "lane": format!("session:{busy_key}"), "activeCount": 1, "queuedCount": 1,
            "maxConcurrent": 1, "draining": false, "generation": 0, "blockedBy": null
        }]),
        "{lanes}"
    );
    assert!(lanes["ts"].as_u64().unwrap() > 0, "{lanes}");
    let active = client
        .call_ok("sessions.list", json!({"activeOnly": true}))
        .await;
    assert_eq!(
        (&active["count"], &active["sessions"][0]["key"]),
        (&json!(1), &json!(busy_key)),
        "{active}"
    );
    client
        .call_ok("chat.abort", json!({"sessionKey": busy_key}))
        .await;
}

/// The machine pincer runs on is the Systems page's one machine; the
/// features pincer has not got are empty lists in OpenClaw's shapes (the
/// pages show their own "none" states), and importing another tool's
/// memory is an operator's (admin) question with no importers.
#[tokio::test]
async fn the_pages_of_openclaw_s_features_get_pincer_s_answers() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    let gateway = Gateway::start(&sandbox, &mock).await;
    let mut client = gateway.admin().await;
    let machines = client
        .call_ok("environments.list", json!({"includeDesktopSetup": true}))
        .await;
    let platform = match std::env::consts::OS {
        "macos" => "darwin",
        other => other,
    };
    assert_eq!(
        machines,
        json!({"environments": [{
            "id": "gateway", "type": "local", "label": "Gateway local", "status": "available",
            "platform": platform, "sessionHost": true, "trust": "persistent",
            "capabilities": ["agent.run", "sessions", "tools", "workspace"]
        }]})
    );
    let profiles = client
        .call_ok("environments.list", json!({"projection": "profiles"}))
        .await;
    assert_eq!(profiles, json!({"environments": []}));
    assert_eq!(
        client.call_ok("plugins.list", json!({})).await,
        json!({"plugins": [], "diagnostics": [], "mutationAllowed": false})
    );
    let themes = client.call_ok("themes.list", json!({})).await;
    assert_eq!(
        (
            &themes["current"]["id"],
            &themes["theme"]["source"],
            &themes["themes"]
        ),
        (&json!("claw"), &json!("builtin"), &json!([])),
        "{themes}"
    );
    assert_eq!(
        client.call_ok("worktrees.list", json!({})).await,
        json!({"worktrees": []})
    );
    assert_eq!(
        client
            .call_ok("transcripts.list", json!({"limit": 50, "query": "standup"}))
            .await,
        json!({"sessions": [], "nextCursor": null})
    );
    let plan = client
        .call_ok(
            "migrations.memory.plan",
            json!({"agentId": "main", "overwrite": false}),
        )
        .await;
    assert_eq!(
        (&plan["agentId"], &plan["providers"]),
        (&json!("main"), &json!([])),
        "{plan}"
    );
    let other = client
        .call("migrations.memory.plan", json!({"agentId": "ops"}))
        .await;
    assert_eq!(other["ok"], json!(false), "{other}");
    // The machine's own figures, for the Systems page.
    let info = client.call_ok("system.info", json!({})).await;
    assert_eq!(info["pid"], json!(gateway.child.id()), "{info}");
    assert_eq!(info["platform"], json!(platform), "{info}");
    assert!(info["cpuCount"].as_u64().unwrap() >= 1, "{info}");
    if cfg!(target_os = "linux") {
        let hostname = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
        assert_eq!(info["hostname"], json!(hostname.trim()), "{info}");
        let total = info["memoryTotalBytes"].as_u64().unwrap();
        let free = info["memoryFreeBytes"].as_u64().unwrap();
        assert!(total > 0 && free <= total, "{info}");
    }
    let nodes = client.call_ok("node.list", json!({})).await;
    assert_eq!(nodes["nodes"], json!([]), "{nodes}");
    // Pairing one is OpenClaw's.
    let pairing = client.call("node.pair.list", json!({})).await;
    assert!(
        pairing["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("not supported by pincer"),
        "{pairing}"
    );
    // No voice provider of any kind is ready.
    let talk = client.call_ok("talk.catalog", json!({})).await;
    for group in ["speech", "transcription", "realtime"] {
        assert_eq!(
            talk[group],
            json!({"ready": false, "providers": []}),
            "{talk}"
        );
    }
    assert_eq!(
        client
            .call_ok(
                "plugins.catalog.browse",
                json!({"intent": "all", "pageSize": 100})
            )
            .await,
        json!({"items": []})
    );
    let both = client
        .call(
            "plugins.catalog.browse",
            json!({"query": "voice", "cursor": "2"}),
        )
        .await;
    assert_eq!(both["ok"], json!(false), "{both}");
    assert_eq!(
        client
            .call_ok("agent.identity.get", json!({"agentId": "main"}))
            .await,
        json!({"agentId": "main", "name": "pincer"})
    );
    // The appearance page's catalog of prepared models is pincer's one.
    let prepared = client
        .call_ok(
            "models.list",
            json!({"view": "configured", "preparedOnly": true, "agentId": "main"}),
        )
        .await;
    assert_eq!(
        prepared["models"],
        client.call_ok("models.list", json!({})).await["models"]
    );
    // A reader may look at the pages, not plan an import.
    let mut reader = gateway.operator(&["operator.read"], &[]).await;
    reader.call_ok("tasks.list", json!({})).await;
    reader.call_ok("environments.list", json!({})).await;
    let refused = reader
        .call("migrations.memory.plan", json!({"agentId": "main"}))
        .await;
    assert_eq!(
        refused["error"]["details"]["missingScope"], "operator.admin",
        "{refused}"
    );
    // Installing a plugin stays refused, saying why.
    let install = client
        .call("plugins.install", json!({"id": "voice-call"}))
        .await;
    assert!(
        install["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .contains("not supported by pincer"),
        "{install}"
    );
}

/// The skills page lists the skills a session is offered: the project's
/// (the workspace's) and the user's own (OpenClaw's "managed" ones).
#[tokio::test]
async fn the_skills_page_lists_the_project_s_and_the_user_s_skills() {
    let sandbox = Sandbox::new();
    let write = |dir: std::path::PathBuf, name: &str, about: &str| {
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(
            dir.join("SKILL.md"),
            format!("---\nname: {name}\ndescription: {about}\n---\nSteps.\n"),
        )
        .unwrap();
    };
    write(
        sandbox.work().join(".pincer/skills/deploy"),
        "deploy",
        "Deploys this project.",
    );
    write(
        sandbox.home().join("skills/release-notes"),
        "release-notes",
        "Writes release notes.",
    );
    let mock = MockModel::start().await;
    let gateway = Gateway::start(&sandbox, &mock).await;
    let mut client = gateway.operator(&["operator.read"], &[]).await;
    let status = client
        .call_ok("skills.status", json!({"agentId": "main"}))
        .await;
    let skills: Vec<(&str, &str, &str, bool)> = status["skills"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| {
            (
                s["name"].as_str().unwrap(),
                s["description"].as_str().unwrap(),
                s["source"].as_str().unwrap(),
                s["eligible"].as_bool().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        skills,
        [
            (
                "deploy",
                "Deploys this project.",
                "openclaw-workspace",
                true
            ),
            (
                "release-notes",
                "Writes release notes.",
                "openclaw-managed",
                true
            ),
        ],
        "{status}"
    );
    assert!(
        status["skills"][0]["filePath"]
            .as_str()
            .unwrap()
            .ends_with(".pincer/skills/deploy/SKILL.md"),
        "{status}"
    );
    assert_eq!(status["missing"], serde_json::Value::Null);
    assert_eq!(status["skills"][1]["missing"]["bins"], json!([]));
    let refused = client
        .call("skills.status", json!({"sessionKey": "agent:main:nobody"}))
        .await;
    assert_eq!(
        refused["error"]["message"], "Session not found.",
        "{refused}"
    );
    // ClawHub's search and a team's library: pincer has neither.
    assert_eq!(
        client.call_ok("skills.search", json!({"limit": 20})).await,
        json!({"results": []})
    );
    let refused = client.call("skills.search", json!({"limit": 0})).await;
    assert_eq!(refused["ok"], json!(false), "{refused}");
    let library = client
        .call_ok("skills.library.list", json!({"scope": "all"}))
        .await;
    assert_eq!(
        (&library["entries"], &library["canManageWorkspace"]),
        (&json!([]), &json!(false)),
        "{library}"
    );
}

/// The agent's plan (its `todo` list) is the session's progress card, as
/// OpenClaw's clients show one above the composer: `progressCard.get`
/// gives its steps, and a client following the session is told
/// (`progressCard.changed`) each time it changes.
#[tokio::test]
async fn the_agent_s_plan_is_the_session_s_progress_card() {
    let sandbox = Sandbox::new();
    let mock = MockModel::start().await;
    mock.push(Reply::sse(anthropic_tool_call(
        "t1",
        "todo",
        &json!({"todos": [
            {"content": "Read the parser", "status": "completed"},
            {"content": "Fix the off-by-one", "status": "in_progress"},
            {"content": "Run the tests", "status": "pending"},
        ]}),
    )));
    mock.push(Reply::sse(anthropic_text("On it.", 5)));
    let gateway = Gateway::start(&sandbox, &mock).await;
    let mut client = gateway.admin().await;
    let key = new_key();
    // No plan yet: no card.
    let none = client
        .call_ok("progressCard.get", json!({"sessionKey": key}))
        .await;
    assert_eq!(none, json!({"card": null}));
    let run = client.chat_send(&key, "fix the parser").await;
    client.chat_end(&run).await;
    let changed = client
        .next_where("the card's change", |f| {
            f["event"] == "progressCard.changed"
        })
        .await;
    assert_eq!(
        changed["payload"],
        json!({"sessionKey": key, "revision": 1}),
        "{changed}"
    );
    let card = client
        .call_ok(
            "progressCard.get",
            json!({"sessionKey": key, "agentId": "main"}),
        )
        .await;
    assert_eq!(
        (
            &card["card"]["sessionKey"],
            &card["card"]["revision"],
            &card["card"]["steps"]
        ),
        (
            &json!(key),
            &json!(1),
            &json!([
                {"step": "Read the parser", "status": "completed"},
                {"step": "Fix the off-by-one", "status": "in_progress"},
                {"step": "Run the tests", "status": "pending"},
            ])
        ),
        "{card}"
    );
    assert!(card["card"]["updatedAt"].as_u64().unwrap() > 0, "{card}");
    let refused = client.call("progressCard.get", json!({})).await;
    assert_eq!(
        refused["error"]["message"], "progressCard.get: `sessionKey` is required",
        "{refused}"
    );

    // The card's refresh button asks the agent to bring its plan up to
    // date; the UI waits for a later revision.
    mock.push_for(
        "Bring your plan up to date",
        Reply::sse(anthropic_tool_call(
            "t2",
            "todo",
            &json!({"todos": [
                {"content": "Read the parser", "status": "completed"},
                {"content": "Fix the off-by-one", "status": "completed"},
                {"content": "Run the tests", "status": "in_progress"},
            ]}),
        )),
    );
    mock.push(Reply::sse(anthropic_text("Updated.", 5)));
    let asked = mock.requests().len();
    let params = json!({"sessionKey": key, "agentId": "main", "idempotencyKey": "refresh-1"});
    let accepted = client.call_ok("progressCard.refresh", params.clone()).await;
    assert_eq!(
        (&accepted["status"], &accepted["revision"]),
        (&json!("accepted"), &json!(1)),
        "{accepted}"
    );
    let run = accepted["runId"].as_str().unwrap().to_string();
    assert!(run.starts_with("progress-card-refresh:"), "{accepted}");
    client.chat_end(&run).await;
    let changed = client
        .next_where("the refreshed card's change", |f| {
            f["event"] == "progressCard.changed" && f["payload"]["revision"] == 2
        })
        .await;
    assert_eq!(changed["payload"]["sessionKey"], json!(key), "{changed}");
    let card = client
        .call_ok("progressCard.get", json!({"sessionKey": key}))
        .await;
    assert_eq!(
        card["card"]["steps"][2],
        json!({"step": "Run the tests", "status": "in_progress"}),
        "{card}"
    );
    let requests = mock.requests();
    assert_eq!(requests.len(), asked + 2, "the refresh's two model calls");
    assert!(
        requests[asked]
            .body
            .to_string()
            .contains("Bring your plan up to date"),
        "the model was asked to refresh its plan"
    );
    // A retry with the same key is the same run, not another.
    let again = client.call_ok("progressCard.refresh", params).await;
    assert_eq!(again["runId"], json!(run), "{again}");
    assert_eq!(mock.requests().len(), asked + 2, "no run started again");
    // Nothing to refresh in a session without a plan.
    let none = client
        .call(
            "progressCard.refresh",
            json!({"sessionKey": new_key(), "idempotencyKey": "refresh-2"}),
        )
        .await;
    assert_eq!(
        none["error"]["message"], "There is no progress card to refresh.",
        "{none}"
    );
}

/// What the Control UI's chat asks in the background: no update banner,
/// the chat's metadata with the same models `models.list` gives, the
/// session's one branch, and how each provider's credentials stand;
/// side chat and the observer refused as OpenClaw's features.
#[tokio::test]
async fn the_chat_s_background_questions_get_pincer_s_answers() {
    let sandbox = Sandbox::new();
    let dir = sandbox.home().join("agents/main");
    std::fs::create_dir_all(&dir).unwrap();
    let soon = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64
        + 3_600_000;
    std::fs::write(
        dir.join("auth-profiles.json"),
        json!({
            "version": 1,
            "profiles": {
                "openai:work": {"type": "token", "provider": "openai", "token": "tok-SECRET-1", "expires": soon},
            },
        })
        .to_string(),
    )
    .unwrap();
    let mock = MockModel::start().await;
    mock.push(Reply::sse(anthropic_text("Parsed.", 5)));
    let gateway = Gateway::start(&sandbox, &mock).await;
    let mut client = gateway.admin().await;

    let update = client.call_ok("update.status", json!({})).await;
    assert_eq!(update, json!({"sentinel": null, "updateAvailable": null}));
    let checked = client
        .call_ok("update.status", json!({"refreshCheckout": true}))
        .await;
    assert_eq!(checked, update);
    let mut reader = gateway.operator(&["operator.read"], &[]).await;
    let refused = reader.call("update.status", json!({})).await;
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("operator.admin"),
        "{refused}"
    );

    let key = new_key();
    let run = client.chat_send(&key, "Parse the config\nthen stop").await;
    client.chat_end(&run).await;

    let models = client.call_ok("models.list", json!({})).await;
    let metadata = client
        .call_ok(
            "chat.metadata",
            json!({"sessionKey": key, "agentId": "main"}),
        )
        .await;
    assert_eq!(
        metadata,
        json!({
            "models": models["models"],
            "swarmEnabled": false,
            "accountSelection": {"kind": "automatic", "label": "Automatic account selection"},
            "runtimeSelectionLocked": false,
        })
    );
    let draft = client.call_ok("chat.metadata", json!({})).await;
    assert!(draft.get("runtimeSelectionLocked").is_none(), "{draft}");
    let refused = client
        .call("chat.metadata", json!({"authProfileId": "openai:work"}))
        .await;
    assert!(
        refused["error"]["message"]
            .as_str()
            .unwrap()
            .contains("`authProfileId`"),
        "{refused}"
    );

    let history = client
        .call_ok("chat.history", json!({"sessionKey": key}))
        .await;
    let messages = history["messages"].as_array().unwrap();
    let leaf = messages.last().unwrap()["__openclaw"]["id"].clone();
    assert!(leaf.is_string(), "{history}");
    let branches = client
        .call_ok("sessions.branches.list", json!({"sessionKey": key}))
        .await;
    let branch = &branches["branches"][0];
    assert_eq!(
        branches["branches"].as_array().unwrap().len(),
        1,
        "{branches}"
    );
    assert_eq!(
        (
            &branch["leafEntryId"],
            &branch["headline"],
            &branch["messageCount"],
            &branch["active"]
        ),
        (
            &leaf,
            &json!("Parse the config"),
            &json!(messages.len()),
            &json!(true)
        ),
        "{branches}"
    );
    assert!(
        branch["updatedAt"].as_str().unwrap().ends_with('Z'),
        "{branch}"
    );
    let none = client
        .call_ok("sessions.branches.list", json!({"sessionKey": new_key()}))
        .await;
    assert_eq!(none, json!({"branches": []}));

    let status = reader
        .call_ok("models.authStatus", json!({"agentId": ""}))
        .await;
    assert!(status["ts"].as_u64().unwrap() > 0, "{status}");
    assert_eq!(status["providerCapabilities"], json!([]), "{status}");
    let providers = status["providers"].as_array().unwrap();
    let names: Vec<&str> = providers
        .iter()
        .map(|p| p["provider"].as_str().unwrap())
        .collect();
    // Only the providers with a credential: the key in the environment,
    // the stored token.
    assert_eq!(names, ["anthropic", "openai"], "{status}");
    assert_eq!(
        providers[0],
        json!({
            "provider": "anthropic", "authProvider": "anthropic", "displayName": "anthropic",
            "status": "static", "profiles": [],
            "apiKey": {"source": "env", "envVar": "ANTHROPIC_API_KEY"},
        })
    );
    let openai = &providers[1];
    assert_eq!(openai["status"], "expiring", "{openai}");
    assert_eq!(openai["expiry"]["label"], "59m", "{openai}");
    assert_eq!(
        (
            &openai["profiles"][0]["profileId"],
            &openai["profiles"][0]["type"],
            &openai["profiles"][0]["status"],
            &openai["profiles"][0]["source"]
        ),
        (
            &json!("openai:work"),
            &json!("token"),
            &json!("expiring"),
            &json!("saved")
        ),
        "{openai}"
    );
    assert!(!status.to_string().contains("SECRET"), "{status}");
    assert!(!status.to_string().contains("test-key"), "{status}");

    for method in [
        "sessions.companion.state",
        "sessions.companion.ask",
        "sessions.observer.visibility",
    ] {
        let refused = client.call(method, json!({"sessionKey": key})).await;
        let message = refused["error"]["message"].as_str().unwrap();
        assert!(
            message.starts_with(&format!("not supported by pincer: `{method}`")),
            "{refused}"
        );
    }
}
