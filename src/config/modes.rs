//! The modes a session runs in, as config files, transcripts and the front
//! doors spell them: how much the agent may do without asking ([`Mode`]),
//! and what a message sent while a run is busy does ([`QueueMode`]).
//!
//! They are plain values of the config file's schema (`default_mode`,
//! `queue_mode`), defined here once for every layer above: the agent acts
//! on them, the transcript records them, ACP and the gateway offer them.

use serde::{Deserialize, Serialize};

use crate::tools::Tool;

/// How much the agent may do without asking.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Mode {
    /// Ask before anything that changes the machine or leaves the workspace.
    #[default]
    Default,
    /// File edits inside the workspace are allowed; commands still ask.
    AcceptEdits,
    /// Read-only: tools that change anything are not offered.
    Plan,
    /// Never ask.
    Bypass,
}

impl Mode {
    pub const ALL: [Mode; 4] = [Mode::Default, Mode::AcceptEdits, Mode::Plan, Mode::Bypass];

    pub fn id(self) -> &'static str {
        match self {
            Mode::Default => "default",
            Mode::AcceptEdits => "accept-edits",
            Mode::Plan => "plan",
            Mode::Bypass => "bypass",
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Mode::Default => "Ask",
            Mode::AcceptEdits => "Accept edits",
            Mode::Plan => "Plan (read-only)",
            Mode::Bypass => "Bypass permissions",
        }
    }

    pub fn description(self) -> &'static str {
        match self {
            Mode::Default => "Ask before edits, commands and anything outside the project",
            Mode::AcceptEdits => "Edit files in the project without asking; ask before commands",
            Mode::Plan => "Read and search only; nothing is changed",
            Mode::Bypass => "Run everything without asking",
        }
    }

    pub fn parse(id: &str) -> Option<Mode> {
        Mode::ALL.into_iter().find(|m| m.id() == id)
    }

    /// OpenClaw's name for the mode (its `permissionMode`: `read-only`,
    /// `guarded`, `workspace`, `full`), where it has one that means the
    /// same. Ask-first is OpenClaw's "default": no override, `null` on its
    /// wire. OpenClaw's `guarded` has a human review what goes beyond the
    /// session root, which is what accept-edits leaves to the user.
    pub fn openclaw(self) -> Option<&'static str> {
        match self {
            Mode::Default => None,
            Mode::AcceptEdits => Some("guarded"),
            Mode::Plan => Some("read-only"),
            Mode::Bypass => Some("full"),
        }
    }

    /// A mode by OpenClaw's name ([`Mode::openclaw`]). `workspace` (an AI
    /// reviewer decides) has no pincer mode.
    pub fn from_openclaw(name: &str) -> Option<Mode> {
        Mode::ALL.into_iter().find(|m| m.openclaw() == Some(name))
    }

    /// Whether a tool is offered to the model at all in this mode.
    pub fn offers(self, tool: &dyn Tool) -> bool {
        !(self == Mode::Plan && tool.mutating())
    }
}

/// What happens to a message the user sends while a run is busy.
///
/// A session itself runs [`QueueMode::Steer`] and [`QueueMode::FollowUp`]
/// ([`QueueMode::ALL`]; the config file, the transcript and ACP's option
/// take only these). The gateway's wire (OpenClaw's `queueMode`) adds two
/// that the gateway carries out on top of them: `collect` and `interrupt`.
/// pincer spells follow-up `follow-up` ([`QueueMode::id`]), OpenClaw
/// `followup` ([`QueueMode::wire`]); each reads both.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum QueueMode {
    /// Once the running tool finishes, the rest of its batch is skipped and
    /// the model reads the message next.
    #[default]
    Steer,
    /// The message waits until the run would end, then continues it.
    #[serde(alias = "followup", alias = "follow_up")]
    FollowUp,
    /// The gateway holds the messages sent while the run is busy and sends
    /// them as one follow-up when it ends. Gateway wire only.
    #[serde(skip)]
    Collect,
    /// The gateway cancels the running run and sends the message at once.
    /// Gateway wire only.
    #[serde(skip)]
    Interrupt,
}

