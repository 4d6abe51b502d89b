//! A session's row as OpenClaw's clients list it ([`Row`]), and the
//! params of OpenClaw's methods that change one session:
//! `sessions.patch`, `sessions.describe`, `sessions.reset`, `sessions.delete`,
//! `sessions.compact`, `sessions.rewind` and `sessions.fork` (their shapes
//! are the `openclaw` package's `SessionsPatchParamsSchema`,
//! `SessionsDescribeParamsSchema`,
//! `SessionsResetParamsSchema`, `SessionsDeleteParamsSchema` and
//! `SessionsCompactParamsSchema`; rewind and fork are pincer's own, in the
//! same style).

use serde::{Deserialize, Deserializer, Serialize};

/// One session as `sessions.list`, `sessions.describe`, `chat.startup`
/// and `sessions.changed` show it (OpenClaw's `SessionRow`, which its
/// clients read more of than pincer fills: the fields here are the ones
/// pincer has).
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Row {
    pub key: String,
    pub session_id: String,
    /// Every pincer session is a direct conversation.
    pub kind: &'static str,
    /// When its transcript last changed, in milliseconds.
    pub updated_at: u64,
    /// The user's name for it.
    pub label: Option<String>,
    /// Its title (the user's name, the model's, else its first prompt's
    /// first line), as both of OpenClaw's title fields.
    pub derived_title: String,
    pub display_name: String,
    /// The directory it works in.
    pub spawned_cwd: std::path::PathBuf,
    /// Its model's id and provider (the model it last ran on, else the
    /// default).
    pub model: Option<String>,
    pub model_provider: Option<String>,
    pub thinking_level: String,
    pub thinking_levels: Vec<ThinkingOption>,
    /// pincer's mode id, which pincer's page and bridges read.
    pub mode: &'static str,
    /// OpenClaw's name for the mode, which its Control UI shows and picks
    /// from: `null` for the mode new sessions start in (OpenClaw's
    /// "default") and for ask-first, which OpenClaw has no name for (shown
    /// as the default then: the session is stricter than shown, never
    /// laxer).
    pub permission_mode: Option<&'static str>,
    pub queue_mode: Option<&'static str>,
    /// How much of tool calls OpenClaw's clients show (`off`, `on`,
    /// `full`).
    pub verbose_level: String,
    pub archived: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub archived_at: Option<u64>,
    /// A helper's: who started it and how it is doing.
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub helper: Option<Helper>,
    /// The tokens in its context now (OpenClaw's `totalTokens`), when a
    /// run has reported them.
    pub total_tokens: Option<u64>,
    pub total_tokens_fresh: bool,
    /// The model's context window (OpenClaw's `contextTokens`).
    pub context_tokens: Option<u64>,
    /// What it has cost so far.
    pub cost_usd: f64,
    /// Its last message, on one line (asked for with
    /// `includeLastMessage`; `null` when it has none).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub last_message_preview: Option<Option<String>>,
    /// Asked for with `includeActivitySummary`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub activity_summary: Option<ActivitySummary>,
}

/// A thinking level a session's model takes.
#[derive(Clone, Debug, Serialize)]
pub struct ThinkingOption {
    pub id: &'static str,
    pub label: &'static str,
}

/// The row fields of a helper's session (a `task` call's), as OpenClaw's
/// rows of spawned sessions name their parent.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Helper {
    pub parent_session_key: String,
    pub spawned_by: String,
    pub parent_tool_call_id: Option<String>,
    /// Its agent definition.
    pub subagent: Option<String>,
    /// `running`, `done`, `failed`, `stopped`, or `interrupted` (it ran in
    /// a pincer that was killed).
    pub helper_state: &'static str,
    pub interrupted: bool,
}

/// A session's activity summary: pincer writes none, so it is
/// "unavailable", as OpenClaw's is without a summary model.
#[derive(Clone, Debug, Serialize)]
pub struct ActivitySummary {
    pub state: &'static str,
}

impl ActivitySummary {
    pub const UNAVAILABLE: Self = Self {
        state: "unavailable",
    };
}

