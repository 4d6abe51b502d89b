//! JSON Schema: a value checked against a schema (a tool's parameters, a
//! workflow step's structured output), with `boon`, which implements
//! drafts 4, 6 and 7, 2019-09 and 2020-12 (the latest when a schema names
//! none). The schemas come from MCP servers, model-facing tool lists and
//! workflow files, so compiling one never loads anything: a `$ref` can
//! point only inside the schema itself (boon's default would read
//! `file://` URLs).
//!
//! Checking a schema against its draft's meta-schema is what makes boon
//! compile all five meta-schemas, once per process: 2.2 MB of heap that
//! stays. A schema from outside pays it ([`Schema::compile`]); pincer's own
//! (its tools' parameters, its built-in workflows', each checked by a
//! test) and one already checked when its workflow file loaded do not
//! ([`Schema::known_valid`]), so a session that uses no MCP tool and no
//! workflow file of its own never holds them.

use serde_json::Value;

/// Where a schema that names no `$id` lives, for its `$ref`s.
const ROOT: &str = "urn:pincer:schema";

/// Where a schema known to be valid lives. boon checks every schema
/// against its meta-schema except those on json-schema.org, the home of
/// the meta-schemas it ships (`Roots::create_root` in boon 0.6); nothing is
/// ever loaded from there (the compiler is given the schema itself).
const KNOWN_VALID_ROOT: &str = "https://json-schema.org/pincer/known-valid";

/// A compiled schema.
pub struct Schema {
    schemas: boon::Schemas,
    index: boon::SchemaIndex,
}

/// Refuses every document a schema refers to outside itself.
struct NoLoading;

impl boon::UrlLoader for NoLoading {
    fn load(&self, url: &str) -> Result<Value, Box<dyn std::error::Error>> {
        Err(format!("{url} is outside the schema; pincer loads no other document").into())
    }
}

impl Schema {
    /// Compiles `schema`; `Err` says what is wrong with it (checked
    /// against its draft's meta-schema) on one line.
    pub fn compile(schema: &Value) -> Result<Self, String> {
        Self::compile_at(ROOT, schema)
    }

    /// Compiles `schema` without checking it against its meta-schema: for
    /// a schema that was checked already (pincer's own, by tests; a
    /// workflow file's, when it loaded): boon takes an invalid one for a
    /// bug of its own (an error in release builds, a panic in debug ones).
    pub fn known_valid(schema: &Value) -> Result<Self, String> {
        Self::compile_at(KNOWN_VALID_ROOT, schema)
    }

    fn compile_at(root: &str, schema: &Value) -> Result<Self, String> {
        let mut compiler = boon::Compiler::new();
        compiler.use_loader(Box::new(NoLoading));
        let mut schemas = boon::Schemas::new();
        let compiled = match compiler.add_resource(root, schema.clone()) {
            Ok(()) => compiler.compile(root, &mut schemas),
            Err(error) => Err(error),
        };
        compiled
            .map(|index| Self { schemas, index })
            .map_err(|error| match &error {
                boon::CompileError::ValidationError { src, .. } => {
                    bounded(problems(src, schema)).join("; ")
                }
                boon::CompileError::LoadUrlError { url, .. } => {
                    format!("{url} is outside the schema, and pincer loads no other document")
                }
                other => other.to_string(),
            })
    }

    /// What is wrong with `value`: one line per problem, each naming
    /// where it is (a JSON pointer) unless it is the value as a whole.
    /// Empty when it is valid.
    pub fn problems(&self, value: &Value) -> Vec<String> {
        match self.schemas.validate(value, self.index) {
            Ok(()) => Vec::new(),
            Err(error) => bounded(problems(&error, value)),
        }
    }
}

/// Problems listed at most: a model's arguments can hold thousands of
/// wrong items, and the list goes back to it as a tool result.
const MAX_PROBLEMS: usize = 20;

/// `found` cut to [`MAX_PROBLEMS`], the rest counted.
fn bounded(mut found: Vec<String>) -> Vec<String> {
    if found.len() > MAX_PROBLEMS {
        let more = found.len() - MAX_PROBLEMS;
        found.truncate(MAX_PROBLEMS);
        found.push(format!("and {more} more problems"));
    }
    found
}

