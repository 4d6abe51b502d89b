//! Skills: folders of instructions the model loads when a task needs them.
//!
//! A skill is a directory holding a `SKILL.md` whose front matter gives a
//! `name` and a `description` (the Agent Skills format). Only those two and
//! the file's path go into the system prompt; the model reads the file with
//! its `read` tool when a task matches, so a hundred skills cost a few lines
//! each. Skills come from the project (`.pincer/skills/`, then
//! `.agents/skills/`, in the cwd and its ancestors up to the git root) and
//! from the user's `<config_dir>/skills/`; on a name clash the project's
//! wins. A broken skill is skipped and described, never fatal.

use std::path::{Path, PathBuf};

use super::frontmatter::{self, FrontMatter};
use super::{Sources, same_path};

/// The longest `name` allowed.
pub const MAX_NAME: usize = 64;

/// The longest `description` allowed.
pub const MAX_DESCRIPTION: usize = 1024;

/// One usable skill.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Skill {
    pub name: String,
    pub description: String,
    /// The `SKILL.md`.
    pub path: PathBuf,
    /// The skill's directory, which may hold scripts and references next to
    /// `SKILL.md`.
    pub dir: PathBuf,
}

/// The skills for `sources`, highest precedence first, and what was wrong
/// with the ones that were skipped or shadowed.
pub fn discover(sources: &Sources) -> (Vec<Skill>, Vec<String>) {
    let mut skills: Vec<Skill> = Vec::new();
    let mut problems = Vec::new();
    for root in roots(sources) {
        for dir in skill_dirs(&root, &mut problems) {
            let path = dir.join("SKILL.md");
            if !path.is_file() {
                continue;
            }
            let Some(skill) = load(dir, path, &mut problems) else {
                continue;
            };
            match skills.iter().find(|s| s.name == skill.name) {
                Some(winner) => problems.push(format!(
                    "skill `{}` at {} is hidden by the skill of the same name at {}; rename one \
                     of them if both should be available",
                    skill.name,
                    skill.path.display(),
                    winner.path.display()
                )),
                None => skills.push(skill),
            }
        }
    }
    (skills, problems)
}

/// The `SKILL.md` content after the front matter: the instructions
/// themselves.
pub fn body(skill: &Skill) -> std::io::Result<String> {
    let text = std::fs::read_to_string(&skill.path)?;
    Ok(match frontmatter::parse(&text) {
        Ok(front) => front.body.trim_start_matches(['\r', '\n']).to_owned(),
        Err(_) => text,
    })
}

/// The directories skills are looked for in, in precedence order, each
/// once.
fn roots(sources: &Sources) -> Vec<PathBuf> {
    let project = sources.project_dirs();
    let mut roots: Vec<PathBuf> = Vec::new();
    let candidates = project
        .iter()
        .map(|dir| dir.join(".pincer").join("skills"))
        .chain(project.iter().map(|dir| dir.join(".agents").join("skills")))
        .chain([sources.config_dir.join("skills")]);
    for root in candidates {
        if root.is_dir() && !roots.iter().any(|seen| same_path(seen, &root)) {
            roots.push(root);
        }
    }
    roots
}

/// The visible subdirectories of `root`, by name.
fn skill_dirs(root: &Path, problems: &mut Vec<String>) -> Vec<PathBuf> {
    let entries = match std::fs::read_dir(root) {
        Ok(entries) => entries,
        Err(e) => {
            problems.push(format!(
                "the skills in {} were skipped because the directory could not be read ({e}); \
                 check its permissions",
                root.display()
            ));
            return Vec::new();
        }
    };
    let mut dirs: Vec<PathBuf> = entries
        .filter_map(|entry| entry.ok())
        .filter(|entry| !entry.file_name().to_string_lossy().starts_with('.'))
        .map(|entry| entry.path())
        .filter(|path| path.is_dir())
        .collect();
    dirs.sort();
    dirs
}

