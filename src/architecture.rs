//! The layering ARCHITECTURE.md describes, checked against the source.
//!
//! A test reads every file under `src/`, collects which module each one
//! imports from (`use` trees, `crate::…` and `super::…` paths; test code
//! excluded), and fails when
//! - a top-level module imports from one above it in [`LAYERS`], or from a
//!   peer on its own line, or when a top-level module is missing from the
//!   list (a new module gets a place deliberately, not by accident);
//! - sibling modules anywhere import each other in a circle (a child using
//!   its parent's items is how Rust modules work and does not count).
//!
//! It reads text, not the compiler's name resolution: a path spelled in a
//! way it does not recognise (a glob re-export chain, a macro) escapes it.
//! The spellings the code base uses are the ones it recognises.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Top-level modules, lowest first. A module may import from modules on
/// earlier lines only; modules on one line are peers that import neither
/// each other nor anything after them.
pub const LAYERS: &[&[&str]] = &[
    &["process_group", "parallel", "json_schema", "units"],
    &["checkpoint"],
    &["llm"],
    &["tools", "auth"],
    &["mcp"],
    &["config"],
    &["cluster"],
    &["context"],
    &["agent"],
    &["workflow"],
    &["session"],
    &["acp"],
    &["gateway"],
    &["bridge"],
    &["cli"],
];

type Module = Vec<String>;

/// The module of every non-test source file, with the file's text.
fn modules(src: &Path) -> BTreeMap<Module, String> {
    let mut found = BTreeMap::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                let Some(module) = module_of(src, &path) else {
                    continue;
                };
                let text = std::fs::read_to_string(&path).unwrap_or_default();
                found.insert(module, text);
            }
        }
    }
    // Files declared `#[cfg(test)] mod name;` are test code.
    let root = std::fs::read_to_string(src.join("lib.rs")).unwrap_or_default();
    let mut test_files: BTreeSet<Module> = test_module_declarations(&root)
        .into_iter()
        .map(|name| vec![name])
        .collect();
    test_files.extend(found.iter().flat_map(|(module, text)| {
        test_module_declarations(text)
            .into_iter()
            .map(move |name| [module.clone(), vec![name]].concat())
    }));
    found.retain(|module, _| !test_files.contains(module));
    found
        .into_iter()
        .map(|(module, text)| (module, strip_tests(&strip_comments(&text))))
        .collect()
}

fn module_of(src: &Path, file: &Path) -> Option<Module> {
    let relative: PathBuf = file.strip_prefix(src).ok()?.with_extension("");
    let mut parts: Module = relative
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    // The crate roots: the library, and the binaries (`main`, and
    // `bin/*`, the small `pincer-sandbox`), which sit on top of it.
    if parts == ["lib"] || parts == ["main"] || parts.first().is_some_and(|p| p == "bin") {
        return None;
    }
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    Some(parts)
}

/// Names of `#[cfg(test)] mod name;` declarations (modules in files).
fn test_module_declarations(text: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("#[cfg(test)]") {
        rest = &rest[at + "#[cfg(test)]".len()..];
        let after = skip_attributes(rest);
        let Some(decl) = after.strip_prefix("mod ") else {
            continue;
        };
        let name: String = decl
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        if decl[name.len()..].trim_start().starts_with(';') {
            names.push(name);
        }
    }
    names
}

