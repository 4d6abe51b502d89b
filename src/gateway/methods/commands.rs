//! `commands.list`: the slash commands a session takes, as OpenClaw's
//! command entries (OpenClaw's TUI completes them, its Control UI's chat
//! offers them in its `/` menu). A command is typed into the message and
//! sent with `chat.send`, where the session runs it as an editor's
//! `/compact` would.

use agent_client_protocol::v1::schema::{AvailableCommand, AvailableCommandInput};
use serde_json::Value;

use super::Reply;
use crate::gateway::frames::{ErrorShape, answer};
use crate::gateway::hub::Hub;
use crate::gateway::protocol::system::{
    Command, CommandArg, CommandScope, Commands, CommandsListParams,
};

/// The answer: the session's commands (`sessionKey`), else the ones
/// sessions here announce; the built-in ones before any session has.
pub fn list(hub: &Hub, params: Value) -> Reply {
    let query: CommandsListParams = super::typed("commands.list", params)?;
    super::only_main(query.agent_id.as_deref())?;
    if query.scope == Some(CommandScope::Native) {
        return Err(ErrorShape::invalid(
            "commands.list: scope `native` is not supported by pincer, whose commands are typed into a message (`text`); its chat channels' menus are their own",
        ));
    }
    if query.provider.is_some() {
        return Err(ErrorShape::invalid(
            "commands.list: `provider` is not supported by pincer, whose commands are the same on every channel",
        ));
    }
    let include_args = query.include_args != Some(false);
    let session = match query.session_key.as_deref() {
        Some(key) => {
            crate::gateway::hub::check_key("sessionKey", key)?;
            Some(
                hub.lookup(key)
                    .ok_or_else(|| ErrorShape::invalid("Session not found."))?,
            )
        }
        None => None,
    };
    let commands = hub.commands(session.as_deref());
    let built_in;
    let commands: &[AvailableCommand] = match &commands {
        Some(commands) => commands,
        None => {
            built_in = crate::acp::commands::available(&[], &[], &[]);
            &built_in
        }
    };
    answer(&Commands {
        commands: commands
            .iter()
            .take(MAX_COMMANDS)
            .map(|command| entry(command, include_args))
            .collect(),
    })
}

/// OpenClaw's most commands in one answer.
const MAX_COMMANDS: usize = 500;

/// One command as OpenClaw's entry: skills are `skill`, the rest `native`.
fn entry(command: &AvailableCommand, include_args: bool) -> Command {
    let hint = match &command.input {
        Some(AvailableCommandInput::Unstructured(input)) => Some(input.hint.as_str()),
        _ => None,
    };
    let source = if command.name.starts_with("skill:") {
        "skill"
    } else {
        "native"
    };
    Command {
        name: command.name.clone(),
        description: command.description.clone(),
        source,
        scope: "text",
        accepts_args: hint.is_some(),
        text_aliases: vec![format!("/{}", command.name)],
        args: hint.filter(|_| include_args).map(|hint| {
            vec![CommandArg {
                name: "input",
                description: hint.to_string(),
                kind: "string",
            }]
        }),
    }
}
