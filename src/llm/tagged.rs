//! Reading the internally tagged enums of the conversation ([`Message`] by
//! its `role`, [`Content`] and [`AssistantContent`] by their `type`)
//! without serde's buffering.
//!
//! Serde's derived `#[serde(tag = "…")]` reads a whole object into a tree
//! of its own before it knows the variant, then reads the variant from that
//! tree: every string of a message is allocated twice. pincer writes the
//! tag first, so here the first key is read, and when it is the tag, the
//! variant's fields are read straight from the rest of the object. An
//! object whose tag comes later (written by hand, or by another program)
//! is read the slow way: buffered as JSON values, the tag taken out, the
//! rest read as the variant's fields. Either way the result, and the
//! errors for a missing or unknown tag, are those of the derived reader.
//!
//! [`Message`]: super::Message
//! [`Content`]: super::Content
//! [`AssistantContent`]: super::AssistantContent

use std::fmt;
use std::marker::PhantomData;

use serde::de::value::{MapAccessDeserializer, MapDeserializer};
use serde::de::{Deserializer, Error, MapAccess, Visitor};

/// An enum whose JSON form is an object with a tag naming the variant.
pub(super) trait Tagged: Sized {
    /// The tag's key.
    const TAG: &'static str;
    /// The tag's values, for the error about an unknown one.
    const VARIANTS: &'static [&'static str];
    /// What the enum is, for errors ("a message").
    const EXPECTING: &'static str;

    /// The variant `tag` names, its fields read from `rest`, the object
    /// without its tag.
    fn variant<'de, D: Deserializer<'de>>(tag: &str, rest: D) -> Result<Self, D::Error>;
}

/// Reads a [`Tagged`] enum from `deserializer`.
pub(super) fn deserialize<'de, T: Tagged, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<T, D::Error> {
    deserializer.deserialize_map(TaggedVisitor(PhantomData))
}

/// `Deserialize` for each [`Tagged`] type named, through [`deserialize`].
macro_rules! deserialize_with_tag {
    ($($name:ty),*) => {$(
        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                tagged::deserialize(deserializer)
            }
        }
    )*};
}
pub(super) use deserialize_with_tag;

/// The error for a tag no variant has.
pub(super) fn unknown<T: Tagged, E: Error>(tag: &str) -> E {
    E::unknown_variant(tag, T::VARIANTS)
}

struct TaggedVisitor<T>(PhantomData<T>);