/// Reads and checks one `SKILL.md`; `None` (with a problem) when it cannot
/// be used.
fn load(dir: PathBuf, path: PathBuf, problems: &mut Vec<String>) -> Option<Skill> {
    let skipped = |why: &str| format!("skill {} was skipped: {why}", path.display());
    let text = match std::fs::read_to_string(&path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::InvalidData => {
            problems.push(skipped("it is not valid UTF-8; save it as UTF-8"));
            return None;
        }
        Err(e) => {
            problems.push(skipped(&format!(
                "it could not be read ({e}); check its permissions"
            )));
            return None;
        }
    };
    let FrontMatter { mut fields, .. } = match frontmatter::parse(&text) {
        Ok(front) => front,
        Err(frontmatter::Error::Missing) => {
            problems.push(skipped(
                "it has no front matter; start the file with a `---` line, then \
                 `name: <skill-name>` and `description: <what it does and when to use it>`, \
                 then another `---` line",
            ));
            return None;
        }
        Err(frontmatter::Error::Unclosed) => {
            problems.push(skipped(
                "its front matter is not closed; add a `---` line after the last field",
            ));
            return None;
        }
    };
    let dir_name = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let name = fields.remove("name").unwrap_or_default();
    if name.is_empty() {
        problems.push(skipped(&format!(
            "its front matter has no `name`; add `name: {dir_name}`"
        )));
        return None;
    }
    if !valid_name(&name) {
        problems.push(skipped(&format!(
            "its name `{name}` is not 1 to {MAX_NAME} lowercase letters, digits and hyphens; \
             rename it"
        )));
        return None;
    }
    let description = fields.remove("description").unwrap_or_default();
    if description.is_empty() {
        problems.push(skipped(
            "its front matter has no `description`; add `description: <what it does and when \
             to use it>`",
        ));
        return None;
    }
    let length = description.chars().count();
    if length > MAX_DESCRIPTION {
        problems.push(skipped(&format!(
            "its description has {length} characters, more than the {MAX_DESCRIPTION} allowed; \
             shorten it"
        )));
        return None;
    }
    if name != dir_name {
        problems.push(format!(
            "skill {}: its name `{name}` does not match its directory `{dir_name}`; rename one \
             so they match (the skill is loaded as `{name}`)",
            path.display()
        ));
    }
    Some(Skill {
        name,
        description,
        path,
        dir,
    })
}

