use super::*;
use pretty_assertions::assert_eq;

#[test]
fn limits_take_sizes_as_people_write_them() {
    let config: SandboxConfig =
        toml::from_str("[limits]\nfile_size = \"64 MiB\"\nprocesses = 10\n").unwrap();
    assert_eq!(config.limits.file_size, Some(ByteSize(64 << 20)));
    let settings = Settings::from_config(&config, None);
    assert_eq!(settings.limits.file_size, 64 << 20);
    assert_eq!(settings.limits.processes, 10);
    assert!(toml::from_str::<SandboxConfig>("[limits]\nfile_size = \"3 parsecs\"\n").is_err());
}

fn settings(mode: SandboxMode) -> Settings {
    Settings {
        mode,
        ..Settings::default()
    }
}

#[test]
fn the_defaults_confine_and_stop_a_2_gb_file() {
    let s = Settings::from_config(&SandboxConfig::default(), None);
    assert_eq!(s.mode, SandboxMode::WorkspaceWrite);
    assert_eq!(s.network, Network::Loopback);
    assert!(s.escape);
    assert!(s.limits.file_size < 2_000_000_000);
    assert_eq!(s.limits.processes, DEFAULT_PROCESSES);
}

#[test]
fn a_policy_writes_the_project_temp_and_allow_write_and_never_the_protected_paths() {
    let cwd = tempfile::tempdir().unwrap();
    let cwd = std::fs::canonicalize(cwd.path()).unwrap();
    let extra = PathBuf::from("/var/cache/extra-place");
    let mut s = settings(SandboxMode::WorkspaceWrite);
    s.allow_write = vec![extra.clone()];
    let home = PathBuf::from("/home/someone");
    let policy = Policy::new(&s, &cwd, Some(&home), &[home.join(".config/pincer")]).unwrap();
    assert_eq!(policy.writable[0], cwd);
    assert!(policy.writable.contains(&extra));
    for temp in temp_dirs() {
        assert!(policy.writable.contains(&temp));
    }
    for protected in PROTECTED {
        assert!(policy.read_only.contains(&cwd.join(protected)));
    }
    for secret in [".ssh", ".aws", ".gnupg", ".config/pincer"] {
        assert!(policy.deny_read.contains(&home.join(secret)), "{secret}");
    }
    // Read-only: temp alone; off: no policy.
    let policy = Policy::new(&settings(SandboxMode::ReadOnly), &cwd, None, &[]).unwrap();
    assert_eq!(policy.writable, temp_dirs());
    assert!(policy.read_only.is_empty());
    assert_eq!(
        Policy::new(&settings(SandboxMode::Off), &cwd, None, &[]),
        None
    );
}

#[test]
fn a_denied_directory_that_holds_a_writable_place_is_carved_around_it() {
    let root = tempfile::tempdir().unwrap();
    let pincer = root.path().join("pincer");
    let workspace = pincer.join("agents/main/workspace");
    std::fs::create_dir_all(&workspace).unwrap();
    std::fs::create_dir_all(pincer.join("agents/other")).unwrap();
    std::fs::write(pincer.join("auth-profiles.json"), "{}").unwrap();
    std::fs::write(pincer.join("agents/main/notes"), "").unwrap();
    let elsewhere = root.path().join("elsewhere");
    let carved = carve(
        vec![pincer.clone(), elsewhere.clone()],
        std::slice::from_ref(&workspace),
    );
    assert_eq!(
        carved,
        vec![
            elsewhere,
            pincer.join("agents/main/notes"),
            pincer.join("agents/other"),
            pincer.join("auth-profiles.json"),
        ]
    );
    // A denied place that is itself writable is the user's choice.
    assert!(carve(vec![workspace.clone()], &[workspace]).is_empty());
}

