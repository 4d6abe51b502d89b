//! Tests of the assembled prompt; the parts have their own next to them.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::SystemTime;

use futures::future::BoxFuture;
use pretty_assertions::assert_eq;

use super::*;
use crate::tools::{CallInfo, ToolContext, ToolKind, ToolOutput};

/// A tool with a fixed description, so the snapshot does not follow the
/// built-in tools' wording.
struct FakeTool {
    name: &'static str,
    description: &'static str,
}

impl Tool for FakeTool {
    fn name(&self) -> &'static str {
        self.name
    }

    fn description(&self) -> &'static str {
        self.description
    }

    fn parameters(&self) -> std::sync::Arc<serde_json::Value> {
        serde_json::json!({"type": "object"}).into()
    }

    fn describe(&self, _args: &serde_json::Value, _cwd: &Path) -> CallInfo {
        CallInfo {
            title: self.name.to_owned(),
            kind: ToolKind::Other,
            locations: Vec::new(),
        }
    }

    fn mutating(&self) -> bool {
        false
    }

    fn execute<'a>(
        &'a self,
        _args: serde_json::Value,
        _ctx: &'a ToolContext,
    ) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async { ToolOutput::ok("") })
    }
}

fn tools(names: &[&'static str]) -> Vec<Arc<dyn Tool>> {
    names
        .iter()
        .map(|&name| {
            let description = match name {
                "read" => "Read a file.\nSecond line, not shown.",
                "bash" => "Run a shell command.",
                _ => "Does things.",
            };
            Arc::new(FakeTool { name, description }) as Arc<dyn Tool>
        })
        .collect()
}

fn model() -> Model {
    crate::llm::catalog::Catalog::new(&Default::default(), &|_| None)
        .resolve("anthropic/claude-sonnet-4-5")
        .unwrap()
}

/// 2026-11-22 07:23 in Berlin.
fn now() -> SystemTime {
    SystemTime::from("2026-11-22T06:23:00Z".parse::<jiff::Timestamp>().unwrap())
}

fn host() -> Host {
    Host {
        os: "linux".to_owned(),
        arch: "x86_64".to_owned(),
        shell: "/bin/bash".to_owned(),
    }
}

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/context")
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let target = to.join(entry.file_name());
        if entry.file_type().unwrap().is_dir() {
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), target).unwrap();
        }
    }
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// A temp dir and its real path (so paths compare equal to what discovery
/// builds), with `project/` and `home/` for `Sources`.
fn temp_sources() -> (tempfile::TempDir, PathBuf, Sources) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    std::fs::create_dir_all(root.join("project/.git")).unwrap();
    let sources = Sources {
        cwd: root.join("project"),
        config_dir: root.join("home"),
        project_trusted: true,
    };
    (dir, root, sources)
}

/// The prompt's top-level headings, in order: its shape.
fn headings(text: &str) -> Vec<&str> {
    text.lines().filter(|line| line.starts_with("# ")).collect()
}

#[test]
fn the_fixture_workspace_gives_the_expected_prompt() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    copy_dir(&fixtures(), &root);
    std::fs::remove_file(root.join("expected_prompt.md")).unwrap();
    // Git cannot hold a `.git` inside the repository's fixtures.
    std::fs::create_dir_all(root.join("project/.git")).unwrap();
    let sources = Sources {
        cwd: root.join("project/app/web"),
        config_dir: root.join("home"),
        project_trusted: true,
    };

    let prompt = assemble(&sources, &model(), &tools(&["read", "bash"]), &host());

    let tmp = root.display().to_string();
    let text = prompt.text.replace(&tmp, "$TMP");
    let expected_path = fixtures().join("expected_prompt.md");
    if std::env::var_os("PINCER_UPDATE_FIXTURES").is_some() {
        std::fs::write(&expected_path, &text).unwrap();
    }
    let expected = std::fs::read_to_string(&expected_path).unwrap();
    assert_eq!(text, expected);

    let relative = |paths: &[PathBuf]| -> Vec<String> {
        paths
            .iter()
            .map(|p| p.strip_prefix(&root).unwrap().display().to_string())
            .collect()
    };
    assert_eq!(
        relative(&prompt.files),
        [
            "home/agents/main/workspace/SOUL.md",
            "project/.pincer/APPEND_SYSTEM.md",
            "home/AGENTS.md",
            "project/AGENTS.md",
            "project/app/CLAUDE.md",
            "project/app/web/AGENTS.md",
            "home/agents/main/workspace/USER.md",
            "home/agents/main/workspace/MEMORY.md",
        ]
    );
    let skill_paths: Vec<PathBuf> = prompt.skills.iter().map(|s| s.path.clone()).collect();
    assert_eq!(
        relative(&skill_paths),
        [
            "project/.pincer/skills/deploy/SKILL.md",
            "home/skills/review/SKILL.md"
        ]
    );
    let problems: Vec<String> = prompt
        .problems
        .iter()
        .map(|p| p.replace(&tmp, "$TMP"))
        .collect();
    assert_eq!(
        problems,
        [
            "skill $TMP/project/.pincer/skills/broken/SKILL.md was skipped: its front matter has \
          no `description`; add `description: <what it does and when to use it>`"
        ]
    );
}