/// `sessions.patch`: the settings pincer acts on. Any other of OpenClaw's
/// (`fastMode`, `elevatedLevel`, …) is refused, never answered "ok" and
/// left undone. `permissionMode: null` is OpenClaw's "default" (the mode
/// new sessions start in), so it differs from leaving the field out.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PatchParams {
    pub key: String,
    pub agent_id: Option<String>,
    /// The session the client means: a key that names another one by now
    /// is not changed.
    pub expected_session_id: Option<String>,
    pub label: Option<String>,
    /// `null` is the default model (what the Control UI's picker sends
    /// for its "default" option).
    #[serde(default, deserialize_with = "given")]
    pub model: Option<Option<String>>,
    pub thinking_level: Option<String>,
    /// OpenClaw's choice of the harness a model runs in; `null` (its
    /// default, which the Control UI sends with a model) is pincer's own
    /// loop, and naming one is refused.
    #[serde(default, deserialize_with = "given")]
    pub agent_runtime: Option<Option<String>>,
    #[serde(default, deserialize_with = "given")]
    pub permission_mode: Option<Option<String>>,
    pub queue_mode: Option<String>,
    pub verbose_level: Option<String>,
    pub archived: Option<bool>,
}

/// A field that is there, as `null` or as a value (a missing one stays
/// `None` through `#[serde(default)]`).
fn given<'de, D: Deserializer<'de>, T: Deserialize<'de>>(
    deserializer: D,
) -> Result<Option<Option<T>>, D::Error> {
    Option::<T>::deserialize(deserializer).map(Some)
}

/// `sessions.describe`: a session's row, which always has its derived
/// title (`includeDerivedTitles` asks for what pincer does anyway).
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DescribeParams {
    pub key: String,
    pub agent_id: Option<String>,
    pub include_derived_titles: Option<bool>,
    pub include_last_message: Option<bool>,
}

/// `sessions.reset`: the key gets a fresh session.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResetParams {
    pub key: String,
    pub agent_id: Option<String>,
    pub reason: Option<ResetReason>,
    pub expected_session_id: Option<String>,
}

/// Why a session is reset (`/new` or `/reset` in OpenClaw's clients):
/// both give the key a fresh session.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ResetReason {
    New,
    Reset,
}

/// `sessions.delete`: only `deleteTranscript: true` (or none) is taken.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct DeleteParams {
    pub key: String,
    pub agent_id: Option<String>,
    pub delete_transcript: Option<bool>,
    pub expected_session_id: Option<String>,
    pub archived_only: Option<bool>,
}

/// `sessions.compact`: `maxLines` is named so that it is refused with why.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CompactParams {
    pub key: String,
    pub agent_id: Option<String>,
    pub instructions: Option<String>,
    pub max_lines: Option<serde_json::Value>,
}

/// `sessions.rewind`: back to before a turn, by its number (from 1) or
/// by the id of the user message that started it.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RewindParams {
    pub key: String,
    pub agent_id: Option<String>,
    pub turn: Option<u64>,
    pub message_id: Option<String>,
}

/// `sessions.fork`: a new session with the history before a turn (as
/// for a rewind), or the whole of it; `newKey` names it.
#[derive(Clone, Debug, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ForkParams {
    pub key: String,
    pub agent_id: Option<String>,
    pub turn: Option<u64>,
    pub message_id: Option<String>,
    pub new_key: Option<String>,
}

/// `sessions.create`: a session for `key` (a new `web:<uuid>` key
/// without one), with its label. `parentSessionKey`, `succeedsParent`
/// and `emitCommandHooks` (what OpenClaw's TUI sends for `/new`) name the
/// session the new one follows: pincer starts the new one empty, runs its
/// `session_start` hooks as for every new session, and leaves the parent
/// as it is, open and listed.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct CreateParams {
    pub key: Option<String>,
    pub agent_id: Option<String>,
    pub label: Option<String>,
    pub parent_session_key: Option<String>,
    pub succeeds_parent: Option<bool>,
    pub emit_command_hooks: Option<bool>,
}

/// `sessions.list`. Every row has its title (`includeDerivedTitles`),
/// pincer has no global or unknown sessions to include, and all its
/// sessions are its one configured agent's (`configuredAgentsOnly`):
/// those flags ask for what it does anyway. The rest are OpenClaw's
/// filters and facets that have a meaning in pincer (its Control UI's
/// activity and dashboards pages send them).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ListParams {
    pub limit: Option<u64>,
    pub offset: Option<u64>,
    pub search: Option<String>,
    /// `true`/`false`, or "all", "only" or "exclude" (the handler reads it).
    pub archived: Option<serde_json::Value>,
    pub agent_id: Option<String>,
    pub active_minutes: Option<u64>,
    pub include_last_message: Option<bool>,
    pub include_derived_titles: Option<bool>,
    pub include_global: Option<bool>,
    pub include_unknown: Option<bool>,
    pub configured_agents_only: Option<bool>,
    pub owner_first: Option<bool>,
    pub spawned_by: Option<String>,
    /// Leave out the sessions of helpers (`task` calls).
    pub exclude_subagents: Option<bool>,
    /// Only sessions with a run going or waiting.
    pub active_only: Option<bool>,
    pub sort_by: Option<SortBy>,
    /// Each row with its `activitySummary` (pincer writes none, so its
    /// state is "unavailable", as OpenClaw's is without a summary model).
    pub include_activity_summary: Option<bool>,
    /// The people the listed sessions involve: pincer has no people's
    /// profiles, so none.
    pub include_people: Option<bool>,
    /// Only sessions with (`true`) or without a saved dashboard board:
    /// pincer has no boards.
    pub has_board: Option<bool>,
}