#[test]
fn a_project_only_narrows_and_says_what_it_could_not_widen() {
    let user = SandboxConfig::default();
    let project = SandboxConfig {
        mode: Some(SandboxMode::Off),
        network: Some(Network::On),
        allow_write: vec!["/".into()],
        escape: Some(true),
        limits: LimitsConfig {
            processes: Some(1 << 20),
            file_size: Some(ByteSize(1 << 20)),
            cpu_seconds: None,
        },
        ..SandboxConfig::default()
    };
    let (narrow, widening) = narrowing(&user, &project);
    assert_eq!(
        widening,
        vec![
            "sandbox.mode = \"off\"".to_string(),
            "sandbox.network = \"on\"".to_string(),
            "sandbox.allow_write".to_string(),
            format!("sandbox.limits.processes = {}", 1 << 20),
        ]
    );
    assert_eq!(narrow.mode, None);
    assert_eq!(narrow.limits.file_size, Some(ByteSize(1 << 20)));
    // Narrowing applied: whatever the project says, nothing loosens.
    let base = Settings::from_config(&user, None);
    let narrowed = base.clone().narrowed(&project, None);
    assert_eq!(narrowed.mode, base.mode);
    assert_eq!(narrowed.network, base.network);
    assert_eq!(narrowed.allow_write, base.allow_write);
    assert_eq!(narrowed.limits.file_size, 1 << 20);
    assert_eq!(narrowed.limits.processes, base.limits.processes);
    let stricter = SandboxConfig {
        mode: Some(SandboxMode::ReadOnly),
        network: Some(Network::Off),
        escape: Some(false),
        deny_read: vec!["/srv/secrets".into()],
        ..SandboxConfig::default()
    };
    let (kept, widening) = narrowing(&user, &stricter);
    assert!(widening.is_empty());
    let narrowed = base.narrowed(&kept, None);
    assert_eq!(narrowed.mode, SandboxMode::ReadOnly);
    assert_eq!(narrowed.network, Network::Off);
    assert!(!narrowed.escape);
    assert_eq!(narrowed.deny_read, vec![PathBuf::from("/srv/secrets")]);
}

#[test]
fn a_session_nobody_watches_is_confined_and_never_asks_to_leave_unless_its_config_says() {
    let off = settings(SandboxMode::Off);
    let s = off.clone().unattended(&SandboxConfig::default());
    assert_eq!(s.mode, SandboxMode::WorkspaceWrite);
    assert!(!s.escape);
    let allowed = off.unattended(&SandboxConfig {
        escape: Some(true),
        ..SandboxConfig::default()
    });
    assert!(allowed.escape);
    // The live object: a project's narrowing still applies after it.
    let project = SandboxConfig {
        mode: Some(SandboxMode::ReadOnly),
        ..SandboxConfig::default()
    };
    let sandbox = Sandbox::new(settings(SandboxMode::Off), Some(project), None, Vec::new());
    sandbox.make_unattended(&SandboxConfig {
        mode: Some(SandboxMode::WorkspaceWrite),
        ..SandboxConfig::default()
    });
    assert_eq!(sandbox.mode(), SandboxMode::ReadOnly);
    assert!(!sandbox.may_escape());
}

#[test]
fn only_what_the_sandbox_cannot_undo_or_keep_in_is_dangerous() {
    for prefix in [
        "git push",
        "git reset",
        "FOO=1 git push",
        "/usr/bin/git push",
        "npm publish",
        "cargo publish",
        "gh",
    ] {
        assert!(dangerous(prefix, Network::Loopback).is_some(), "{prefix}");
    }
    for prefix in ["cargo test", "git status", "git commit", "rm", "ls", "make"] {
        assert_eq!(dangerous(prefix, Network::On), None, "{prefix}");
    }
    assert_eq!(dangerous("curl", Network::Loopback), None);
    assert!(dangerous("curl", Network::On).is_some());
}

#[test]
fn the_kernel_s_refusals_read_as_the_sandbox_s() {
    assert!(looks_denied("bash: /etc/x: Read-only file system").is_some());
    assert!(looks_denied("cat: /root/.ssh/id: Permission denied").is_some());
    assert!(looks_denied("bash: line 1: 99 File size limit exceeded").is_some());
    assert_eq!(looks_denied("error[E0308]: mismatched types"), None);
}