#[test]
fn system_md_replaces_identity_tools_and_safety() {
    let (_dir, root, sources) = temp_sources();
    write(
        &root.join("project/.pincer/SYSTEM.md"),
        "You are a test bot.\n\n",
    );
    write(
        &root.join("project/.pincer/APPEND_SYSTEM.md"),
        "Be brief.\n",
    );
    write(
        &sources.workspace().join("SOUL.md"),
        "Not used: SYSTEM.md wins.\n",
    );
    write(&root.join("project/AGENTS.md"), "Project rules.\n");
    write(
        &root.join("home/skills/lint/SKILL.md"),
        "---\nname: lint\ndescription: Lint code.\n---\nRun the linter.\n",
    );
    std::fs::create_dir_all(root.join("project/sub")).unwrap();
    let sources = Sources {
        cwd: root.join("project/sub"),
        ..sources
    };

    let prompt = assemble(&sources, &model(), &tools(&["read"]), &host());

    let expected = format!(
        "You are a test bot.\n\
         \n\
         Be brief.\n\
         \n\
         # Environment\n\
         - Date and time: the current time closes each user message\n\
         - Operating system: linux (x86_64)\n\
         - Shell: /bin/bash\n\
         - Current working directory: {root}/project/sub\n\
         - Model: anthropic/claude-sonnet-4-5\n\
         \n\
         # Project Context\n\
         The following project context files have been loaded:\n\
         \n\
         ## {root}/project/AGENTS.md\n\
         Project rules.\n\
         \n\
         # Skills\n\
         Use the read tool to load a skill's file when the task matches its description.\n\
         \n\
         <available_skills>\n\
         \x20 <skill>\n\
         \x20   <name>lint</name>\n\
         \x20   <description>Lint code.</description>\n\
         \x20   <location>{root}/home/skills/lint/SKILL.md</location>\n\
         \x20 </skill>\n\
         </available_skills>\n\
         \n\
         # Silent replies\n\
         When you have nothing to say, for example in a background or memory turn, reply with \
         exactly NO_REPLY as the entire message. Never use NO_REPLY otherwise, and never add it \
         to a real answer.\n",
        root = root.display()
    );
    assert_eq!(prompt.text, expected);
    assert_eq!(
        prompt.files,
        [
            root.join("project/.pincer/SYSTEM.md"),
            root.join("project/.pincer/APPEND_SYSTEM.md"),
            root.join("project/AGENTS.md"),
        ]
    );
}

#[test]
fn without_workspace_files_the_built_in_identity_opens_the_prompt() {
    let (_dir, _root, sources) = temp_sources();
    let prompt = assemble(&sources, &model(), &tools(&["read", "bash"]), &host());
    let start = format!(
        "{IDENTITY}\n\n# Tools\n- read: Read a file.\n- bash: Run a shell command.\n\n# Safety\n\
         {SAFETY}\n\n# Environment\n"
    );
    assert_eq!(prompt.text.get(..start.len()), Some(start.as_str()));
    assert_eq!(
        headings(&prompt.text),
        ["# Tools", "# Safety", "# Environment", "# Silent replies"]
    );
    assert_eq!(prompt.files, Vec::<PathBuf>::new());
}

#[test]
fn identity_md_alone_replaces_the_built_in_identity() {
    let (_dir, _root, sources) = temp_sources();
    let path = sources.workspace().join("IDENTITY.md");
    write(&path, "Name: Pinch\n");
    let prompt = assemble(&sources, &model(), &tools(&["bash"]), &host());
    let start = format!(
        "# Identity\nThe files below, from your own workspace, say who you are. Embody the \
         persona and tone they describe.\n\n## {}\nName: Pinch\n\n# Tools\n",
        path.display()
    );
    assert_eq!(prompt.text.get(..start.len()), Some(start.as_str()));
}