/// The order of `sessions.list`: pincer's sessions are listed by when
/// their transcript last changed, which is also their last interaction
/// and their last activity, so the three orders are one.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum SortBy {
    UpdatedAt,
    LastInteractionAt,
    Activity,
}

/// `sessions.resolve`: a session by key, id, label, the Control UI's
/// reference, or a short id (a prefix of the session's id).
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ResolveParams {
    pub key: Option<String>,
    pub session_id: Option<String>,
    pub label: Option<String>,
    pub reference: Option<Reference>,
    pub short_id: Option<String>,
    pub slug_hint: Option<String>,
    pub agent_id: Option<String>,
    pub allow_missing: Option<bool>,
    pub include_global: Option<bool>,
    pub include_unknown: Option<bool>,
}

/// The Control UI's name for a session: its key, and the slug its
/// address shows the key as.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Reference {
    pub key: Option<String>,
    pub slug: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gateway::protocol::params;
    use serde_json::json;

    #[test]
    fn a_patch_tells_a_permission_mode_of_null_from_none() {
        let patch = |body| params::<PatchParams>("sessions.patch", body).unwrap();
        assert_eq!(patch(json!({"key": "k"})).permission_mode, None);
        assert_eq!(
            patch(json!({"key": "k", "permissionMode": null})).permission_mode,
            Some(None)
        );
        assert_eq!(
            patch(json!({"key": "k", "permissionMode": "guarded"})).permission_mode,
            Some(Some("guarded".to_string()))
        );
        let fast = params::<PatchParams>("sessions.patch", json!({"key": "k", "fastMode": true}))
            .unwrap_err();
        assert!(
            fast.starts_with("sessions.patch: `fastMode` is not supported by pincer"),
            "{fast}"
        );
    }

    #[test]
    fn the_session_params_take_openclaw_s_fields_and_refuse_others() {
        let reset: ResetParams =
            params("sessions.reset", json!({"key": "k", "reason": "new"})).unwrap();
        assert_eq!(reset.reason, Some(ResetReason::New));
        let wrong = params::<ResetParams>("sessions.reset", json!({"key": "k", "reason": "why"}))
            .unwrap_err();
        assert!(wrong.contains("unknown variant `why`"), "{wrong}");
        let extra = params::<DeleteParams>("sessions.delete", json!({"key": "k", "force": true}))
            .unwrap_err();
        assert!(
            extra.starts_with("sessions.delete: `force` is not supported by pincer"),
            "{extra}"
        );
        let flag = params::<DescribeParams>(
            "sessions.describe",
            json!({"key": "k", "includeLastMessage": 1}),
        )
        .unwrap_err();
        assert_eq!(
            flag,
            "sessions.describe: `includeLastMessage` must be a boolean, not integer `1`"
        );
        let fork: ForkParams = params(
            "sessions.fork",
            json!({"key": "k", "turn": 2, "newKey": "n"}),
        )
        .unwrap();
        assert_eq!(fork.turn, Some(2));
        assert_eq!(fork.new_key.as_deref(), Some("n"));
        let rewind = params::<RewindParams>("sessions.rewind", json!({"key": "k", "newKey": "n"}))
            .unwrap_err();
        assert!(
            rewind.contains("`newKey` is not supported by pincer"),
            "{rewind}"
        );
        let create: CreateParams = params(
            "sessions.create",
            json!({"label": "Plans", "parentSessionKey": "k", "succeedsParent": true}),
        )
        .unwrap();
        assert_eq!(create.label.as_deref(), Some("Plans"));
        let hooks =
            params::<CreateParams>("sessions.create", json!({"emitCommandHooks": 1})).unwrap_err();
        assert_eq!(
            hooks,
            "sessions.create: `emitCommandHooks` must be a boolean, not integer `1`"
        );
        let list: ListParams = params(
            "sessions.list",
            json!({"limit": 5, "archived": "all", "includeGlobal": true, "spawnedBy": "k"}),
        )
        .unwrap();
        assert_eq!(list.archived, Some(json!("all")));
        let offset = params::<ListParams>("sessions.list", json!({"offset": "2"})).unwrap_err();
        assert_eq!(
            offset,
            "sessions.list: `offset` must be a non-negative integer, not string \"2\""
        );
        let resolve: ResolveParams = params(
            "sessions.resolve",
            json!({"reference": {"key": "k", "slug": "s"}, "allowMissing": true}),
        )
        .unwrap();
        assert_eq!(resolve.reference.unwrap().key.as_deref(), Some("k"));
        let reference = params::<ResolveParams>(
            "sessions.resolve",
            json!({"reference": {"key": "k", "path": "/x"}}),
        )
        .unwrap_err();
        assert!(
            reference.contains("`reference.path` is not supported by pincer"),
            "{reference}"
        );
    }
}