#[test]
fn the_seatbelt_profile_says_what_the_policy_says() {
    let policy = Policy {
        writable: vec![
            PathBuf::from("/Users/me/proj"),
            PathBuf::from("/private/tmp"),
        ],
        read_only: vec![
            PathBuf::from("/Users/me/proj/.git/hooks"),
            PathBuf::from("/Users/me/proj/.pincer"),
        ],
        deny_read: vec![
            PathBuf::from("/Users/me/.ssh"),
            PathBuf::from("/Users/me/we\"ird"),
        ],
        network: Network::Off,
        limits: Limits::default(),
        shared_network: None,
        allow_hosts: Vec::new(),
        proxy: None,
    };
    let profile = seatbelt::profile(&policy);
    assert!(
        profile.starts_with("(version 1)\n(deny default)\n"),
        "{profile}"
    );
    assert!(
        profile.contains("(require-not (subpath \"/Users/me/.ssh\"))"),
        "{profile}"
    );
    assert!(
        profile.contains("(subpath \"/Users/me/we\\\"ird\")"),
        "{profile}"
    );
    assert!(
        profile.contains(
            "(require-all (subpath \"/Users/me/proj\")\n    (require-not (subpath \"/Users/me/proj/.git/hooks\"))\n    (require-not (subpath \"/Users/me/proj/.pincer\")))"
        ),
        "{profile}"
    );
    assert!(
        profile.contains("\n  (subpath \"/private/tmp\")"),
        "{profile}"
    );
    assert!(!profile.contains("network*"), "{profile}");
    assert!(!profile.contains("remote ip"), "{profile}");
    let on = seatbelt::profile(&Policy {
        network: Network::On,
        ..policy.clone()
    });
    assert!(on.contains("(allow network*)"));
    let loopback = seatbelt::profile(&Policy {
        network: Network::Loopback,
        ..policy.clone()
    });
    assert!(loopback.contains("(allow network-outbound (remote ip \"localhost:*\"))"));
    // Balanced parentheses outside string literals: sandbox-exec would
    // refuse the profile otherwise.
    let mut depth = 0i32;
    let mut in_string = false;
    let mut escaped = false;
    for c in profile.chars() {
        match (in_string, escaped, c) {
            (true, true, _) => escaped = false,
            (true, false, '\\') => escaped = true,
            (true, false, '"') => in_string = false,
            (false, _, '"') => in_string = true,
            (false, _, '(') => depth += 1,
            (false, _, ')') => depth -= 1,
            _ => {}
        }
        assert!(depth >= 0, "{profile}");
    }
    assert_eq!(depth, 0, "{profile}");
    let line = seatbelt::command(&policy, &["bash", "-c", "true"]);
    assert_eq!(line[0], seatbelt::SANDBOX_EXEC);
    assert_eq!(&line[3..], ["--", "bash", "-c", "true"]);
}

#[test]
fn the_temp_dir_s_sockets_of_the_desktop_and_terminals_are_secrets() {
    let made: Vec<PathBuf> = ["tmux-4242", ".X11-unix-pincer-test", "ssh-pincerTEST"]
        .iter()
        .map(|name| std::env::temp_dir().join(format!("{name}-{}", std::process::id())))
        .collect();
    for path in &made {
        std::fs::create_dir_all(path).unwrap();
    }
    let found = secrets(None, &[], &[]);
    for path in &made {
        let canonical = std::fs::canonicalize(path).unwrap();
        assert!(
            found.contains(path) || found.contains(&canonical),
            "{} is not covered",
            path.display()
        );
        std::fs::remove_dir_all(path).unwrap();
    }
}

#[test]
fn a_server_s_own_keys_go_over_the_session_s() {
    let base = Settings::from_config(&SandboxConfig::default(), None);
    let over: SandboxConfig = toml::from_str(
        "network = \"on\"\nallow_write = [\"/srv/cache\"]\n[limits]\nprocesses = 7\n",
    )
    .unwrap();
    let s = base.clone().overlaid(&over, None);
    assert_eq!(s.network, Network::On);
    assert_eq!(s.allow_write, vec![PathBuf::from("/srv/cache")]);
    assert_eq!(s.limits.processes, 7);
    assert_eq!(s.mode, SandboxMode::WorkspaceWrite);
}