impl QueueMode {
    /// The modes a session runs itself.
    pub const ALL: [QueueMode; 2] = [QueueMode::Steer, QueueMode::FollowUp];

    /// pincer's spelling: the config file's, the transcript's and ACP's.
    pub fn id(self) -> &'static str {
        match self {
            QueueMode::Steer => "steer",
            QueueMode::FollowUp => "follow-up",
            QueueMode::Collect => "collect",
            QueueMode::Interrupt => "interrupt",
        }
    }

    /// One of the modes a session runs ([`QueueMode::ALL`]) by its id.
    pub fn parse(value: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.id() == value)
    }

    /// The gateway wire's spelling (OpenClaw's): `followup`.
    pub fn wire(self) -> &'static str {
        match self {
            QueueMode::FollowUp => "followup",
            other => other.id(),
        }
    }

    /// Any mode of the gateway's wire, in OpenClaw's spelling or pincer's.
    pub fn from_wire(value: &str) -> Option<Self> {
        match value {
            "steer" => Some(Self::Steer),
            "followup" | "follow-up" | "follow_up" => Some(Self::FollowUp),
            "collect" => Some(Self::Collect),
            "interrupt" => Some(Self::Interrupt),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    #[derive(Debug, Deserialize)]
    struct File {
        queue_mode: QueueMode,
    }

    fn from_config(value: &str) -> Result<QueueMode, String> {
        toml::from_str::<File>(&format!("queue_mode = \"{value}\""))
            .map(|f| f.queue_mode)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn openclaw_s_permission_modes_name_pincer_s_where_they_mean_the_same() {
        assert_eq!(Mode::from_openclaw("read-only"), Some(Mode::Plan));
        assert_eq!(Mode::from_openclaw("guarded"), Some(Mode::AcceptEdits));
        assert_eq!(Mode::from_openclaw("full"), Some(Mode::Bypass));
        // An AI reviewer is not a pincer mode; pincer's own ids are not
        // OpenClaw's names.
        for name in ["workspace", "default", "plan", "bypass", ""] {
            assert_eq!(Mode::from_openclaw(name), None, "{name}");
        }
        assert_eq!(Mode::Default.openclaw(), None);
        for mode in Mode::ALL {
            if let Some(name) = mode.openclaw() {
                assert_eq!(Mode::from_openclaw(name), Some(mode));
            }
        }
    }

    #[test]
    fn both_spellings_of_follow_up_are_one_mode() {
        for spelling in ["follow-up", "followup", "follow_up"] {
            assert_eq!(from_config(spelling), Ok(QueueMode::FollowUp), "{spelling}");
            assert_eq!(QueueMode::from_wire(spelling), Some(QueueMode::FollowUp));
            assert_eq!(
                serde_json::from_str::<QueueMode>(&format!("\"{spelling}\"")).ok(),
                Some(QueueMode::FollowUp)
            );
        }
        assert_eq!(from_config("steer"), Ok(QueueMode::Steer));
        // The transcript and the config keep pincer's spelling.
        assert_eq!(
            serde_json::to_string(&QueueMode::FollowUp).ok().as_deref(),
            Some("\"follow-up\"")
        );
    }

    #[test]
    fn every_wire_spelling_round_trips() {
        for mode in [
            QueueMode::Steer,
            QueueMode::FollowUp,
            QueueMode::Collect,
            QueueMode::Interrupt,
        ] {
            assert_eq!(QueueMode::from_wire(mode.wire()), Some(mode));
        }
        assert_eq!(QueueMode::FollowUp.wire(), "followup");
        assert_eq!(QueueMode::from_wire("later"), None);
    }

    #[test]
    fn a_session_runs_only_steer_and_follow_up() {
        assert_eq!(QueueMode::parse("follow-up"), Some(QueueMode::FollowUp));
        assert_eq!(QueueMode::parse("collect"), None);
        assert_eq!(QueueMode::parse("interrupt"), None);
        assert!(from_config("collect").is_err());
        assert!(from_config("interrupt").is_err());
    }
}
