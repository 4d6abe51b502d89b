use std::collections::BTreeMap;

use pretty_assertions::assert_eq;

use super::*;

const TOOLS: [(&str, bool); 11] = [
    ("read", false),
    ("write", true),
    ("edit", true),
    ("bash", true),
    ("process", true),
    ("grep", false),
    ("find", false),
    ("ls", false),
    ("ask_user", false),
    ("mcp__github__create_issue", true),
    ("mcp__github__search", false),
];

fn rules(allow: &[&str], deny: &[&str]) -> Rules {
    Rules {
        allow: allow.iter().map(|s| s.to_string()).collect(),
        deny: deny.iter().map(|s| s.to_string()).collect(),
    }
}

/// The offered tools, and for each missing one the reason as printed.
fn outcome(policy: &ToolPolicy, mode: Mode) -> (Vec<&'static str>, Vec<String>) {
    let mut offered = Vec::new();
    let mut removed = Vec::new();
    for (name, mutating) in TOOLS {
        match policy.check(name, mutating, mode) {
            Ok(()) => offered.push(name),
            Err(why) => removed.push(format!("{name}: {why}")),
        }
    }
    (offered, removed)
}

fn config(profile: Option<Profile>, allow: &[&str], deny: &[&str]) -> ToolsConfig {
    let r = rules(allow, deny);
    ToolsConfig {
        profile,
        allow: r.allow,
        deny: r.deny,
        by_provider: BTreeMap::new(),
    }
}

fn policy(config: &ToolsConfig) -> ToolPolicy {
    ToolPolicy::new(
        config,
        None,
        "anthropic",
        "claude-sonnet-4-5",
        &BTreeMap::new(),
    )
    .unwrap()
}

#[test]
fn profiles_start_from_their_groups() {
    struct Case {
        profile: Option<Profile>,
        offered: Vec<&'static str>,
    }
    let all: Vec<&str> = TOOLS.iter().map(|(n, _)| *n).collect();
    let cases = [
        Case {
            profile: None,
            offered: all.clone(),
        },
        Case {
            profile: Some(Profile::Coding),
            offered: all.clone(),
        },
        Case {
            profile: Some(Profile::Full),
            offered: all.clone(),
        },
        Case {
            profile: Some(Profile::Minimal),
            offered: vec!["read", "grep", "find", "ls"],
        },
        Case {
            profile: Some(Profile::Messaging),
            offered: vec!["ask_user"],
        },
    ];
    for case in cases {
        let (offered, _) = outcome(&policy(&config(case.profile, &[], &[])), Mode::Default);
        assert_eq!(offered, case.offered, "{:?}", case.profile);
    }
}