#[test]
fn allow_hosts_are_checked_and_a_project_only_takes_hosts_away() {
    let bad = toml::from_str::<SandboxConfig>("allow_hosts = [\"https://github.com\"]\n");
    assert!(bad.unwrap_err().to_string().contains("is not a host"));
    let user: SandboxConfig =
        toml::from_str("allow_hosts = [\"github.com\", \"*.npmjs.org\"]\n").unwrap();
    let base = Settings::from_config(&user, None);
    assert_eq!(base.allow_hosts, ["github.com", "*.npmjs.org"]);

    let project: SandboxConfig = toml::from_str(
        "allow_hosts = [\"registry.npmjs.org\", \"evil.example\", \"*.github.com\"]\n",
    )
    .unwrap();
    let (narrowing, widening) = super::narrowing(&user, &project);
    assert_eq!(
        widening,
        [
            "sandbox.allow_hosts: evil.example",
            "sandbox.allow_hosts: *.github.com"
        ]
    );
    let narrowed = base.clone().narrowed(&narrowing, None);
    assert_eq!(narrowed.allow_hosts, ["registry.npmjs.org"]);
    assert_eq!(narrowed.network, Network::Loopback);
    // Even unfiltered, narrowing never adds a host.
    assert_eq!(
        base.clone().narrowed(&project, None).allow_hosts,
        ["registry.npmjs.org"]
    );
    // An empty list takes them all away.
    let none: SandboxConfig = toml::from_str("allow_hosts = []\n").unwrap();
    assert!(base.clone().narrowed(&none, None).allow_hosts.is_empty());

    // A user's open network narrowed by a project's list: just those.
    let open = Settings::from_config(&toml::from_str("network = \"on\"\n").unwrap(), None);
    let narrowed = open.narrowed(&project, None);
    assert_eq!(narrowed.network, Network::Loopback);
    assert_eq!(
        narrowed.allow_hosts,
        ["registry.npmjs.org", "evil.example", "*.github.com"]
    );

    // The hosts reach a command's policy with the loopback only.
    let dir = tempfile::tempdir().unwrap();
    let policy = Policy::new(&base, dir.path(), None, &[]).unwrap();
    assert_eq!(policy.allow_hosts, ["github.com", "*.npmjs.org"]);
    let off = Settings {
        network: Network::Off,
        ..base.clone()
    };
    assert!(
        Policy::new(&off, dir.path(), None, &[])
            .unwrap()
            .allow_hosts
            .is_empty()
    );

    // A channel's own list replaces the user's; a server's adds to it.
    let channel: SandboxConfig = toml::from_str("allow_hosts = [\"api.telegram.org\"]\n").unwrap();
    assert_eq!(
        base.clone().unattended(&channel).allow_hosts,
        ["api.telegram.org"]
    );
    assert_eq!(
        base.overlaid(&channel, None).allow_hosts,
        ["github.com", "*.npmjs.org", "api.telegram.org"]
    );
}

#[test]
fn a_model_s_tables_apply_under_the_session_s_choice_the_variable_and_the_project() {
    let user: SandboxConfig = toml::from_str(
        "[by_provider.ollama]\nmode = \"read-only\"\n[by_provider.\"OpenAI/gpt-5\"]\nnetwork = \"on\"\n[by_provider.openai]\nnetwork = \"off\"\nescape = false\n",
    )
    .unwrap();
    let base = Settings::from_config(&user, None);
    let sandbox = || Sandbox::new(base.clone(), None, None, Vec::new()).with_models(&user);

    let s = sandbox();
    assert_eq!(s.mode(), SandboxMode::WorkspaceWrite);
    s.set_model("ollama", "qwen3");
    assert_eq!(s.mode(), SandboxMode::ReadOnly);
    // The model's table, then the provider's under it.
    s.set_model("openai", "gpt-5");
    assert_eq!(s.mode(), SandboxMode::WorkspaceWrite);
    assert_eq!(s.settings().network, Network::On);
    assert!(!s.settings().escape);
    s.set_model("openai", "gpt-4.1");
    assert_eq!(s.settings().network, Network::Off);

    // What the session chose stays chosen.
    let s = sandbox();
    s.set_mode(SandboxMode::Off);
    s.set_model("ollama", "qwen3");
    assert_eq!(s.mode(), SandboxMode::Off);

    // PINCER_SANDBOX wins over the model's table.
    let s = sandbox().with_forced_mode(Some(SandboxMode::WorkspaceWrite));
    s.set_model("ollama", "qwen3");
    assert_eq!(s.mode(), SandboxMode::WorkspaceWrite);

    // Nobody watching: a model's "off" is not honoured.
    let loose: SandboxConfig = toml::from_str("[by_provider.ollama]\nmode = \"off\"\n").unwrap();
    let s = Sandbox::new(Settings::from_config(&loose, None), None, None, Vec::new())
        .with_models(&loose);
    s.make_unattended(&SandboxConfig::default());
    s.set_model("ollama", "qwen3");
    assert_eq!(s.mode(), SandboxMode::WorkspaceWrite);

    // A project narrows a model's table too, and cannot bring its own.
    let project: SandboxConfig = toml::from_str("network = \"loopback\"\n").unwrap();
    let s = Sandbox::new(base.clone(), Some(project), None, Vec::new()).with_models(&user);
    s.set_model("openai", "gpt-5");
    assert_eq!(s.settings().network, Network::Loopback);
    let theirs: SandboxConfig = toml::from_str("[by_provider.ollama]\nmode = \"off\"\n").unwrap();
    let (narrowing, widening) = super::narrowing(&user, &theirs);
    assert_eq!(widening, ["sandbox.by_provider"]);
    assert!(narrowing.by_provider.is_empty());
}
