//! The editor as pincer's workspace: files through `fs/read_text_file` and
//! `fs/write_text_file` (so tools see unsaved buffers and edits land in the
//! editor's review UI), commands through `terminal/*`. Each is used only
//! when the editor advertised it; otherwise the local disk serves.

use std::path::Path;
use std::sync::Arc;

use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    CreateTerminalRequest, EnvVariable, KillTerminalRequest, ReadTextFileRequest,
    ReleaseTerminalRequest, SessionId, TerminalExitStatus, TerminalOutputRequest,
    WaitForTerminalExitRequest, WriteTextFileRequest,
};
use agent_client_protocol::{Client, JsonRpcRequest};
use futures::future::BoxFuture;

use super::transport::Drain;
use crate::tools::{
    LocalWorkspace, TerminalCommand, TerminalExit, TerminalOutput, Terminals, Workspace,
};

/// Sends a request to the editor and waits for the answer, unless the
/// editor is gone (stdin closed), which is an error.
async fn ask<R>(
    cx: &ConnectionTo<Client>,
    drain: &Drain,
    request: R,
) -> std::io::Result<R::Response>
where
    R: JsonRpcRequest + Send + 'static,
    R::Response: Send + 'static,
{
    let method = request.method().to_string();
    tokio::select! {
        answer = cx.send_request(request).block_task() => answer.map_err(|e| {
            std::io::Error::other(format!("the editor could not {method}: {}", e.message))
        }),
        () = drain.closed() => Err(std::io::Error::new(
            std::io::ErrorKind::BrokenPipe,
            "the editor has gone away",
        )),
    }
}

/// Files through the editor where it offers that, else the disk.
pub struct EditorFiles {
    pub cx: ConnectionTo<Client>,
    pub session: SessionId,
    pub drain: Arc<Drain>,
    pub read: bool,
    pub write: bool,
}

impl Workspace for EditorFiles {
    fn reads_from_editor(&self) -> bool {
        self.read
    }

    fn read_text<'a>(&'a self, path: &'a Path) -> BoxFuture<'a, std::io::Result<String>> {
        if !self.read {
            return LocalWorkspace.read_text(path);
        }
        Box::pin(async move {
            // The editor answers errors for missing files in its own words;
            // a missing file is the common case, so check the disk first.
            if !path.exists() {
                return Err(std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    format!("{} does not exist", path.display()),
                ));
            }
            let request = ReadTextFileRequest::new(self.session.clone(), path.to_path_buf());
            Ok(ask(&self.cx, &self.drain, request).await?.content)
        })
    }

    fn write_text<'a>(
        &'a self,
        path: &'a Path,
        text: &'a str,
    ) -> BoxFuture<'a, std::io::Result<()>> {
        if !self.write {
            return LocalWorkspace.write_text(path, text);
        }
        Box::pin(async move {
            let request = WriteTextFileRequest::new(
                self.session.clone(),
                path.to_path_buf(),
                text.to_string(),
            );
            ask(&self.cx, &self.drain, request).await.map(|_| ())
        })
    }
}

/// Terminals the editor runs and shows.
pub struct EditorTerminals {
    pub cx: ConnectionTo<Client>,
    pub session: SessionId,
    pub drain: Arc<Drain>,
}

fn exit(status: TerminalExitStatus) -> TerminalExit {
    TerminalExit {
        exit_code: status.exit_code,
        signal: status.signal,
    }
}

impl Terminals for EditorTerminals {
    fn create(&self, command: TerminalCommand) -> BoxFuture<'_, std::io::Result<String>> {
        Box::pin(async move {
            let env: Vec<EnvVariable> = command
                .env
                .into_iter()
                .map(|(name, value)| EnvVariable::new(name, value))
                .collect();
            let request = CreateTerminalRequest::new(self.session.clone(), command.command)
                .args(command.args)
                .cwd(command.cwd)
                .env(env)
                .output_byte_limit(command.output_byte_limit);
            Ok(ask(&self.cx, &self.drain, request)
                .await?
                .terminal_id
                .0
                .to_string())
        })
    }

    fn output<'a>(&'a self, id: &'a str) -> BoxFuture<'a, std::io::Result<TerminalOutput>> {
        Box::pin(async move {
            let request = TerminalOutputRequest::new(self.session.clone(), id.to_string());
            let response = ask(&self.cx, &self.drain, request).await?;
            Ok(TerminalOutput {
                output: response.output,
                truncated: response.truncated,
                exit: response.exit_status.map(exit),
            })
        })
    }

    fn wait_for_exit<'a>(&'a self, id: &'a str) -> BoxFuture<'a, std::io::Result<TerminalExit>> {
        Box::pin(async move {
            let request = WaitForTerminalExitRequest::new(self.session.clone(), id.to_string());
            Ok(exit(ask(&self.cx, &self.drain, request).await?.exit_status))
        })
    }

    fn kill<'a>(&'a self, id: &'a str) -> BoxFuture<'a, std::io::Result<()>> {
        Box::pin(async move {
            let request = KillTerminalRequest::new(self.session.clone(), id.to_string());
            ask(&self.cx, &self.drain, request).await.map(|_| ())
        })
    }

    fn release<'a>(&'a self, id: &'a str) -> BoxFuture<'a, std::io::Result<()>> {
        Box::pin(async move {
            let request = ReleaseTerminalRequest::new(self.session.clone(), id.to_string());
            ask(&self.cx, &self.drain, request).await.map(|_| ())
        })
    }
}
