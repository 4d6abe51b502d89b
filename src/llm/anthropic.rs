//! PLACEHOLDER being written by a helper.
use std::time::Duration;
use super::{HttpRequest, LlmError, Model, Request, Secret, StreamEvent, WireFormat, sse};
pub fn build_request(_model: &Model, _key: Option<&Secret>, _request: &Request) -> HttpRequest {
    HttpRequest { url: String::new(), headers: Vec::new(), body: serde_json::Value::Null }
}
pub struct Parser;
impl Parser { pub fn new(_provider: &str) -> Self { Parser } }
impl WireFormat for Parser {
    fn on_event(&mut self, _event: &sse::Event) -> Result<Vec<StreamEvent>, LlmError> { Ok(vec![]) }
    fn finished(&self) -> bool { true }
}
pub fn error_from_response(provider: &str, status: u16, retry_after: Option<Duration>, body: &str) -> LlmError {
    LlmError::from_http(provider, status, None, body.to_string(), retry_after)
}