impl<'de, T: Tagged> Visitor<'de> for TaggedVisitor<T> {
    type Value = T;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str(T::EXPECTING)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<T, A::Error> {
        let Some(first) = map.next_key::<String>()? else {
            return Err(A::Error::missing_field(T::TAG));
        };
        if first == T::TAG {
            let tag: String = map.next_value()?;
            return T::variant(&tag, MapAccessDeserializer::new(map));
        }
        // The tag comes later: keep what comes before it.
        let mut before = vec![(first, map.next_value::<serde_json::Value>()?)];
        let tag = loop {
            match map.next_key::<String>()? {
                Some(key) if key == T::TAG => break map.next_value::<String>()?,
                Some(key) => before.push((key, map.next_value()?)),
                None => return Err(A::Error::missing_field(T::TAG)),
            }
        };
        while let Some(entry) = map.next_entry::<String, serde_json::Value>()? {
            before.push(entry);
        }
        let rest = MapDeserializer::<_, serde_json::Error>::new(before.into_iter());
        T::variant(&tag, MapAccessDeserializer::new(rest)).map_err(A::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::super::{
        Api, AssistantContent, AssistantMessage, Content, Message, StopReason, ToolCall,
        ToolResultMessage, Usage,
    };
    use pretty_assertions::assert_eq;
    use serde_json::{Value, json};

    fn every_message() -> Vec<Message> {
        vec![
            Message::User {
                content: vec![
                    Content::text("hello \"there\"\n"),
                    Content::Image {
                        data: "aGk=".into(),
                        mime_type: "image/png".into(),
                    },
                ],
            },
            Message::Assistant(AssistantMessage {
                content: vec![
                    AssistantContent::Thinking {
                        thinking: "hmm".into(),
                        signature: Some("sig".into()),
                        redacted: false,
                    },
                    AssistantContent::Thinking {
                        thinking: "opaque".into(),
                        signature: None,
                        redacted: true,
                    },
                    AssistantContent::Text { text: "ok".into() },
                    AssistantContent::ToolCall(ToolCall {
                        id: "toolu_1".into(),
                        name: "read".into(),
                        arguments: json!({"path": "a.rs", "role": "not a tag"}),
                        arguments_error: None,
                    }),
                ],
                provider: "anthropic".into(),
                api: Api::AnthropicMessages,
                model: "claude-sonnet-4-5".into(),
                auth_profile: Some("work".into()),
                stop_reason: StopReason::ToolUse,
                error_message: None,
                usage: Usage {
                    input: 10,
                    output: 20,
                    ..Usage::default()
                },
            }),
            Message::ToolResult(ToolResultMessage {
                tool_call_id: "toolu_1".into(),
                tool_name: "read".into(),
                content: vec![Content::text("fn main() {}")],
                is_error: true,
            }),
        ]
    }

    /// The same object with every tag moved to the end of its object.
    fn tags_last(value: Value) -> Value {
        match value {
            Value::Object(map) => {
                let (tags, rest): (Vec<_>, Vec<_>) = map
                    .into_iter()
                    .map(|(k, v)| (k, tags_last(v)))
                    .partition(|(k, v)| (k == "role" || k == "type") && v.is_string());
                Value::Object(rest.into_iter().chain(tags).collect())
            }
            Value::Array(items) => Value::Array(items.into_iter().map(tags_last).collect()),
            other => other,
        }
    }

    #[test]
    fn messages_read_back_whether_the_tag_comes_first_or_last() {
        for message in every_message() {
            let text = serde_json::to_string(&message).unwrap();
            assert!(text.starts_with(r#"{"role":"#), "{text}");
            assert_eq!(serde_json::from_str::<Message>(&text).unwrap(), message);
            let last = tags_last(serde_json::to_value(&message).unwrap());
            let last_text = serde_json::to_string(&last).unwrap();
            assert!(!last_text.starts_with(r#"{"role":"#), "{last_text}");
            assert_eq!(
                serde_json::from_str::<Message>(&last_text).unwrap(),
                message
            );
            assert_eq!(serde_json::from_value::<Message>(last).unwrap(), message);
        }
    }

    #[test]
    fn a_missing_or_unknown_tag_is_an_error_that_names_it() {
        let error = |text: &str| {
            serde_json::from_str::<Message>(text)
                .unwrap_err()
                .to_string()
        };
        assert!(error(r#"{"content":[]}"#).contains("missing field `role`"));
        assert!(error(r#"{}"#).contains("missing field `role`"));
        let unknown = error(r#"{"role":"system","content":[]}"#);
        assert!(
            unknown.contains("unknown variant `system`") && unknown.contains("tool_result"),
            "{unknown}"
        );
        let unknown_later = error(r#"{"content":[],"role":"system"}"#);
        assert!(
            unknown_later.contains("unknown variant `system`"),
            "{unknown_later}"
        );
        assert!(error(r#"{"role":"user"}"#).contains("missing field `content`"));
        assert!(
            error(r#"{"role":"user","content":[{"type":"video"}]}"#)
                .contains("unknown variant `video`")
        );
        assert!(
            error(r#"{"role":"user","content":[{"text":"hi"}]}"#).contains("missing field `type`")
        );
        assert!(error(r#"{"role":3,"content":[]}"#).contains("invalid type"));
        assert!(error(r#"["user"]"#).contains("invalid type"));
    }
}
