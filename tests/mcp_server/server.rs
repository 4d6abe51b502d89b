//! A small MCP server for pincer's tests, built on `rmcp`: stdio by
//! default, streamable HTTP with `--http ADDR` (it prints its URL on the
//! first line of stdout). `--pid-file PATH` writes its pid and the pid of
//! a `sleep` child it starts (to check that the whole process group ends);
//! `--starts-file PATH` appends its pid, one line per start; `--hang`
//! never answers the handshake.
//!
//! Tools: `echo` (read-only), `add_note` (text and a resource link),
//! `image`, `fail` (an `isError` result), `slow` (sleeps `seconds`),
//! `crash` (exits the process), `add_tool` (adds `extra` and announces
//! `notifications/tools/list_changed`).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stdout)]

use std::sync::{Arc, Mutex};

use rmcp::model::SubscriptionFilter;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ErrorData, ListToolsResult,
    PaginatedRequestParams, ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::{RequestContext, SubscriptionContext, SubscriptionSink};
use rmcp::{RoleServer, ServerHandler, ServiceExt};
use serde_json::{Value, json};

/// A 1×1 transparent PNG.
const PIXEL: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR4nGNgYGBgAAAABQABpfZFQAAAAABJRU5ErkJggg==";

#[derive(Clone)]
struct TestServer {
    tools: Arc<Mutex<Vec<Value>>>,
    notes: Arc<Mutex<u32>>,
    /// Clients listening for list changes (protocol 2026-07-28).
    listeners: Arc<Mutex<Vec<SubscriptionSink>>>,
}

fn tool(name: &str, description: &str, properties: Value, annotations: Value) -> Value {
    json!({
        "name": name,
        "description": description,
        "inputSchema": {"type": "object", "properties": properties},
        "annotations": annotations,
    })
}

impl TestServer {
    fn new() -> Self {
        let tools = vec![
            tool(
                "echo",
                "Echo the text back",
                json!({"text": {"type": "string"}}),
                json!({"title": "Echo", "readOnlyHint": true}),
            ),
            tool(
                "add_note",
                "Save a note",
                json!({"text": {"type": "string"}}),
                json!({"title": "Add note", "readOnlyHint": false}),
            ),
            tool(
                "image",
                "Return an image",
                json!({}),
                json!({"readOnlyHint": true}),
            ),
            tool(
                "fail",
                "Always fails",
                json!({}),
                json!({"readOnlyHint": true}),
            ),
            tool(
                "slow",
                "Sleep for a while",
                json!({"seconds": {"type": "number"}}),
                json!({"readOnlyHint": true}),
            ),
            tool(
                "crash",
                "Exit the server",
                json!({}),
                json!({"readOnlyHint": true}),
            ),
            tool(
                "read_file",
                "Read a file",
                json!({"path": {"type": "string"}}),
                json!({"readOnlyHint": true}),
            ),
            tool(
                "write_file",
                "Write a file",
                json!({"path": {"type": "string"}, "text": {"type": "string"}}),
                json!({"readOnlyHint": false}),
            ),
            tool(
                "add_tool",
                "Add the `extra` tool",
                json!({}),
                json!({"readOnlyHint": true}),
            ),
        ];
        Self {
            tools: Arc::new(Mutex::new(tools)),
            notes: Arc::new(Mutex::new(0)),
            listeners: Arc::new(Mutex::new(Vec::new())),
        }
    }
}

fn result(value: Value) -> Result<CallToolResponse, ErrorData> {
    let result: CallToolResult = serde_json::from_value(value).unwrap();
    Ok(result.into())
}

fn text(text: &str) -> Value {
    json!({"content": [{"type": "text", "text": text}]})
}