#[test]
fn every_step_only_narrows_and_deny_beats_allow() {
    struct Case {
        name: &'static str,
        config: ToolsConfig,
        agent: Option<Rules>,
        mode: Mode,
        offered: Vec<&'static str>,
        removed: Vec<&'static str>,
    }
    let mut by_provider = config(None, &[], &[]);
    by_provider.by_provider.insert(
        "Anthropic".into(),
        rules(&["group:fs", "group:search"], &[]),
    );
    by_provider
        .by_provider
        .insert("anthropic/claude-sonnet-4-5".into(), rules(&[], &["write"]));
    by_provider
        .by_provider
        .insert("openai".into(), rules(&[], &["read"]));
    let cases = vec![
        Case {
            name: "deny wins over allow, case-insensitively, with globs",
            config: config(None, &["*"], &["BASH", "mcp__*"]),
            agent: None,
            mode: Mode::Default,
            offered: vec![
                "read", "write", "edit", "process", "grep", "find", "ls", "ask_user",
            ],
            removed: vec![
                "bash: denied by `BASH` in [tools] allow/deny",
                "mcp__github__create_issue: denied by `mcp__*` in [tools] allow/deny",
                "mcp__github__search: denied by `mcp__*` in [tools] allow/deny",
            ],
        },
        Case {
            name: "an allow list cannot widen the profile",
            config: config(Some(Profile::Minimal), &["bash", "read"], &[]),
            agent: None,
            mode: Mode::Default,
            offered: vec!["read"],
            removed: vec![
                "write: not allowed by tool profile `minimal`",
                "edit: not allowed by tool profile `minimal`",
                "bash: not allowed by tool profile `minimal`",
                "process: not allowed by tool profile `minimal`",
                "grep: not allowed by [tools] allow/deny",
                "find: not allowed by [tools] allow/deny",
                "ls: not allowed by [tools] allow/deny",
                "ask_user: not allowed by tool profile `minimal`",
                "mcp__github__create_issue: not allowed by tool profile `minimal`",
                "mcp__github__search: not allowed by tool profile `minimal`",
            ],
        },
        Case {
            name: "provider then model rules; other providers' rules do not apply",
            config: by_provider,
            agent: None,
            mode: Mode::Default,
            offered: vec!["read", "edit", "grep", "find", "ls"],
            removed: vec![
                "write: denied by `write` in [tools.by_provider.\"anthropic/claude-sonnet-4-5\"]",
                "bash: not allowed by [tools.by_provider.\"Anthropic\"]",
                "process: not allowed by [tools.by_provider.\"Anthropic\"]",
                "ask_user: not allowed by [tools.by_provider.\"Anthropic\"]",
                "mcp__github__create_issue: not allowed by [tools.by_provider.\"Anthropic\"]",
                "mcp__github__search: not allowed by [tools.by_provider.\"Anthropic\"]",
            ],
        },
        Case {
            name: "the agent's rules, then plan mode",
            config: config(None, &[], &[]),
            agent: Some(rules(&["group:fs", "group:search", "group:mcp"], &["ls"])),
            mode: Mode::Plan,
            offered: vec!["read", "grep", "find", "mcp__github__search"],
            removed: vec![
                "write: not allowed by the session's `plan` mode",
                "edit: not allowed by the session's `plan` mode",
                "bash: not allowed by [agents.main.tools]",
                "process: not allowed by [agents.main.tools]",
                "ls: denied by `ls` in [agents.main.tools]",
                "ask_user: not allowed by [agents.main.tools]",
                "mcp__github__create_issue: not allowed by the session's `plan` mode",
            ],
        },
    ];
    for case in cases {
        let policy = ToolPolicy::new(
            &case.config,
            case.agent.as_ref().map(|r| ("main", r)),
            "anthropic",
            "claude-sonnet-4-5",
            &BTreeMap::new(),
        )
        .unwrap();
        let (offered, removed) = outcome(&policy, case.mode);
        assert_eq!(
            (offered, removed),
            (
                case.offered,
                case.removed.iter().map(|s| s.to_string()).collect()
            ),
            "{}",
            case.name
        );
    }
}

#[test]
fn an_mcp_server_scope_names_its_tools_without_the_prefix() {
    let mut mcp = BTreeMap::new();
    mcp.insert("github".to_string(), rules(&["search*"], &[]));
    let policy = ToolPolicy::new(
        &ToolsConfig::default(),
        None,
        "anthropic",
        "claude-sonnet-4-5",
        &mcp,
    )
    .unwrap();
    assert_eq!(
        policy.check("mcp__github__search", false, Mode::Default),
        Ok(())
    );
    assert_eq!(
        policy
            .check("mcp__github__create_issue", true, Mode::Default)
            .unwrap_err()
            .to_string(),
        "not allowed by the scope of MCP server `github`"
    );
    // Other servers are not scoped.
    assert_eq!(
        policy.check("mcp__jira__create", true, Mode::Default),
        Ok(())
    );
}

#[test]
fn unknown_groups_and_bad_globs_are_config_errors() {
    let err = ToolPolicy::new(
        &config(None, &["group:nope"], &[]),
        None,
        "a",
        "b",
        &BTreeMap::new(),
    )
    .unwrap_err();
    assert_eq!(err, PolicyError::UnknownGroup("group:nope".into()));
    let err = ToolPolicy::new(
        &config(None, &[], &["[bash"]),
        None,
        "a",
        "b",
        &BTreeMap::new(),
    )
    .unwrap_err();
    assert!(matches!(err, PolicyError::BadPattern { .. }), "{err:?}");
}

#[test]
fn the_default_profile_offers_ask_user_also_in_plan_mode() {
    let policy = policy(&config(None, &[], &[]));
    assert_eq!(policy.check("ask_user", false, Mode::Plan), Ok(()));
    assert_eq!(policy.check("ask_user", false, Mode::Default), Ok(()));
}

#[test]
fn todo_is_in_the_coding_profile_and_survives_plan_mode() {
    let checked = |profile: Option<Profile>, deny: &[&str], mode: Mode| {
        policy(&config(profile, &[], deny))
            .check("todo", false, mode)
            .map_err(|why| why.to_string())
    };
    assert_eq!(checked(None, &[], Mode::Default), Ok(()));
    assert_eq!(checked(Some(Profile::Coding), &[], Mode::Plan), Ok(()));
    assert_eq!(
        checked(None, &["group:planning"], Mode::Plan),
        Err("denied by `group:planning` in [tools] allow/deny".to_string())
    );
    assert_eq!(
        checked(Some(Profile::Minimal), &[], Mode::Default),
        Err("not allowed by tool profile `minimal`".to_string())
    );
}