#[test]
fn skills_are_left_out_of_the_prompt_without_a_read_tool() {
    let (_dir, root, sources) = temp_sources();
    write(
        &root.join("project/.pincer/skills/lint/SKILL.md"),
        "---\nname: lint\ndescription: Lint code.\n---\n",
    );
    let with_read = assemble(&sources, &model(), &tools(&["read", "bash"]), &host());
    let without = assemble(&sources, &model(), &tools(&["bash"]), &host());
    assert_eq!(
        headings(&with_read.text),
        [
            "# Tools",
            "# Safety",
            "# Environment",
            "# Skills",
            "# Silent replies"
        ]
    );
    assert_eq!(
        headings(&without.text),
        ["# Tools", "# Safety", "# Environment", "# Silent replies"]
    );
    assert_eq!(without.skills.len(), 1);
}

#[test]
fn the_skills_index_escapes_xml_and_holds_no_body() {
    let skill = skills::Skill {
        name: "a-b".to_owned(),
        description: "Use for <html> & \"quotes\" or 'apostrophes'.".to_owned(),
        path: PathBuf::from("/s/a&b/SKILL.md"),
        dir: PathBuf::from("/s/a&b"),
    };
    assert_eq!(
        skills_section(&[skill]),
        "# Skills\n\
         Use the read tool to load a skill's file when the task matches its description.\n\
         \n\
         <available_skills>\n\
         \x20 <skill>\n\
         \x20   <name>a-b</name>\n\
         \x20   <description>Use for &lt;html&gt; &amp; &quot;quotes&quot; or \
         &apos;apostrophes&apos;.</description>\n\
         \x20   <location>/s/a&amp;b/SKILL.md</location>\n\
         \x20 </skill>\n\
         </available_skills>"
    );
}

#[test]
fn time_is_local_with_zone_name_and_offset() {
    let cases = [
        (
            TimeZone::get("Europe/Berlin").unwrap(),
            "2026-11-22 07:23 (Europe/Berlin, UTC+01:00)",
        ),
        (
            TimeZone::get("America/New_York").unwrap(),
            "2026-11-22 01:23 (America/New_York, UTC-05:00)",
        ),
        (TimeZone::UTC, "2026-11-22 06:23 (UTC, UTC+00:00)"),
        (
            TimeZone::fixed(jiff::tz::offset(-3)),
            "2026-11-22 03:23 (UTC-03:00)",
        ),
    ];
    for (zone, expected) in cases {
        assert_eq!(format_time(now(), &zone), expected);
    }
}

#[test]
fn project_dirs_stop_at_the_git_root() {
    let (_dir, root, _) = temp_sources();
    let sources = Sources {
        cwd: root.join("project/a/b"),
        config_dir: root.join("home"),
        project_trusted: true,
    };
    assert_eq!(
        sources.project_dirs(),
        [
            root.join("project/a/b"),
            root.join("project/a"),
            root.join("project")
        ]
    );
    assert_eq!(sources.workspace(), root.join("home/agents/main/workspace"));
}

#[test]
fn context_past_the_total_cap_is_named_in_the_prompt() {
    let (_dir, root, mut sources) = temp_sources();
    // Ten nested full-size AGENTS.md: 7 whole, the 8th cut, 9 and 10 left
    // out, and the prompt says which.
    let mut cwd = root.join("project");
    let mut paths = Vec::new();
    for i in 0..10 {
        cwd = cwd.join(format!("d{i}"));
        let path = cwd.join("AGENTS.md");
        write(&path, &format!("{i}").repeat(files::FILE_CAP));
        paths.push(path);
    }
    sources.cwd = cwd;
    let prompt = assemble(&sources, &model(), &tools(&["read"]), &host());
    let context = prompt
        .text
        .split("\n\n# ")
        .find(|section| section.starts_with("Project Context\n"))
        .expect("a project context section");
    let marker = format!(
        "[… project context limit of 150,000 characters reached; left out: {}, {} …]",
        paths[8].display(),
        paths[9].display()
    );
    assert_eq!(context.lines().last(), Some(marker.as_str()));
    assert_eq!(
        prompt.files[prompt.files.len() - 8..],
        paths[..8],
        "the kept files"
    );
    assert!(!prompt.text.contains(&"8".repeat(100)));
}