impl ServerHandler for TestServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_tool_list_changed()
                .build(),
        )
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        Some(requested.clone())
    }

    async fn listen(&self, context: SubscriptionContext) -> Result<(), ErrorData> {
        self.listeners.lock().unwrap().push(context.sink().clone());
        context.cancelled().await;
        Ok(())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let tools: Vec<Tool> = self
            .tools
            .lock()
            .unwrap()
            .iter()
            .map(|t| serde_json::from_value(t.clone()).unwrap())
            .collect();
        Ok(serde_json::from_value(json!({ "tools": tools })).unwrap())
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let args = Value::Object(request.arguments.clone().unwrap_or_default());
        match request.name.as_ref() {
            "echo" => result(text(&format!(
                "echo: {}",
                args["text"].as_str().unwrap_or_default()
            ))),
            "add_note" => {
                let n = {
                    let mut notes = self.notes.lock().unwrap();
                    *notes += 1;
                    *notes
                };
                result(json!({"content": [
                    {"type": "text", "text": format!("saved note {n}: {}", args["text"].as_str().unwrap_or_default())},
                    {"type": "resource_link", "uri": format!("note://{n}"), "name": format!("note {n}"), "mimeType": "text/plain"},
                ]}))
            }
            "image" => result(json!({"content": [
                {"type": "image", "data": PIXEL, "mimeType": "image/png"},
            ]})),
            "fail" => result(json!({
                "content": [{"type": "text", "text": "the tool failed on purpose"}],
                "isError": true,
            })),
            "slow" => {
                let seconds = args["seconds"].as_f64().unwrap_or(30.0);
                tokio::time::sleep(std::time::Duration::from_secs_f64(seconds)).await;
                result(text("done sleeping"))
            }
            "crash" => std::process::exit(3),
            // What the server's process may touch: the sandbox tests
            // confine it.
            "read_file" => {
                let path = args["path"].as_str().unwrap_or_default();
                match std::fs::read_to_string(path) {
                    Ok(content) => result(text(&content)),
                    Err(e) => result(json!({
                        "content": [{"type": "text", "text": format!("cannot read {path}: {e}")}],
                        "isError": true,
                    })),
                }
            }
            "write_file" => {
                let path = args["path"].as_str().unwrap_or_default();
                let content = args["text"].as_str().unwrap_or_default();
                match std::fs::write(path, content) {
                    Ok(()) => result(text(&format!("wrote {path}"))),
                    Err(e) => result(json!({
                        "content": [{"type": "text", "text": format!("cannot write {path}: {e}")}],
                        "isError": true,
                    })),
                }
            }
            "add_tool" => {
                self.tools.lock().unwrap().push(tool(
                    "extra",
                    "A tool added at run time",
                    json!({}),
                    json!({"readOnlyHint": true}),
                ));
                // Listening clients hear it on their subscription; older
                // ones as a plain notification.
                let listeners = self.listeners.lock().unwrap().clone();
                if listeners.is_empty() {
                    context.peer.notify_tool_list_changed().await.unwrap();
                }
                for listener in listeners {
                    let _ = listener.notify_tool_list_changed().await;
                }
                result(text("added the extra tool"))
            }
            "extra" => result(text("extra ran")),
            other => Err(ErrorData::invalid_params(format!("no tool {other}"), None)),
        }
    }
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let value = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1).cloned())
    };
    if let Some(path) = value("--pid-file") {
        // Left to run: the test checks that ending the server's process
        // group ends it too.
        #[allow(clippy::zombie_processes)]
        let child = std::process::Command::new("sleep")
            .arg("300")
            .spawn()
            .unwrap();
        std::fs::write(&path, format!("{} {}\n", std::process::id(), child.id())).unwrap();
    }
    if let Some(path) = value("--starts-file") {
        // One line per start: the sharing test counts the processes pincer
        // started for a configuration.
        use std::io::Write;
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&path)
            .unwrap();
        writeln!(file, "{}", std::process::id()).unwrap();
    }
    if args.iter().any(|a| a == "--hang") {
        tokio::time::sleep(std::time::Duration::from_secs(300)).await;
        return;
    }
    let server = TestServer::new();
    match value("--http") {
        None => {
            let running = server.serve(rmcp::transport::stdio()).await.unwrap();
            let _ = running.waiting().await;
        }
        Some(addr) => {
            use rmcp::transport::streamable_http_server::{
                StreamableHttpServerConfig, StreamableHttpService,
                session::local::LocalSessionManager,
            };
            let service = StreamableHttpService::new(
                move || Ok(server.clone()),
                Arc::new(LocalSessionManager::default()),
                StreamableHttpServerConfig::default(),
            );
            let router = axum::Router::new().nest_service("/mcp", service);
            let listener = tokio::net::TcpListener::bind(&addr).await.unwrap();
            let url = format!("http://{}/mcp", listener.local_addr().unwrap());
            println!("{url}");
            use std::io::Write;
            std::io::stdout().flush().unwrap();
            axum::serve(listener, router).await.unwrap();
        }
    }
}
