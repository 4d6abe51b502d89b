//! One MCP server tool as a pincer [`Tool`]: `mcp__<server>__<tool>`, the
//! server's schema, and a call that goes to the server.

use std::path::Path;
use std::sync::{Arc, Weak};

use futures::future::BoxFuture;
use serde_json::Value;

use super::{Server, tool_prefix_name};
use crate::tools::{CallInfo, Tool, ToolContext, ToolKind, ToolOutput};

pub struct McpTool {
    /// The model-facing name.
    name: String,
    /// The name the server knows it by.
    remote: String,
    server_name: String,
    description: String,
    parameters: Arc<Value>,
    title: String,
    kind: ToolKind,
    read_only: bool,
    server: Weak<Server>,
}

impl McpTool {
    /// From a tool of `tools/list` (as JSON) of server `server_name`.
    pub(crate) fn new(server_name: &str, tool: &Value, server: Weak<Server>) -> Self {
        let remote = tool
            .get("name")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let annotations = tool.get("annotations").unwrap_or(&Value::Null);
        let hint = |key: &str| annotations.get(key).and_then(Value::as_bool);
        let read_only = hint("readOnlyHint").unwrap_or(false);
        // Never an edit kind: `accept-edits` lets those through unasked,
        // and an MCP tool is not a file edit in the project.
        let kind = match (read_only, hint("openWorldHint").unwrap_or(false)) {
            (true, true) => ToolKind::Fetch,
            (true, false) => ToolKind::Read,
            (false, _) => ToolKind::Other,
        };
        let title = annotations
            .get("title")
            .or_else(|| tool.get("title"))
            .and_then(Value::as_str)
            .unwrap_or(&remote)
            .to_string();
        let mut parameters = tool
            .get("inputSchema")
            .cloned()
            .unwrap_or_else(|| serde_json::json!({"type": "object"}));
        if let Some(object) = parameters.as_object_mut() {
            object.remove("$schema");
            object
                .entry("type")
                .or_insert_with(|| Value::String("object".into()));
        }
        let description = tool
            .get("description")
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| format!("{title} (from MCP server {server_name})"));
        Self {
            name: format!("mcp__{}__{remote}", tool_prefix_name(server_name)),
            remote,
            server_name: server_name.to_string(),
            description,
            parameters: Arc::new(parameters),
            title,
            kind,
            read_only,
            server,
        }
    }
}

impl Tool for McpTool {
    fn name(&self) -> &str {
        &self.name
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn parameters(&self) -> Arc<Value> {
        self.parameters.clone()
    }

    fn describe(&self, _args: &Value, _cwd: &Path) -> CallInfo {
        CallInfo {
            title: format!("{} ({})", self.title, self.server_name),
            kind: self.kind,
            locations: Vec::new(),
        }
    }

    fn mutating(&self) -> bool {
        !self.read_only
    }

    fn execute<'a>(&'a self, args: Value, ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput> {
        Box::pin(async move {
            let Some(server) = self.server.upgrade() else {
                return ToolOutput::error(format!(
                    "MCP server `{}` has shut down.",
                    self.server_name
                ));
            };
            let server: Arc<Server> = server;
            server
                .call(
                    &self.remote,
                    args,
                    ctx.image_input,
                    &ctx.cancel,
                    &ctx.progress,
                )
                .await
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;
    use serde_json::json;

    #[test]
    fn names_kinds_and_schemas_come_from_the_listing() {
        let tool = McpTool::new(
            "my server",
            &json!({
                "name": "echo",
                "description": "Echo it back",
                "inputSchema": {"$schema": "x", "type": "object", "properties": {"text": {"type": "string"}}},
                "annotations": {"title": "Echo", "readOnlyHint": true}
            }),
            Weak::new(),
        );
        assert_eq!(tool.name(), "mcp__my_server__echo");
        assert_eq!(tool.description(), "Echo it back");
        assert_eq!(
            *tool.parameters(),
            json!({"type": "object", "properties": {"text": {"type": "string"}}})
        );
        assert!(!tool.mutating());
        let info = tool.describe(&json!({}), Path::new("/"));
        assert_eq!(info.title, "Echo (my server)");
        assert_eq!(info.kind, ToolKind::Read);

        let tool = McpTool::new(
            "s",
            &json!({"name": "rm", "inputSchema": {"type": "object"}, "annotations": {"destructiveHint": true}}),
            Weak::new(),
        );
        assert!(tool.mutating());
        assert_eq!(
            tool.describe(&json!({}), Path::new("/")).kind,
            ToolKind::Other
        );
    }
}