/// `text` from its first item on: whitespace and attributes
/// (`#[path = "…"]`, `#[allow(…)]`) skipped.
fn skip_attributes(text: &str) -> &str {
    let mut rest = text.trim_start();
    while rest.starts_with("#[") {
        let mut depth = 0usize;
        let mut end = rest.len();
        for (i, c) in rest.char_indices() {
            match c {
                '[' => depth += 1,
                ']' => {
                    depth -= 1;
                    if depth == 0 {
                        end = i + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        rest = rest[end..].trim_start();
    }
    rest
}

/// The text without `//` and `/* */` comments (string literals are left;
/// none in this code base spells a module path).
fn strip_comments(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.char_indices().peekable();
    while let Some((_, c)) = chars.next() {
        if c == '/' {
            match chars.peek() {
                Some((_, '/')) => {
                    for (_, c) in chars.by_ref() {
                        if c == '\n' {
                            out.push('\n');
                            break;
                        }
                    }
                    continue;
                }
                Some((_, '*')) => {
                    chars.next();
                    let mut last = ' ';
                    for (_, c) in chars.by_ref() {
                        if last == '*' && c == '/' {
                            break;
                        }
                        last = c;
                    }
                    continue;
                }
                _ => {}
            }
        }
        out.push(c);
    }
    out
}

/// The text without inline `#[cfg(test)] mod name { … }` blocks.
fn strip_tests(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        let after = &rest[at + "#[cfg(test)]".len()..];
        let trimmed = skip_attributes(after);
        let is_block = trimmed.starts_with("mod ")
            && trimmed
                .find(['{', ';'])
                .is_some_and(|i| trimmed.as_bytes()[i] == b'{');
        if !is_block {
            rest = after;
            continue;
        }
        let open = after.find('{').unwrap_or(0);
        let mut depth = 0usize;
        let mut end = after.len();
        for (i, c) in after[open..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = open + i + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        rest = &after[end..];
    }
    out.push_str(rest);
    out
}

/// Expands a `use` tree (`a::{b, c::{d, e}}`) into its paths.
fn expand_use(tree: &str) -> Vec<String> {
    fn walk(tree: &str, prefix: &str, out: &mut Vec<String>) {
        let mut depth = 0;
        let mut start = 0;
        let mut parts = Vec::new();
        for (i, c) in tree.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    parts.push(&tree[start..i]);
                    start = i + 1;
                }
                _ => {}
            }
        }
        parts.push(&tree[start..]);
        for part in parts {
            let part = part.trim();
            if part.is_empty() {
                continue;
            }
            match part.find('{') {
                Some(open) if part.ends_with('}') => {
                    let head = &part[..open];
                    walk(
                        &part[open + 1..part.len() - 1],
                        &format!("{prefix}{head}"),
                        out,
                    );
                }
                _ => {
                    let path = part.split(" as ").next().unwrap_or(part).trim();
                    out.push(format!("{prefix}{path}"));
                }
            }
        }
    }
    let compact: String = tree.split_whitespace().collect::<Vec<_>>().join(" ");
    let compact = compact.replace(":: ", "::").replace(" ::", "::");
    let mut out = Vec::new();
    walk(&compact, "", &mut out);
    out
}

/// Every path in `text` that starts at `crate`, `super` or `self`.
fn paths(text: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find("use ") {
        let before = rest[..at].chars().last();
        rest = &rest[at + 4..];
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        if let Some(end) = rest.find(';') {
            found.extend(expand_use(&rest[..end]));
        }
    }
    let bytes = text.as_bytes();
    for start in ["crate::", "super::"] {
        let mut from = 0;
        while let Some(at) = text[from..].find(start) {
            let begin = from + at;
            from = begin + start.len();
            if begin > 0 && (bytes[begin - 1].is_ascii_alphanumeric() || bytes[begin - 1] == b'_') {
                continue;
            }
            if begin >= 2 && &text[begin - 2..begin] == "::" {
                continue;
            }
            let end = text[begin..]
                .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                .map_or(text.len(), |e| begin + e);
            found.push(text[begin..end].trim_end_matches(':').to_string());
        }
    }
    found
}

/// Which modules each module imports from (the longest module prefix of
/// every path it names).
fn imports(modules: &BTreeMap<Module, String>) -> BTreeMap<Module, BTreeSet<Module>> {
    let mut edges: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
    for (module, text) in modules {
        for path in paths(text) {
            let mut parts: Vec<&str> = path.split("::").filter(|p| !p.is_empty()).collect();
            let mut target: Module = match parts.first() {
                Some(&"crate") => {
                    parts.remove(0);
                    Vec::new()
                }
                Some(&"super") => {
                    let mut base = module.clone();
                    while parts.first() == Some(&"super") {
                        parts.remove(0);
                        base.pop();
                    }
                    base
                }
                Some(&"self") => {
                    parts.remove(0);
                    module.clone()
                }
                _ => continue,
            };
            target.extend(parts.iter().map(|p| p.to_string()));
            while !target.is_empty() && !modules.contains_key(&target) {
                target.pop();
            }
            if !target.is_empty() && &target != module {
                edges.entry(module.clone()).or_default().insert(target);
            }
        }
    }
    edges
}

fn layer_of(top: &str) -> Option<usize> {
    LAYERS.iter().position(|line| line.contains(&top))
}

/// Imports that break [`LAYERS`], as "from -> to" lines.
fn layer_violations(edges: &BTreeMap<Module, BTreeSet<Module>>) -> Vec<String> {
    let mut wrong = Vec::new();
    for (from, targets) in edges {
        for to in targets {
            let (a, b) = (&from[0], &to[0]);
            if a == b {
                continue;
            }
            match (layer_of(a), layer_of(b)) {
                (Some(la), Some(lb)) if lb < la => {}
                (Some(_), Some(_)) => {
                    wrong.push(format!("{} -> {}", from.join("::"), to.join("::")))
                }
                _ => wrong.push(format!(
                    "{} -> {}: a top-level module missing from LAYERS",
                    from.join("::"),
                    to.join("::")
                )),
            }
        }
    }
    wrong
}

/// Circles among the children of each module (each child standing for
/// itself and its descendants), as sorted lists of module names.
fn sibling_circles(edges: &BTreeMap<Module, BTreeSet<Module>>) -> Vec<Vec<String>> {
    let mut parents: BTreeSet<Module> = BTreeSet::from([Vec::new()]);
    for module in edges.keys() {
        for n in 0..module.len() {
            parents.insert(module[..n].to_vec());
        }
    }
    let child_of = |module: &Module, parent: &Module| -> Option<Module> {
        (module.len() > parent.len() && module.starts_with(parent))
            .then(|| module[..=parent.len()].to_vec())
    };
    let mut circles = Vec::new();
    for parent in &parents {
        let mut graph: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
        for (from, targets) in edges {
            let Some(a) = child_of(from, parent) else {
                continue;
            };
            for to in targets {
                if let Some(b) = child_of(to, parent).filter(|b| *b != a) {
                    graph.entry(a.clone()).or_default().insert(b);
                }
            }
        }
        for component in strongly_connected(&graph) {
            if component.len() > 1 {
                let mut names: Vec<String> = component.iter().map(|m| m.join("::")).collect();
                names.sort();
                circles.push(names);
            }
        }
    }
    circles
}

/// Tarjan's algorithm, iteratively.
fn strongly_connected(graph: &BTreeMap<Module, BTreeSet<Module>>) -> Vec<Vec<Module>> {
    let nodes: Vec<&Module> = graph
        .keys()
        .chain(graph.values().flatten())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    let index_of: BTreeMap<&Module, usize> =
        nodes.iter().enumerate().map(|(i, m)| (*m, i)).collect();
    let successors: Vec<Vec<usize>> = nodes
        .iter()
        .map(|m| {
            graph
                .get(*m)
                .map_or_else(Vec::new, |s| s.iter().map(|t| index_of[t]).collect())
        })
        .collect();
    let n = nodes.len();
    let (mut index, mut low, mut on_stack) = (vec![usize::MAX; n], vec![0; n], vec![false; n]);
    let (mut stack, mut components, mut next) = (Vec::new(), Vec::new(), 0);
    for root in 0..n {
        if index[root] != usize::MAX {
            continue;
        }
        let mut work = vec![(root, 0usize)];
        while let Some(&mut (v, ref mut i)) = work.last_mut() {
            if *i == 0 {
                index[v] = next;
                low[v] = next;
                next += 1;
                stack.push(v);
                on_stack[v] = true;
            }
            if let Some(&w) = successors[v].get(*i) {
                *i += 1;
                if index[w] == usize::MAX {
                    work.push((w, 0));
                } else if on_stack[w] {
                    low[v] = low[v].min(index[w]);
                }
                continue;
            }
            work.pop();
            if let Some(&(parent, _)) = work.last() {
                low[parent] = low[parent].min(low[v]);
            }
            if low[v] == index[v] {
                let mut component = Vec::new();
                while let Some(w) = stack.pop() {
                    on_stack[w] = false;
                    component.push(nodes[w].clone());
                    if w == v {
                        break;
                    }
                }
                components.push(component);
            }
        }
    }
    components
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source() -> BTreeMap<Module, BTreeSet<Module>> {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        imports(&modules(&src))
    }

    #[test]
    fn no_module_imports_from_a_layer_above_it() {
        let wrong = layer_violations(&source());
        assert!(
            wrong.is_empty(),
            "imports that run up the layers (see LAYERS in src/architecture.rs and ARCHITECTURE.md):\n{}",
            wrong.join("\n")
        );
    }

    #[test]
    fn no_sibling_modules_import_each_other_in_a_circle() {
        let circles = sibling_circles(&source());
        assert!(
            circles.is_empty(),
            "modules that import each other in a circle:\n{}",
            circles
                .iter()
                .map(|c| c.join(" <-> "))
                .collect::<Vec<_>>()
                .join("\n")
        );
    }

    #[test]
    fn every_top_level_module_has_a_layer() {
        let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
        let missing: Vec<String> = modules(&src)
            .keys()
            .map(|m| m[0].clone())
            .filter(|top| layer_of(top).is_none())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        assert!(missing.is_empty(), "modules without a layer: {missing:?}");
    }

    // The checker itself, on small made-up trees, so that it cannot pass by
    // finding nothing.

    fn tree(files: &[(&str, &str)]) -> BTreeMap<Module, String> {
        files
            .iter()
            .map(|(path, text)| {
                let module = path.split('/').map(str::to_string).collect();
                (module, strip_tests(&strip_comments(text)))
            })
            .collect()
    }

    #[test]
    fn an_upward_import_is_found_in_every_spelling() {
        for text in [
            "use crate::agent::Mode;",
            "use crate::{llm::Model, agent::{Mode, QueueMode}};",
            "fn f() -> crate::agent::Mode { crate::agent::Mode::Default }",
            "use super::super::agent::Mode;",
        ] {
            let modules = tree(&[("config/project", text), ("config", ""), ("agent", "")]);
            let wrong = layer_violations(&imports(&modules));
            assert_eq!(
                wrong,
                vec!["config::project -> agent".to_string()],
                "{text}"
            );
        }
    }

    #[test]
    fn test_code_and_comments_do_not_count() {
        let text = "// use crate::agent::Mode;\n/* crate::agent */\n\
                    #[cfg(test)]\nmod tests {\n    use crate::agent::Mode;\n    fn f() { {} }\n}\n\
                    pub fn after() {}\n";
        let modules = tree(&[("config", text), ("agent", "")]);
        assert!(layer_violations(&imports(&modules)).is_empty());
        assert!(modules[&vec!["config".to_string()]].contains("pub fn after"));
    }

    #[test]
    fn a_circle_of_siblings_is_found_but_a_child_using_its_parent_is_not() {
        let modules = tree(&[
            ("gateway", "use self::hub::Hub;"),
            (
                "gateway/hub",
                "use super::scheduler::Plan; use super::Options;",
            ),
            ("gateway/scheduler", "use crate::gateway::hub::Hub;"),
            ("gateway/methods", "use super::hub::Hub;"),
        ]);
        assert_eq!(
            sibling_circles(&imports(&modules)),
            vec![vec![
                "gateway::hub".to_string(),
                "gateway::scheduler".to_string()
            ]]
        );
    }

    #[test]
    fn a_test_module_in_a_file_of_its_own_is_test_code() {
        let text = "#[cfg(test)]\n#[path = \"conversation/tests.rs\"]\nmod tests;\n";
        assert_eq!(test_module_declarations(text), vec!["tests".to_string()]);
        let inline = "pub fn a() {}\n#[cfg(test)]\n#[allow(dead_code)]\nmod tests {\n    use crate::agent::Mode;\n}\n";
        assert!(!strip_tests(inline).contains("crate::agent"));
    }

    #[test]
    fn a_peer_on_the_same_line_may_not_be_imported() {
        let modules = tree(&[("tools", "use crate::auth::Store;"), ("auth", "")]);
        assert_eq!(
            layer_violations(&imports(&modules)),
            vec!["tools -> auth".to_string()]
        );
    }
}
