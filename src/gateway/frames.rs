//! The gateway protocol's frames (`req`, `res`, `event`) and its error
//! shape, as OpenClaw's clients parse them: a `res` always has a non-empty
//! `id` and a boolean `ok`, an error always a non-empty `code` and
//! `message` (a client drops a frame that lacks them).

use serde::{Deserialize, Serialize, Serializer};
use serde_json::Value;
use serde_json::value::RawValue;

/// The protocol version pincer serves (OpenClaw 2026.9's).
pub const PROTOCOL: u64 = 4;

/// A client's request.
#[derive(Debug, Deserialize)]
pub struct Request {
    pub id: String,
    pub method: String,
    #[serde(default)]
    pub params: Value,
}

/// Parses a text frame as a request; the error says what is wrong, and
/// carries the frame's id when it had a usable one.
pub fn parse_request(text: &str) -> Result<Request, (Option<String>, String)> {
    let value: Value = serde_json::from_str(text)
        .map_err(|e| (None, format!("the frame is not valid JSON: {e}")))?;
    let id = value
        .get("id")
        .and_then(Value::as_str)
        .filter(|id| !id.is_empty())
        .map(String::from);
    if value.get("type").and_then(Value::as_str) != Some("req") {
        return Err((id, "expected a request frame (`type: \"req\"`)".to_string()));
    }
    let request: Request = serde_json::from_value(value)
        .map_err(|e| (id.clone(), format!("the request frame is malformed: {e}")))?;
    if request.id.is_empty() || request.method.is_empty() {
        return Err((
            id,
            "a request needs a non-empty `id` and `method`".to_string(),
        ));
    }
    Ok(request)
}

/// An error as the protocol carries it.
#[derive(Clone, Debug, PartialEq)]
pub struct ErrorShape {
    pub code: &'static str,
    pub message: String,
    pub details: Option<Box<Value>>,
    pub retry_after_ms: Option<u64>,
}

impl ErrorShape {
    pub fn new(code: &'static str, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
            details: None,
            retry_after_ms: None,
        }
    }

    pub fn invalid(message: impl Into<String>) -> Self {
        Self::new(INVALID_REQUEST, message)
    }

    pub fn details(mut self, details: Value) -> Self {
        self.details = Some(Box::new(details));
        self
    }
}

impl Serialize for ErrorShape {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        /// The error as the protocol writes it: a retryable one says so,
        /// and when to try again.
        #[derive(Serialize)]
        #[serde(rename_all = "camelCase")]
        struct Wire<'a> {
            code: &'a str,
            message: &'a str,
            #[serde(skip_serializing_if = "Option::is_none")]
            details: Option<&'a Value>,
            #[serde(skip_serializing_if = "Option::is_none")]
            retryable: Option<bool>,
            #[serde(skip_serializing_if = "Option::is_none")]
            retry_after_ms: Option<u64>,
        }
        Wire {
            code: self.code,
            message: &self.message,
            details: self.details.as_deref(),
            retryable: self.retry_after_ms.map(|_| true),
            retry_after_ms: self.retry_after_ms,
        }
        .serialize(serializer)
    }
}

/// A `res` frame: the answer to request `id`, its payload or its error.
#[derive(Serialize)]
struct Response<'a, P: Serialize + ?Sized> {
    #[serde(rename = "type")]
    kind: &'static str,
    id: &'a str,
    ok: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    payload: Option<&'a P>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<&'a ErrorShape>,
}

/// A method's result, encoded once from its type.
pub type Answer = Box<RawValue>;

/// `payload` encoded as a method's result.
pub fn answer<P: Serialize + ?Sized>(payload: &P) -> Result<Answer, ErrorShape> {
    serde_json::value::to_raw_value(payload)
        .map_err(|e| ErrorShape::new(UNAVAILABLE, format!("the answer could not be encoded: {e}")))
}

