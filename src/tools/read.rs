//! PLACEHOLDER being written by a helper.
use std::path::Path;
use futures::future::BoxFuture;
use super::{CallInfo, Tool, ToolContext, ToolKind, ToolOutput};
pub struct ReadTool;
impl Tool for ReadTool {
    fn name(&self) -> &'static str { "read" }
    fn description(&self) -> &'static str { "" }
    fn parameters(&self) -> serde_json::Value { serde_json::json!({}) }
    fn describe(&self, _args: &serde_json::Value, _cwd: &Path) -> CallInfo { CallInfo { title: String::new(), kind: ToolKind::Read, locations: vec![] } }
    fn needs_permission(&self, _args: &serde_json::Value, _cwd: &Path) -> Option<String> { None }
    fn mutating(&self) -> bool { false }
    fn execute<'a>(&'a self, _args: serde_json::Value, _ctx: &'a ToolContext) -> BoxFuture<'a, ToolOutput> { Box::pin(async { ToolOutput::error("") }) }
}