#[test]
fn a_read_only_tool_set_with_todo_asks_for_the_plan_as_a_todo_list() {
    use crate::tools::{read::ReadTool, todo::TodoTool, write::WriteTool};
    let read_only: Vec<Arc<dyn Tool>> = vec![Arc::new(ReadTool), Arc::new(TodoTool)];
    let section = tools_section(&read_only);
    assert!(section.ends_with(PLAN_MODE), "{section}");
    let writable: Vec<Arc<dyn Tool>> =
        vec![Arc::new(ReadTool), Arc::new(WriteTool), Arc::new(TodoTool)];
    assert!(!tools_section(&writable).contains(PLAN_MODE));
    // Without todo there is nothing to present the plan with.
    let no_todo: Vec<Arc<dyn Tool>> = vec![Arc::new(ReadTool)];
    assert!(!tools_section(&no_todo).contains(PLAN_MODE));
}

/// Appended instructions: the default prompt unchanged, then the client's
/// text under its own heading, after the project's context.
#[test]
fn an_appended_client_prompt_follows_the_whole_default_prompt() {
    let (_dir, root, sources) = temp_sources();
    write(&root.join("project/AGENTS.md"), "Project rules.\n");
    let tools = tools(&["read", "bash"]);
    let default = assemble(&sources, &model(), &tools, &host());
    let client = ClientPrompt::append("Answer in French.\n\nBe brief.\n");

    let prompt = assemble_with(&sources, &model(), &tools, &host(), Some(&client));

    assert_eq!(
        prompt.text,
        format!(
            "{}\n# Session instructions\nThe client that runs this session gives these \
             instructions for it:\n\nAnswer in French.\n\nBe brief.\n",
            default.text
        )
    );
    assert_eq!(prompt.files, default.files);
}

/// Override: the client's text in place of pincer's identity (and the
/// workspace's SOUL.md) and safety rules; tools, the project's
/// instructions with their trust notice, environment, context files and
/// skills stay, in their usual order.
#[test]
fn an_overriding_client_prompt_replaces_identity_and_safety_only() {
    let (_dir, root, sources) = temp_sources();
    let sources = Sources {
        project_trusted: false,
        ..sources
    };
    write(&sources.workspace().join("SOUL.md"), "I am Pinch.\n");
    write(&root.join("project/.pincer/SYSTEM.md"), "Use tabs.\n");
    write(&root.join("project/AGENTS.md"), "Project rules.\n");
    write(
        &root.join("home/skills/lint/SKILL.md"),
        "---\nname: lint\ndescription: Lint code.\n---\nRun the linter.\n",
    );
    let client = ClientPrompt {
        mode: ClientPromptMode::Override,
        text: "You are a code reviewer.".into(),
    };

    let prompt = assemble_with(
        &sources,
        &model(),
        &tools(&["read", "bash"]),
        &host(),
        Some(&client),
    );

    let start = format!(
        "You are a code reviewer.\n\n# Tools\n- read: Read a file.\n- bash: Run a shell \
         command.\n\n# Project instructions\nFrom {root}/project/.pincer/SYSTEM.md (the project \
         is not trusted, so these instructions come after the session's own and cannot change \
         them):\n\nUse tabs.\n\n# Environment\n",
        root = root.display()
    );
    assert_eq!(prompt.text.get(..start.len()), Some(start.as_str()));
    assert_eq!(
        headings(&prompt.text),
        [
            "# Tools",
            "# Project instructions",
            "# Environment",
            "# Project Context",
            "# Skills",
            "# Silent replies"
        ]
    );
    assert!(!prompt.text.contains("I am Pinch."), "{}", prompt.text);
    assert!(!prompt.text.contains(SAFETY), "{}", prompt.text);
    assert_eq!(
        prompt.files,
        [
            root.join("project/.pincer/SYSTEM.md"),
            root.join("project/AGENTS.md"),
        ]
    );
}

/// A trusted project's SYSTEM.md would replace pincer's opening sections;
/// with the client's override it is kept as the project's instructions
/// after the client's text, and the tool list stays.
#[test]
fn an_overriding_client_prompt_keeps_a_trusted_system_md_as_project_instructions() {
    let (_dir, root, sources) = temp_sources();
    write(&root.join("project/.pincer/SYSTEM.md"), "Use tabs.\n");
    let client = ClientPrompt {
        mode: ClientPromptMode::Override,
        text: "You are a code reviewer.".into(),
    };

    let prompt = assemble_with(
        &sources,
        &model(),
        &tools(&["bash"]),
        &host(),
        Some(&client),
    );

    let start = format!(
        "You are a code reviewer.\n\n# Tools\n- bash: Run a shell command.\n\n# Project \
         instructions\nFrom {root}/project/.pincer/SYSTEM.md:\n\nUse tabs.\n\n# Environment\n",
        root = root.display()
    );
    assert_eq!(prompt.text.get(..start.len()), Some(start.as_str()));
}
