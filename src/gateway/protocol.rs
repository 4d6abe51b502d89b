//! OpenClaw's gateway protocol as types: the params pincer takes and the
//! records it answers with, serialised exactly as OpenClaw's clients read
//! them (the shapes are those of `packages/gateway-protocol` in the
//! `openclaw` npm package, version 2026.9.6). Params are closed: a field
//! a type does not name is refused by serde, naming it.

pub mod approvals;
pub mod chat;
pub mod cron;
pub mod models;
pub mod sessions;
pub mod system;
pub mod usage;

use serde::de::DeserializeOwned;

/// A method that takes no params (`agents.list`, `cron.status`, …).
#[derive(Clone, Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NoParams {}

/// A method's params as its type, or the sentence refusing them: a field
/// the type does not name is "not supported by pincer", as for every
/// method.
pub fn params<T: DeserializeOwned>(method: &str, params: serde_json::Value) -> Result<T, String> {
    serde_json::from_value(params).map_err(|e| {
        let text = e.to_string();
        match text.strip_prefix("unknown field `") {
            Some(rest) => {
                let (field, takes) = rest.split_once('`').unwrap_or((rest, ""));
                let takes = takes
                    .trim_start_matches(", expected one of ")
                    .trim_start_matches(", expected ");
                let takes = if takes.contains("there are no fields") {
                    "no params".to_string()
                } else {
                    takes.to_string()
                };
                format!("{method}: `{field}` is not supported by pincer (it takes {takes})")
            }
            None => format!("{method}: {text}"),
        }
    })
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
        assert!(error.starts_with("cron.list: invalid type"), "{error}");
    }

    use super::cron;
}
