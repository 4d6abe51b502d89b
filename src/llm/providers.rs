//! The table from a model's API to the module that speaks it: how its
//! request is built, which parser reads its answer, and how its errors
//! are classified. The shared half of a call (`stream`) asks this table
//! and knows no provider; each provider's module knows nothing of the
//! others.

use std::time::Duration;

use futures::future::BoxFuture;

use super::{
    Api, HttpRequest, LlmError, Model, Request, Secret, WireFormat, anthropic, bedrock, google,
    openai_completions, openai_responses,
};

/// A model call's request and the parser of its answer.
pub(super) type Prepared = (HttpRequest, Box<dyn WireFormat>);

/// A call, ready to send or to be prepared when its stream is polled.
pub(super) enum Call {
    Ready(Prepared),
    /// Authorising the request takes I/O (Bedrock's AWS credentials may
    /// take HTTP calls: SSO, STS, instance metadata).
    Later(BoxFuture<'static, Result<Prepared, LlmError>>),
}

/// The request of a call to `model` and its answer's parser.
pub(super) fn prepare(
    client: &reqwest::Client,
    model: &Model,
    key: Option<&Secret>,
    request: &Request,
) -> Call {
    let provider = &model.provider;
    Call::Ready(match model.api {
        Api::AnthropicMessages => (
            anthropic::build_request_cached(model, key, request),
            Box::new(anthropic::Parser::new(provider)),
        ),
        Api::OpenaiCompletions => (
            openai_completions::build_request_cached(model, key, request),
            Box::new(openai_completions::Parser::new(provider)),
        ),
        Api::OpenaiResponses => (
            openai_responses::build_request_cached(model, key, request),
            Box::new(openai_responses::Parser::new(provider)),
        ),
        Api::GoogleGenerativeAi => (
            google::build_request_cached(model, key, request),
            Box::new(google::Parser::new(provider)),
        ),
        Api::BedrockConverseStream => {
            let (client, model, key, request) =
                (client.clone(), model.clone(), key.cloned(), request.clone());
            return Call::Later(Box::pin(async move {
                let http =
                    bedrock::authorised_request(&client, &model, key.as_ref(), &request).await?;
                let parser: Box<dyn WireFormat> = Box::new(bedrock::Parser::new(&model.provider));
                Ok((http, parser))
            }));
        }
    })
}

/// The error an HTTP answer other than 2xx or 3xx means.
pub(super) fn error_from_response(
    api: Api,
    provider: &str,
    status: u16,
    retry_after: Option<Duration>,
    body: &str,
) -> LlmError {
    match api {
        Api::AnthropicMessages => {
            anthropic::error_from_response(provider, status, retry_after, body)
        }
        Api::OpenaiCompletions => {
            openai_completions::error_from_response(provider, status, retry_after, body)
        }
        Api::OpenaiResponses => {
            openai_responses::error_from_response(provider, status, retry_after, body)
        }
        Api::GoogleGenerativeAi => google::error_from_response(provider, status, retry_after, body),
        Api::BedrockConverseStream => {
            bedrock::error_from_response(provider, status, retry_after, body)
        }
    }
}

/// The error a 200 whose body is a JSON document (not a stream) carries,
/// if the provider's error shape is in it.
pub(super) fn error_in_ok_body(api: Api, provider: &str, text: &str) -> Option<LlmError> {
    match api {
        Api::AnthropicMessages => anthropic::error_in_ok_body(provider, text),
        Api::OpenaiCompletions => openai_completions::error_in_ok_body(provider, text),
        Api::OpenaiResponses => openai_responses::error_in_ok_body(provider, text),
        Api::GoogleGenerativeAi => google::error_in_ok_body(provider, text),
        Api::BedrockConverseStream => bedrock::error_in_ok_body(provider, text),
    }
}
