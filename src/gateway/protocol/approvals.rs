//! The params of OpenClaw's approval and question methods:
//! `exec.approval.get`, `exec.approval.resolve` and `question.list`.

use serde::Deserialize;

/// `exec.approval.get`: one pending approval, by id.
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GetParams {
    pub id: String,
}

/// `exec.approval.resolve`: `decision` is `allow-once`, `allow-always`
/// or `deny` (the hub checks it against the approval's options).
#[derive(Clone, Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResolveParams {
    pub id: String,
    pub decision: String,
}

/// `question.list`: pincer asks no questions but approvals, so the list
/// is empty whatever `status` it is filtered by.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct QuestionListParams {
    pub status: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::protocol::{NoParams, params};
    use serde_json::json;

    #[test]
    fn the_approval_params_take_openclaw_s_fields_and_refuse_others() {
        let resolve: ResolveParams = params(
            "exec.approval.resolve",
            json!({"id": "a1", "decision": "allow-once"}),
        )
        .unwrap();
        assert_eq!(
            (resolve.id.as_str(), resolve.decision.as_str()),
            ("a1", "allow-once")
        );
        let missing =
            params::<ResolveParams>("exec.approval.resolve", json!({"id": "a1"})).unwrap_err();
        assert_eq!(missing, "exec.approval.resolve: `decision` is required");
        let extra =
            params::<GetParams>("exec.approval.get", json!({"id": "a1", "x": 1})).unwrap_err();
        assert_eq!(
            extra,
            "exec.approval.get: `x` is not supported by pincer (it takes `id`)"
        );
        let none = params::<NoParams>("agents.list", json!({"agentId": "main"})).unwrap_err();
        assert_eq!(
            none,
            "agents.list: `agentId` is not supported by pincer (it takes no params)"
        );
        params::<NoParams>("agents.list", json!({})).unwrap();
        params::<QuestionListParams>("question.list", json!({"status": "pending"})).unwrap();
    }
}
