//! The gateway's own ACP connection to pincer's agent, in the same process.
//!
//! Gateway sessions are ordinary pincer sessions: the gateway opens,
//! prompts and cancels them over an in-memory ACP connection, as an editor
//! would over stdio, and the ACP server shares its open sessions with the
//! editor's connection under `pincer acp --gateway` (one
//! [`Registry`](crate::acp::registry::Registry)). The gateway is the ACP
//! client of the sessions it opened: their permission questions come here
//! and become approvals; their updates reach the gateway through the
//! registry's observer, like everyone else's.

use std::path::PathBuf;
use std::sync::Arc;

use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    CancelNotification, ClientCapabilities, ContentBlock, DeleteSessionRequest, InitializeRequest,
    LoadSessionRequest, NewSessionRequest, PromptRequest, RequestPermissionRequest,
    RequestPermissionResponse, SessionNotification, SetSessionConfigOptionRequest, StopReason,
};
use agent_client_protocol::{Agent, Channel, Client, Error};

use crate::acp::registry::{PROMPT_META_KEY, Registry};

/// Answers the agent's permission questions for the gateway's sessions.
pub trait Approver: Send + Sync + 'static {
    fn ask(
        &self,
        request: RequestPermissionRequest,
    ) -> futures::future::BoxFuture<'static, RequestPermissionResponse>;
}

/// The client end of the in-process connection.
#[derive(Clone)]
pub struct Link {
    cx: ConnectionTo<Agent>,
}

impl Link {
    /// Serves ACP in-process over `registry` and connects to it.
    pub async fn start(
        registry: Arc<Registry>,
        model: Option<String>,
        approver: Arc<dyn Approver>,
    ) -> Result<Self, Error> {
        let (server_end, client_end) = Channel::duplex();
        let options = crate::acp::ServeOptions {
            model,
            registry: Some(registry),
            observed: true,
            gateway_cwd: None,
            max_sessions: None,
        };
        tokio::spawn(async move {
            if let Err(e) = crate::acp::serve(server_end, crate::acp::Drain::new(), options).await {
                tracing::error!(error = %e, "the gateway's ACP connection ended");
            }
        });
        let (tx, rx) = tokio::sync::oneshot::channel();
        tokio::spawn(async move {
            let result = Client
                .v1()
                .name("pincer-gateway")
                .on_receive_request(
                    async move |request: RequestPermissionRequest,
                                responder,
                                cx: ConnectionTo<Agent>| {
                        // An approval may take minutes: the connection keeps
                        // serving meanwhile.
                        let approver = approver.clone();
                        cx.spawn(async move {
                            let answer = approver.ask(request).await;
                            if let Err(e) = responder.respond(answer) {
                                tracing::debug!(error = %e, "could not answer a permission question");
                            }
                            Ok(())
                        })
                    },
                    agent_client_protocol::on_receive_request!(),
                )
                .on_receive_notification(
                    // Updates reach the gateway through the registry's
                    // observer, in order with the runs' starts and ends.
                    async move |_notification: SessionNotification, _cx| Ok(()),
                    agent_client_protocol::on_receive_notification!(),
                )
                .connect_with(client_end, |cx: ConnectionTo<Agent>| async move {
                    let _ = tx.send(cx);
                    futures::future::pending::<()>().await;
                    Ok(())
                })
                .await;
            if let Err(e) = result {
                tracing::error!(error = %e, "the gateway's ACP client ended");
            }
        });
        let cx = rx.await.map_err(Error::into_internal_error)?;
        cx.send_request(
            InitializeRequest::new(agent_client_protocol::schema::ProtocolVersion::V1)
                .client_capabilities(ClientCapabilities::new()),
        )
        .block_task()
        .await?;
        Ok(Self { cx })
    }

    pub async fn new_session(&self, cwd: PathBuf) -> Result<String, Error> {
        let response = self
            .cx
            .send_request(NewSessionRequest::new(cwd))
            .block_task()
            .await?;
        Ok(response.session_id.0.to_string())
    }

    pub async fn load_session(&self, id: &str, cwd: PathBuf) -> Result<(), Error> {
        self.cx
            .send_request(LoadSessionRequest::new(id.to_string(), cwd))
            .block_task()
            .await?;
        Ok(())
    }

    pub async fn delete_session(&self, id: &str) -> Result<(), Error> {
        self.cx
            .send_request(DeleteSessionRequest::new(id.to_string()))
            .block_task()
            .await?;
        Ok(())
    }

    /// Prompts a session; `tag` comes back in the observer's events for
    /// this prompt, `queue` applies if the session is busy.
    pub async fn prompt(
        &self,
        session: &str,
        content: Vec<ContentBlock>,
        tag: &str,
        queue: Option<&str>,
    ) -> Result<StopReason, Error> {
        let mut meta = serde_json::Map::new();
        let mut ours = serde_json::json!({ "tag": tag });
        if let Some(queue) = queue {
            ours["queue"] = serde_json::json!(queue);
        }
        meta.insert(PROMPT_META_KEY.to_string(), ours);
        let request = PromptRequest::new(session.to_string(), content).meta(meta);
        let response = self.cx.send_request(request).block_task().await?;
        Ok(response.stop_reason)
    }

    pub fn cancel(&self, session: &str) {
        if let Err(e) = self
            .cx
            .send_notification(CancelNotification::new(session.to_string()))
        {
            tracing::warn!(error = %e, "could not cancel a session");
        }
    }

    /// Cancels the prompt tagged `tag` alone (see [`Link::prompt`]): the
    /// session's other prompts go on.
    pub fn cancel_prompt(&self, session: &str, tag: &str) {
        let mut meta = serde_json::Map::new();
        meta.insert(
            PROMPT_META_KEY.to_string(),
            serde_json::json!({ "tag": tag }),
        );
        if let Err(e) = self
            .cx
            .send_notification(CancelNotification::new(session.to_string()).meta(meta))
        {
            tracing::warn!(error = %e, "could not cancel a prompt");
        }
    }

    pub async fn set_option(&self, session: &str, id: &str, value: &str) -> Result<(), Error> {
        self.cx
            .send_request(SetSessionConfigOptionRequest::new(
                session.to_string(),
                id.to_string(),
                value,
            ))
            .block_task()
            .await?;
        Ok(())
    }
}

/// The message of an ACP error, for a gateway client.
pub fn error_text(error: &Error) -> String {
    error
        .data
        .as_ref()
        .and_then(|d| d.get("message"))
        .and_then(serde_json::Value::as_str)
        .map(String::from)
        .unwrap_or_else(|| error.message.clone())
}
