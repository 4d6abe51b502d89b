//! Templates (`{{ … }}`) and conditions over a run's inputs and step
//! outputs, with minijinja (Armin Ronacher's Jinja2 engine for Rust): one
//! engine for both, strict about names that do not exist, and able to
//! list the names a template reads, which validation checks against the
//! steps that can have run.
//!
//! A string that is one `{{ expression }}` and nothing else keeps the
//! expression's type (a number stays a number in a tool's parameters);
//! anything else renders to a string.
//!
//! Besides minijinja's own filters there is `shell_quote`, for a value
//! that goes into a `bash` step's command as one word, whatever it holds:
//! `git diff {{ inputs.base | shell_quote }}`.

use std::collections::BTreeSet;

use minijinja::{Environment, UndefinedBehavior};
use serde_json::Value;

pub use crate::tools::shell::quote as shell_quote;

fn environment() -> Environment<'static> {
    let mut env = Environment::new();
    env.set_undefined_behavior(UndefinedBehavior::Strict);
    // Templates fill tool parameters and prompts, not HTML.
    env.set_auto_escape_callback(|_| minijinja::AutoEscape::None);
    env.add_filter("shell_quote", |value: minijinja::Value| -> String {
        let text = match value.as_str() {
            Some(text) => text.to_string(),
            None => value.to_string(),
        };
        shell_quote(&text)
    });
    env
}

/// The names `source` reads (`inputs.file`, `steps.read.output.issues`);
/// `expression`: it is a condition rather than a template.
pub fn references(source: &str, expression: bool) -> Result<BTreeSet<String>, String> {
    let env = environment();
    let names = if expression {
        env.compile_expression(source)
            .map_err(|e| format!("the condition `{source}` does not parse: {e}"))?
            .undeclared_variables(true)
    } else {
        env.template_from_str(source)
            .map_err(|e| format!("the template `{source}` does not parse: {e}"))?
            .undeclared_variables(true)
    };
    Ok(names.into_iter().collect())
}

/// The expressions of `source` that print a value `tainted` (a name it
/// reads, `steps.plan.output`) without `shell_quote` as their last filter,
/// as written between the braces. A name a `{% for %}` or `{% set %}`
/// binds from a tainted value is tainted too (`{% for f in
/// steps.plan.output.files %}{{ f }}{% endfor %}`). A source that does not
/// parse reads nothing here (validation reports it).
pub fn unquoted_prints(source: &str, tainted: &dyn Fn(&str) -> bool) -> Vec<String> {
    fn reads(expr: &str, tainted: &dyn Fn(&str) -> bool, bound: &BTreeSet<String>) -> bool {
        references(&format!("{{{{ {expr} }}}}"), false).is_ok_and(|names| {
            names.iter().any(|name| {
                tainted(name) || bound.contains(name.split('.').next().unwrap_or_default())
            })
        })
    }
    let mut bound: BTreeSet<String> = BTreeSet::new();
    let mut found = Vec::new();
    let mut at = 0;
    while let Some(offset) = source[at..].find('{') {
        let open = at + offset;
        let close = match source[open + 1..].chars().next() {
            Some('{') => "}}",
            Some('%') => "%}",
            Some('#') => "#}",
            _ => {
                at = open + 1;
                continue;
            }
        };
        let start = open + 2;
        let Some(length) = source[start..].find(close) else {
            break;
        };
        let printing = close == "}}";
        let body = source[start..start + length]
            .trim_matches(|c: char| c == '-' || c == '+' || c.is_whitespace());
        at = start + length + close.len();
        if printing {
            let quoted = body
                .rsplit('|')
                .next()
                .is_some_and(|last| last.trim().split('(').next() == Some("shell_quote"));
            if !quoted && reads(body, tainted, &bound) {
                found.push(body.to_string());
            }
        } else if close == "%}" {
            let binding = if let Some(rest) = body.strip_prefix("for ") {
                rest.split_once(" in ")
                    .map(|(names, expr)| (names.split(',').collect::<Vec<_>>(), expr))
            } else if let Some(rest) = body.strip_prefix("set ") {
                rest.split_once('=').map(|(name, expr)| (vec![name], expr))
            } else {
                None
            };
            if let Some((names, expr)) = binding
                && reads(expr, tainted, &bound)
            {
                bound.extend(names.into_iter().map(|n| n.trim().to_string()));
            }
        }
    }
    found
}

/// The expression of a string that is a single `{{ … }}`.
fn sole_expression(source: &str) -> Option<&str> {
    let inner = source.trim().strip_prefix("{{")?.strip_suffix("}}")?;
    (!inner.contains("{{") && !inner.contains("}}")).then_some(inner.trim())
}

/// Renders `source` with `context` (`{"inputs": …, "steps": …}`).
pub fn render(source: &str, context: &Value) -> Result<Value, String> {
    let env = environment();
    let ctx = minijinja::Value::from_serialize(context);
    if let Some(expr) = sole_expression(source) {
        let value = env
            .compile_expression(expr)
            .and_then(|e| e.eval(ctx))
            .map_err(|e| format!("`{source}`: {e}"))?;
        return serde_json::to_value(&value).map_err(|e| format!("`{source}`: {e}"));
    }
    env.render_str(source, ctx)
        .map(Value::String)
        .map_err(|e| format!("`{source}`: {e}"))
}

/// Every string of `value` rendered.
pub fn render_value(value: &Value, context: &Value) -> Result<Value, String> {
    Ok(match value {
        Value::String(text) => render(text, context)?,
        Value::Array(items) => Value::Array(
            items
                .iter()
                .map(|v| render_value(v, context))
                .collect::<Result<_, _>>()?,
        ),
        Value::Object(map) => Value::Object(
            map.iter()
                .map(|(k, v)| Ok((k.clone(), render_value(v, context)?)))
                .collect::<Result<_, String>>()?,
        ),
        other => other.clone(),
    })
}

/// Whether the condition `expr` holds.
pub fn holds(expr: &str, context: &Value) -> Result<bool, String> {
    let env = environment();
    env.compile_expression(expr)
        .and_then(|e| e.eval(minijinja::Value::from_serialize(context)))
        .map(|v| v.is_true())
        .map_err(|e| format!("the condition `{expr}`: {e}"))
}
