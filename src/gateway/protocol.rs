//! OpenClaw's gateway protocol as types: the params pincer takes and the
//! records it answers with, serialised exactly as OpenClaw's clients read
//! them (the shapes are those of `packages/gateway-protocol` in the
//! `openclaw` npm package, version 2026.9.6). Params are closed: a field
//! a type does not name is refused by serde, naming it.

pub mod approvals;
pub mod chat;
pub mod chat_page;
pub mod cron;
pub mod events;
pub mod hello;
pub mod models;
pub mod pages;
pub mod sessions;
pub mod system;
pub mod usage;

use serde::de::DeserializeOwned;

/// A method that takes no params (`agents.list`, `cron.status`, …).
#[derive(Clone, Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NoParams {}

/// A method's params as its type, or the sentence refusing them, naming
/// the field: one the type does not name is "not supported by pincer",
/// as for every method; a missing one is required; one of the wrong type
/// says what it must be.
pub fn params<T: DeserializeOwned>(method: &str, params: serde_json::Value) -> Result<T, String> {
    serde_path_to_error::deserialize(params).map_err(|e| {
        let path = e.path().to_string();
        let text = e.inner().to_string();
        // The path names the field that failed, or the object an unknown
        // or missing field is in (`.` at the top).
        let inner = |name: &str| match path.as_str() {
            "." | "" => name.to_string(),
            outer => format!("{outer}.{name}"),
        };
        if let Some(rest) = text.strip_prefix("unknown field `") {
            let (field, takes) = rest.split_once('`').unwrap_or((rest, ""));
            let takes = takes
                .trim_start_matches(", expected one of ")
                .trim_start_matches(", expected ");
            let takes = if takes.contains("there are no fields") {
                "no params".to_string()
            } else {
                takes.to_string()
            };
            // Here the path ends with the unknown field itself.
            let field = match path.as_str() {
                "." | "" => field.to_string(),
                path => path.to_string(),
            };
            return format!("{method}: `{field}` is not supported by pincer (it takes {takes})");
        }
        if let Some(rest) = text.strip_prefix("missing field `") {
            let field = rest.split('`').next().unwrap_or(rest);
            return format!("{method}: `{}` is required", inner(field));
        }
        if let Some((found, expected)) = text
            .strip_prefix("invalid type: ")
            .or_else(|| text.strip_prefix("invalid value: "))
            .and_then(|rest| rest.rsplit_once(", expected "))
            && path != "."
        {
            return format!(
                "{method}: `{path}` must be {}, not {found}",
                plainly(expected)
            );
        }
        match path.as_str() {
            "." | "" => format!("{method}: {text}"),
            _ => format!("{method}: `{path}`: {text}"),
        }
    })
}

/// serde's name of a type as a client's author reads it.
fn plainly(expected: &str) -> &str {
    match expected {
        "u8" | "u16" | "u32" | "u64" | "usize" => "a non-negative integer",
        "i8" | "i16" | "i32" | "i64" | "isize" => "an integer",
        "f32" | "f64" => "a number",
        "a sequence" => "an array",
        "a map" => "an object",
        other if other.starts_with("struct ") => "an object",
        other => other,
    }
}

/// `status`'s params (OpenClaw's status summary).
#[derive(Clone, Debug, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct StatusParams {
    /// pincer's summary has no channel part to leave out.
    pub include_channel_summary: Option<bool>,
    pub include_cli_projection: Option<bool>,
}

#[cfg(test)]
mod tests {
    #[test]
    fn an_unknown_field_is_refused_by_name_with_the_fields_taken() {
        let error = super::params::<cron::JobParams>(
            "cron.get",
            serde_json::json!({"id": "x", "nope": true}),
        )
        .unwrap_err();
        assert_eq!(
            error,
            "cron.get: `nope` is not supported by pincer (it takes `id`)"
        );
        let error =
            super::params::<cron::ListParams>("cron.list", serde_json::json!({"limit": "ten"}))
                .unwrap_err();
        assert_eq!(
            error,
            "cron.list: `limit` must be a non-negative integer, not string \"ten\""
        );
    }

    #[test]
    fn a_missing_or_mistyped_field_is_named_also_inside_a_list() {
        use serde_json::json;
        let error = super::params::<chat::SendParams>(
            "chat.send",
            json!({"sessionKey": "k", "idempotencyKey": "r"}),
        )
        .unwrap_err();
        assert_eq!(error, "chat.send: `message` is required");
        let error = super::params::<chat::SendParams>(
            "chat.send",
            json!({"sessionKey": "k", "message": "hi", "idempotencyKey": "r", "deliver": "yes"}),
        )
        .unwrap_err();
        assert_eq!(
            error,
            "chat.send: `deliver` must be a boolean, not string \"yes\""
        );
        let error = super::params::<chat::SendParams>(
            "chat.send",
            json!({"sessionKey": "k", "message": "hi", "idempotencyKey": "r", "attachments": [{"mimeType": 5}]}),
        )
        .unwrap_err();
        assert_eq!(
            error,
            "chat.send: `attachments[0].mimeType` must be a string, not integer `5`"
        );
    }

    use super::{chat, cron};
}
