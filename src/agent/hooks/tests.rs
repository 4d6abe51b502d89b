use std::time::Instant;

use pretty_assertions::assert_eq;
use serde_json::json;

use super::*;

fn fixture(name: &str) -> String {
    format!("{}/fixtures/hooks/{name}", env!("CARGO_MANIFEST_DIR"))
}

fn hook(event: Event, script: &str) -> HookConfig {
    HookConfig {
        event,
        command: fixture(script),
        matcher: None,
        timeout: None,
        priority: 0,
        fail_closed: false,
        sandbox: None,
    }
}

struct Fixture {
    dir: tempfile::TempDir,
    cancel: CancellationToken,
}

impl Fixture {
    fn new() -> Self {
        Self {
            dir: tempfile::tempdir().unwrap(),
            cancel: CancellationToken::new(),
        }
    }

    fn origin(&self) -> Origin<'_> {
        Origin {
            session_id: "sess_1",
            cwd: self.dir.path(),
        }
    }

    async fn before(&self, hooks: Vec<HookConfig>, tool: &str, params: Value) -> Before {
        Hooks::new(hooks)
            .before_tool_call(self.origin(), tool, "call_1", &params, &self.cancel)
            .await
    }

    fn log(&self) -> Vec<Value> {
        std::fs::read_to_string(self.dir.path().join("hooks.log"))
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }
}

#[tokio::test]
async fn a_hook_blocks_with_a_reason_and_lets_other_calls_through() {
    let f = Fixture::new();
    let hooks = vec![hook(Event::BeforeToolCall, "block_rm.py")];
    assert_eq!(
        f.before(hooks.clone(), "bash", json!({"command": "rm -rf target"}))
            .await,
        Before::Block("Deleting files is not allowed in this project.".into())
    );
    assert_eq!(
        f.before(hooks, "bash", json!({"command": "ls"})).await,
        Before::Run(json!({"command": "ls"}))
    );
}

#[tokio::test]
async fn hooks_run_by_priority_and_see_each_others_params() {
    let f = Fixture::new();
    // The rewrite runs first and the recorder sees its result; the block
    // hook, last, sees `rm` in the rewritten command too.
    let mut rewrite = hook(Event::BeforeToolCall, "rewrite_params.py");
    rewrite.priority = 10;
    let mut record = hook(Event::BeforeToolCall, "record.py");
    record.priority = 5;
    let hooks = vec![record, hook(Event::BeforeToolCall, "block_rm.py"), rewrite];
    assert_eq!(
        f.before(
            hooks.clone(),
            "bash",
            json!({"command": "make", "timeout": 5})
        )
        .await,
        Before::Run(json!({"command": "echo hooked; make", "timeout": 5}))
    );
    assert_eq!(
        f.log(),
        vec![json!({
            "event": "before_tool_call",
            "session_id": "sess_1",
            "cwd": f.dir.path(),
            "tool_name": "bash",
            "tool_call_id": "call_1",
            "params": {"command": "echo hooked; make", "timeout": 5},
        })]
    );
}

#[tokio::test]
async fn a_matcher_limits_a_hook_to_some_tools() {
    let f = Fixture::new();
    let mut rewrite = hook(Event::BeforeToolCall, "rewrite_params.py");
    rewrite.matcher = Some("BA*".into());
    let hooks = vec![rewrite];
    assert_eq!(
        f.before(hooks.clone(), "read", json!({"path": "a"})).await,
        Before::Run(json!({"path": "a"}))
    );
    assert_eq!(
        f.before(hooks, "bash", json!({"command": "ls"})).await,
        Before::Run(json!({"command": "echo hooked; ls"}))
    );
}

#[tokio::test]
async fn crashing_hanging_and_garbage_hooks_fail_open_unless_configured_closed() {
    let f = Fixture::new();
    let params = json!({"command": "ls"});
    let mut hang = hook(Event::BeforeToolCall, "hang.sh");
    hang.timeout = Some(0.3);
    for broken in [
        hook(Event::BeforeToolCall, "crash.sh"),
        hook(Event::BeforeToolCall, "garbage.sh"),
        hang.clone(),
        hook(Event::BeforeToolCall, "does-not-exist.sh"),
    ] {
        let started = Instant::now();
        assert_eq!(
            f.before(vec![broken.clone()], "bash", params.clone()).await,
            Before::Run(params.clone()),
            "{}",
            broken.command
        );
        assert!(started.elapsed() < Duration::from_secs(5));
    }
    // The hung hook's process group is gone, its background child too.
    let deadline = Instant::now() + Duration::from_secs(3);
    while crate::agent::hooks::tests::running("sleep 30.4242") {
        assert!(
            Instant::now() < deadline,
            "the hook's processes outlived it"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    let mut crash = hook(Event::BeforeToolCall, "crash.sh");
    crash.fail_closed = true;
    let Before::Block(reason) = f.before(vec![crash], "bash", params.clone()).await else {
        panic!("a fail-closed hook that crashes blocks");
    };
    assert!(
        reason.contains("exited with exit status: 3: hook exploded"),
        "{reason}"
    );
    hang.fail_closed = true;
    let Before::Block(reason) = f.before(vec![hang], "bash", params).await else {
        panic!("a fail-closed hook that hangs blocks");
    };
    assert!(reason.contains("was killed"), "{reason}");
}

fn running(marker: &str) -> bool {
    std::fs::read_dir("/proc").unwrap().flatten().any(|entry| {
        std::fs::read(entry.path().join("cmdline"))
            .map(|c| {
                String::from_utf8_lossy(&c)
                    .replace('\0', " ")
                    .contains(marker)
            })
            .unwrap_or(false)
    })
}

#[tokio::test]
async fn after_hooks_replace_the_result() {
    let f = Fixture::new();
    let hooks = Hooks::new(vec![hook(Event::AfterToolCall, "rewrite_result.py")]);
    let after = hooks
        .after_tool_call(
            f.origin(),
            "bash",
            "call_1",
            &json!({"command": "cat .env"}),
            &[Content::text("PASSWORD=hunter2")],
            true,
            &f.cancel,
        )
        .await;
    assert_eq!(
        after,
        After {
            content: Some(vec![Content::text("[checked] PASSWORD=[redacted]")]),
            is_error: Some(false),
        }
    );
}

#[tokio::test]
async fn prompts_can_be_refused_and_other_events_are_told() {
    let f = Fixture::new();
    let hooks = Hooks::new(vec![
        hook(Event::SessionStart, "record.py"),
        hook(Event::AgentEnd, "record.py"),
    ]);
    let mut fields = Map::new();
    fields.insert("stop_reason".into(), json!("end_turn"));
    hooks
        .notify(Event::AgentEnd, f.origin(), fields, &f.cancel)
        .await;
    hooks
        .notify(Event::SessionStart, f.origin(), Map::new(), &f.cancel)
        .await;
    let events: Vec<Value> = f.log().iter().map(|e| e["event"].clone()).collect();
    assert_eq!(events, vec![json!("agent_end"), json!("session_start")]);
    assert_eq!(f.log()[0]["stop_reason"], json!("end_turn"));

    let mut guard = hook(Event::UserPromptSubmit, "crash.sh");
    guard.fail_closed = true;
    let refused = Hooks::new(vec![guard])
        .user_prompt_submit(f.origin(), "hello", &f.cancel)
        .await
        .unwrap_err();
    assert!(refused.contains("hook exploded"), "{refused}");
    assert_eq!(
        Hooks::new(vec![hook(Event::UserPromptSubmit, "crash.sh")])
            .user_prompt_submit(f.origin(), "hello", &f.cancel)
            .await,
        Ok(())
    );
}