fn valid_name(name: &str) -> bool {
    name.len() <= MAX_NAME
        && !name.is_empty()
        && name
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn write(path: &Path, text: &str) {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    fn skill_md(name: &str, description: &str) -> String {
        format!("---\nname: {name}\ndescription: {description}\n---\n# {name}\n\nDo it.\n")
    }

    /// A git repository at `<tmp>/repo` with the cwd two levels down and
    /// the user's config dir at `<tmp>/home`.
    fn setup() -> (tempfile::TempDir, PathBuf, Sources) {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        std::fs::create_dir_all(root.join("repo/.git")).unwrap();
        std::fs::create_dir_all(root.join("repo/a/b")).unwrap();
        let sources = Sources {
            cwd: root.join("repo/a/b"),
            config_dir: root.join("home"),
            project_trusted: true,
        };
        (dir, root, sources)
    }

    fn names(skills: &[Skill]) -> Vec<(&str, &Path)> {
        skills
            .iter()
            .map(|s| (s.name.as_str(), s.path.as_path()))
            .collect()
    }

    #[test]
    fn skills_come_from_project_agents_and_user_dirs_with_project_first() {
        let (_dir, root, sources) = setup();
        let pincer = root.join("repo/.pincer/skills");
        let agents = root.join("repo/a/.agents/skills");
        let user = root.join("home/skills");
        write(
            &pincer.join("deploy/SKILL.md"),
            &skill_md("deploy", "Ship it."),
        );
        write(
            &agents.join("deploy/SKILL.md"),
            &skill_md("deploy", "Agents' ship."),
        );
        write(&agents.join("lint/SKILL.md"), &skill_md("lint", "Lint it."));
        write(&user.join("lint/SKILL.md"), &skill_md("lint", "User lint."));
        write(
            &user.join("notes/SKILL.md"),
            &skill_md("notes", "Take notes."),
        );
        // Not skills: no SKILL.md, a hidden directory, a loose file.
        std::fs::create_dir_all(user.join("assets")).unwrap();
        write(&user.join(".hidden/SKILL.md"), &skill_md("hidden", "No."));
        write(&user.join("loose.md"), &skill_md("loose", "No."));
        // Above the git root: not the project's.
        write(
            &root.join(".pincer/skills/outside/SKILL.md"),
            &skill_md("outside", "No."),
        );

        let (skills, problems) = discover(&sources);
        assert_eq!(
            names(&skills),
            [
                ("deploy", pincer.join("deploy/SKILL.md").as_path()),
                ("lint", agents.join("lint/SKILL.md").as_path()),
                ("notes", user.join("notes/SKILL.md").as_path()),
            ]
        );
        assert_eq!(
            skills[0],
            Skill {
                name: "deploy".to_owned(),
                description: "Ship it.".to_owned(),
                path: pincer.join("deploy/SKILL.md"),
                dir: pincer.join("deploy"),
            }
        );
        assert_eq!(
            problems,
            [
                format!(
                    "skill `deploy` at {} is hidden by the skill of the same name at {}; rename \
                     one of them if both should be available",
                    agents.join("deploy/SKILL.md").display(),
                    pincer.join("deploy/SKILL.md").display()
                ),
                format!(
                    "skill `lint` at {} is hidden by the skill of the same name at {}; rename \
                     one of them if both should be available",
                    user.join("lint/SKILL.md").display(),
                    agents.join("lint/SKILL.md").display()
                ),
            ]
        );
    }

    #[test]
    fn outside_a_git_repository_only_the_cwd_is_the_project() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().canonicalize().unwrap();
        let sources = Sources {
            cwd: root.join("a/b"),
            config_dir: root.join("home"),
            project_trusted: true,
        };
        write(
            &root.join("a/.pincer/skills/up/SKILL.md"),
            &skill_md("up", "No."),
        );
        write(
            &root.join("a/b/.pincer/skills/here/SKILL.md"),
            &skill_md("here", "Yes."),
        );
        let (skills, problems) = discover(&sources);
        assert_eq!(
            names(&skills),
            [(
                "here",
                root.join("a/b/.pincer/skills/here/SKILL.md").as_path()
            )]
        );
        assert_eq!(problems, Vec::<String>::new());
    }

    #[test]
    fn each_kind_of_broken_skill_is_reported_with_its_path() {
        let (_dir, root, sources) = setup();
        let skills_dir = root.join("home/skills");
        let path = |dir: &str| skills_dir.join(dir).join("SKILL.md");
        write(&path("a-no-front"), "# Just a title\n");
        write(
            &path("b-unclosed"),
            "---\nname: b-unclosed\ndescription: x\n",
        );
        write(&path("c-no-name"), "---\ndescription: x\n---\n");
        write(&path("d-bad-name"), &skill_md("Bad_Name", "x"));
        write(&path("e-long-name"), &skill_md(&"e".repeat(65), "x"));
        write(&path("f-no-desc"), "---\nname: f-no-desc\n---\n");
        write(
            &path("g-long-desc"),
            &skill_md("g-long-desc", &"d".repeat(1025)),
        );
        std::fs::create_dir_all(skills_dir.join("h-not-utf8")).unwrap();
        std::fs::write(path("h-not-utf8"), b"---\nname: \xff\n---\n").unwrap();
        write(&path("i-mismatch"), &skill_md("other-name", "Still loads."));
        write(
            &path("j-edge"),
            &skill_md(&"j".repeat(64), &"d".repeat(1024)),
        );

        let (skills, problems) = discover(&sources);
        assert_eq!(
            names(&skills),
            [
                ("other-name", path("i-mismatch").as_path()),
                ("j".repeat(64).as_str(), path("j-edge").as_path()),
            ]
        );
        let skipped =
            |dir: &str, why: &str| format!("skill {} was skipped: {why}", path(dir).display());
        assert_eq!(
            problems,
            [
                skipped(
                    "a-no-front",
                    "it has no front matter; start the file with a `---` line, then \
                     `name: <skill-name>` and `description: <what it does and when to use \
                     it>`, then another `---` line"
                ),
                skipped(
                    "b-unclosed",
                    "its front matter is not closed; add a `---` line after the last field"
                ),
                skipped(
                    "c-no-name",
                    "its front matter has no `name`; add `name: c-no-name`"
                ),
                skipped(
                    "d-bad-name",
                    "its name `Bad_Name` is not 1 to 64 lowercase letters, digits and \
                     hyphens; rename it"
                ),
                skipped(
                    "e-long-name",
                    &format!(
                        "its name `{}` is not 1 to 64 lowercase letters, digits and hyphens; \
                         rename it",
                        "e".repeat(65)
                    )
                ),
                skipped(
                    "f-no-desc",
                    "its front matter has no `description`; add `description: <what it does \
                     and when to use it>`"
                ),
                skipped(
                    "g-long-desc",
                    "its description has 1025 characters, more than the 1024 allowed; \
                     shorten it"
                ),
                skipped("h-not-utf8", "it is not valid UTF-8; save it as UTF-8"),
                format!(
                    "skill {}: its name `other-name` does not match its directory \
                     `i-mismatch`; rename one so they match (the skill is loaded as \
                     `other-name`)",
                    path("i-mismatch").display()
                ),
                format!(
                    "skill {}: its name `{}` does not match its directory `j-edge`; rename \
                     one so they match (the skill is loaded as `{}`)",
                    path("j-edge").display(),
                    "j".repeat(64),
                    "j".repeat(64)
                ),
            ]
        );
    }

    #[test]
    fn the_body_is_the_file_without_its_front_matter() {
        let (_dir, root, sources) = setup();
        write(
            &root.join("home/skills/deploy/SKILL.md"),
            &skill_md("deploy", "Ship it."),
        );
        let (skills, _) = discover(&sources);
        assert_eq!(body(&skills[0]).unwrap(), "# deploy\n\nDo it.\n");
    }
}