/// The defaults `sessions.list` and `chat.startup` give with their rows,
/// as OpenClaw's do: the model a new session gets, its thinking levels,
/// and that the model is chosen per session.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RowDefaults {
    pub model_provider: Option<String>,
    pub model: Option<String>,
    pub context_tokens: Option<u64>,
    pub thinking_levels: Vec<ThinkingOption>,
    pub thinking_default: String,
    pub model_selection_target: &'static str,
}

/// `sessions.list`'s answer: a page of rows, and whether there are more.
/// pincer knows no people, so `people` (asked for with `includePeople`)
/// is empty and complete.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Listed {
    pub defaults: RowDefaults,
    pub sessions: Vec<ListedRow>,
    pub has_more: bool,
    pub count: usize,
    pub ts: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub next_offset: Option<usize>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub people: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub people_incomplete: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub people_session_count: Option<usize>,
}

/// A row of `sessions.list`: one of this gateway's sessions, or, in a
/// team gateway, one another replica listed (its row as it wrote it).
#[derive(Clone, Debug, Serialize)]
#[serde(untagged)]
pub enum ListedRow {
    Here(Box<Row>),
    Elsewhere(serde_json::Value),
}

impl ListedRow {
    /// Its key and when its transcript last changed (ms), to merge by.
    pub fn key_and_time(&self) -> (String, u64) {
        match self {
            ListedRow::Here(row) => (row.key.clone(), row.updated_at),
            ListedRow::Elsewhere(row) => (
                row["key"].as_str().unwrap_or_default().to_string(),
                row["updatedAt"].as_u64().unwrap_or(0),
            ),
        }
    }
}

/// `sessions.resolve`'s answer: the session found, or `{ok: false}` for
/// none with `allowMissing`.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Resolved {
    pub ok: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_id: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
}

/// `sessions.describe`'s answer: the row (none for a key with no session).
#[derive(Clone, Debug, Serialize)]
pub struct Described {
    pub key: String,
    pub session: Option<Row>,
}

/// The answer of `sessions.reset`, `sessions.patch` and `sessions.create`:
/// the key's session, and (for a patch or a creation) its row.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Changed {
    pub ok: bool,
    pub key: String,
    pub session_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub entry: Option<Option<Row>>,
}

/// `sessions.delete`'s answer: whether there was a session to delete.
#[derive(Clone, Debug, Serialize)]
pub struct Deleted {
    pub ok: bool,
    pub key: String,
    pub deleted: bool,
}

/// `sessions.compact`'s answer: `compacted` with the tokens the history
/// had before, or why not (`ok: false` when the compaction failed).
#[derive(Clone, Debug, Serialize)]
pub struct Compacted {
    pub ok: bool,
    pub key: String,
    pub compacted: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<CompactResult>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CompactResult {
    pub tokens_before: u64,
}

/// `sessions.rewind`'s answer: the turn the session went back to before.
#[derive(Clone, Debug, Serialize)]
pub struct Rewound {
    pub ok: bool,
    pub key: String,
    pub turn: usize,
}

/// `sessions.fork`'s answer: the new session and the one it came from.
#[derive(Clone, Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Forked {
    pub ok: bool,
    pub key: String,
    pub session_id: String,
    pub parent_key: String,
}

/// `sessions.subscribe` and `sessions.unsubscribe`: whether the client now
/// hears `sessions.changed`.
#[derive(Clone, Debug, Serialize)]
pub struct Subscribed {
    pub ok: bool,
    pub subscribed: bool,
}
