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

/// `text` as one word of a POSIX shell command: as it is when it holds
/// only characters no shell treats specially, else in single quotes.
pub fn shell_quote(text: &str) -> String {
    let plain = !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-./:@%+=,".contains(c));
    if plain {
        text.to_string()
    } else {
        format!("'{}'", text.replace('\'', "'\\''"))
    }
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