pub const INVALID_REQUEST: &str = "INVALID_REQUEST";
pub const FORBIDDEN: &str = "FORBIDDEN";
pub const UNAVAILABLE: &str = "UNAVAILABLE";
pub const APPROVAL_NOT_FOUND: &str = "APPROVAL_NOT_FOUND";

/// A successful answer.
pub fn ok<P: Serialize + ?Sized>(id: &str, payload: &P) -> String {
    let frame = Response {
        kind: "res",
        id,
        ok: true,
        payload: Some(payload),
        error: None,
    };
    serde_json::to_string(&frame).unwrap_or_default()
}

/// A failed answer.
pub fn error(id: &str, error: &ErrorShape) -> String {
    let frame: Response<'_, ()> = Response {
        kind: "res",
        id,
        ok: false,
        payload: None,
        error: Some(error),
    };
    serde_json::to_string(&frame).unwrap_or_default()
}

/// An event frame around a payload serialised once for every recipient
/// (`seq` is per connection, so only the envelope differs).
pub fn event(name: &str, payload: &str, seq: u64) -> String {
    let mut frame = String::with_capacity(payload.len() + name.len() + 48);
    frame.push_str(r#"{"type":"event","event":"#);
    frame.push_str(&Value::from(name).to_string());
    frame.push_str(r#","payload":"#);
    frame.push_str(payload);
    frame.push_str(r#","seq":"#);
    frame.push_str(&seq.to_string());
    frame.push('}');
    frame
}

/// Milliseconds since the Unix epoch.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn an_event_frame_is_the_envelope_around_the_payload() {
        let frame = event("chat", r#"{"a":"\"x\""}"#, 7);
        let parsed: Value = serde_json::from_str(&frame).unwrap();
        assert_eq!(
            parsed,
            json!({"type":"event","event":"chat","payload":{"a":"\"x\""},"seq":7})
        );
    }

    #[test]
    fn requests_are_checked_with_their_id_kept_for_the_answer() {
        assert!(parse_request(r#"{"type":"req","id":"1","method":"health"}"#).is_ok());
        assert_eq!(parse_request("{").unwrap_err().0, None);
        assert_eq!(
            parse_request(r#"{"type":"res","id":"9","method":"x"}"#)
                .unwrap_err()
                .0
                .as_deref(),
            Some("9")
        );
        assert_eq!(
            parse_request(r#"{"type":"req","id":"3","method":""}"#)
                .unwrap_err()
                .0
                .as_deref(),
            Some("3")
        );
        assert!(parse_request(r#"{"type":"req","id":5,"method":"x"}"#).is_err());
    }

    #[test]
    fn a_retryable_error_says_when() {
        let mut error = ErrorShape::new(UNAVAILABLE, "later");
        error.retry_after_ms = Some(1500);
        assert_eq!(
            serde_json::to_value(&error).unwrap(),
            json!({"code":"UNAVAILABLE","message":"later","retryable":true,"retryAfterMs":1500})
        );
    }

    #[test]
    fn an_answer_is_encoded_once_and_framed_as_it_is() {
        #[derive(serde::Serialize)]
        #[serde(rename_all = "camelCase")]
        struct Done {
            run_id: &'static str,
            ok: bool,
        }
        let payload = answer(&Done {
            run_id: "r\"1",
            ok: true,
        })
        .unwrap();
        assert_eq!(payload.get(), r#"{"runId":"r\"1","ok":true}"#);
        let frame: Value = serde_json::from_str(&ok("7", &payload)).unwrap();
        assert_eq!(
            frame,
            json!({"type": "res", "id": "7", "ok": true, "payload": {"runId": "r\"1", "ok": true}})
        );
        let refused = ErrorShape::invalid("no").details(json!({"code": "X"}));
        let frame: Value = serde_json::from_str(&error("8", &refused)).unwrap();
        assert_eq!(
            frame,
            json!({"type": "res", "id": "8", "ok": false,
                   "error": {"code": "INVALID_REQUEST", "message": "no", "details": {"code": "X"}}})
        );
    }
}