/// The leaves of a validation error's tree over `value`, each with its
/// place. An `anyOf` or `oneOf` is one problem (its alternatives' own
/// failures would only say why each one did not fit); every other branch
/// is where the problems below it happened.
fn problems(error: &boon::ValidationError, value: &Value) -> Vec<String> {
    use boon::ErrorKind;
    let mut out = Vec::new();
    let mut stack = vec![error];
    while let Some(error) = stack.pop() {
        let branch = matches!(
            error.kind,
            ErrorKind::Group
                | ErrorKind::Schema { .. }
                | ErrorKind::Reference { .. }
                | ErrorKind::AllOf
                | ErrorKind::PropertyName { .. }
        );
        if branch && !error.causes.is_empty() {
            // In reverse, so that the problems come out in the order
            // boon found them.
            stack.extend(error.causes.iter().rev());
            continue;
        }
        let at = error.instance_location.to_string();
        let here = value.pointer(&at).unwrap_or(&Value::Null);
        for problem in described(&error.kind, here) {
            out.push(if at.is_empty() {
                problem
            } else {
                format!("{at}: {problem}")
            });
        }
    }
    out
}

/// A problem as a model or a person reads it best: what the value is and
/// what was wanted (boon's own words for the rarer keywords).
fn described(kind: &boon::ErrorKind, value: &Value) -> Vec<String> {
    use boon::ErrorKind;
    let shown = shown(value);
    let quoted = |names: &mut dyn Iterator<Item = String>| {
        let names: Vec<String> = names.collect();
        match names.split_last() {
            Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
            _ => names.concat(),
        }
    };
    let one = match kind {
        ErrorKind::Type { want, .. } => format!(
            "{shown} is not of type {}",
            quoted(&mut want.iter().map(|t| format!("\"{t}\"")))
        ),
        ErrorKind::Required { want } => {
            return want
                .iter()
                .map(|name| format!("\"{name}\" is a required property"))
                .collect();
        }
        ErrorKind::Enum { want } => format!(
            "{shown} is not one of {}",
            quoted(&mut want.iter().map(self::shown))
        ),
        ErrorKind::Const { want } => format!("{shown} is not {}", self::shown(want)),
        ErrorKind::AnyOf | ErrorKind::OneOf(None) => {
            format!(
                "{shown} fits none of the schemas its `{}` allows",
                keyword(kind)
            )
        }
        ErrorKind::OneOf(Some((i, j))) => {
            format!("{shown} fits more than one of the schemas its `oneOf` allows (#{i} and #{j})")
        }
        ErrorKind::Not => format!("{shown} is what its `not` forbids"),
        other => other.to_string(),
    };
    vec![one]
}

fn keyword(kind: &boon::ErrorKind) -> &'static str {
    match kind {
        boon::ErrorKind::AnyOf => "anyOf",
        _ => "oneOf",
    }
}

/// A value as JSON, cut to a line: an argument can be a whole file.
fn shown(value: &Value) -> String {
    const MAX: usize = 60;
    // Written into a buffer that stops taking bytes past the cut, so a
    // large value is never serialised whole for 60 characters of it.
    struct Capped(Vec<u8>);
    impl std::io::Write for Capped {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            let room = (MAX * 4 + 4).saturating_sub(self.0.len());
            if room == 0 {
                return Err(std::io::ErrorKind::WriteZero.into());
            }
            let taken = bytes.len().min(room);
            self.0.extend_from_slice(&bytes[..taken]);
            Ok(taken)
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut out = Capped(Vec::new());
    let _ = serde_json::to_writer(&mut out, value);
    let text = String::from_utf8_lossy(&out.0);
    match text.char_indices().nth(MAX) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.into_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn problems_of(schema: Value, value: Value) -> Vec<String> {
        Schema::compile(&schema).unwrap().problems(&value)
    }

    #[test]
    fn each_problem_is_named_with_its_place() {
        let schema = json!({
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "content": {},
                "mode": {"enum": ["a", "b"]},
                "items": {"type": "array", "items": {"type": "integer", "minimum": 0}},
            },
            "required": ["path", "content"],
            "additionalProperties": false,
        });
        let found = problems_of(
            schema.clone(),
            json!({"path": 5, "mode": "c", "items": [1, -1], "extra": true}),
        );
        let text = found.join("\n");
        for expected in ["/path: ", "/mode: ", "/items/1: ", "content", "extra"] {
            assert!(text.contains(expected), "{expected} not in:\n{text}");
        }
        assert_eq!(found.len(), 5, "{text}");
        assert!(problems_of(schema, json!({"path": "a", "content": 1})).is_empty());
    }

    #[test]
    fn drafts_refs_and_combinators_are_understood() {
        // draft-07 with `definitions` and a local $ref.
        let draft7 = json!({
            "$schema": "http://json-schema.org/draft-07/schema#",
            "definitions": {"name": {"type": "string", "minLength": 2}},
            "properties": {"who": {"$ref": "#/definitions/name"}},
        });
        assert_eq!(problems_of(draft7.clone(), json!({"who": "x"})).len(), 1);
        assert!(problems_of(draft7, json!({"who": "xy"})).is_empty());
        // 2020-12 (the default) with $defs and anyOf: one problem, at the
        // value the anyOf is about.
        let any = json!({
            "$defs": {"n": {"type": "number"}},
            "properties": {"v": {"anyOf": [{"$ref": "#/$defs/n"}, {"type": "boolean"}]}},
        });
        let found = problems_of(any.clone(), json!({"v": "text"}));
        assert_eq!(found.len(), 1, "{found:?}");
        assert!(found[0].starts_with("/v: "), "{found:?}");
        assert!(problems_of(any, json!({"v": true})).is_empty());
    }

    #[test]
    fn many_problems_and_large_values_are_bounded() {
        let schema = json!({"type": "array", "items": {"type": "integer"}});
        let wrong: Vec<Value> = (0..1000)
            .map(|i| json!(format!("{i}{}", "x".repeat(10_000))))
            .collect();
        let found = problems_of(schema, Value::Array(wrong));
        assert_eq!(found.len(), MAX_PROBLEMS + 1, "{:?}", &found[..3]);
        assert_eq!(found[MAX_PROBLEMS], "and 980 more problems");
        assert!(found[0].starts_with("/0: \"0xxx"), "{}", found[0]);
        assert!(
            found.iter().all(|p| p.chars().count() < 120),
            "{}",
            found[0]
        );
    }

    #[test]
    fn an_invalid_schema_is_refused_saying_why() {
        let error = Schema::compile(&json!({"type": "objekt"})).err().unwrap();
        assert!(error.contains("/type"), "{error}");
        assert!(!error.contains('\n'), "{error}");
        let error = Schema::compile(&json!({"pattern": "("})).err().unwrap();
        assert!(
            error.contains("pattern") || error.contains("regex"),
            "{error}"
        );
    }

    #[test]
    fn a_known_valid_schema_skips_only_the_meta_schema_check() {
        // Not checked against the meta-schema: `compile` refuses this one.
        assert!(Schema::compile(&json!({"type": "objekt"})).is_err());
        assert!(Schema::known_valid(&json!({"type": "objekt"})).is_ok());
        // Otherwise the same checks, drafts and references.
        let draft7 = json!({
            "$schema": "http://json-schema.org/draft-07/schema#",
            "definitions": {"name": {"type": "string", "minLength": 2}},
            "properties": {"who": {"$ref": "#/definitions/name"}},
            "required": ["who"],
        });
        let known = Schema::known_valid(&draft7).unwrap();
        let checked = Schema::compile(&draft7).unwrap();
        for value in [json!({"who": "x"}), json!({}), json!({"who": "xy"})] {
            assert_eq!(known.problems(&value), checked.problems(&value), "{value}");
        }
        assert_eq!(
            known.problems(&json!({})),
            ["\"who\" is a required property"]
        );
    }

    #[test]
    fn a_reference_outside_the_schema_is_never_loaded() {
        let dir = tempfile::tempdir().unwrap();
        let secret = dir.path().join("secret.json");
        std::fs::write(
            &secret,
            r#"{"type": "string", "description": "TOP-SECRET"}"#,
        )
        .unwrap();
        for reference in [
            format!("file://{}", secret.display()),
            "https://example.com/schema.json".to_string(),
        ] {
            for compile in [Schema::compile, Schema::known_valid] {
                let error = compile(&json!({"$ref": reference})).err().unwrap();
                assert!(error.contains("pincer loads no other document"), "{error}");
                assert!(error.contains(&reference), "{error}");
                assert!(!error.contains("TOP-SECRET"), "{error}");
            }
        }
        // Relative to where a known-valid schema lives, either.
        let error = Schema::known_valid(&json!({"$ref": "other.json"}))
            .err()
            .unwrap();
        assert!(error.contains("pincer loads no other document"), "{error}");
    }
}
