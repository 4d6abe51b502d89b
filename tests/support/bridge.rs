//! End-to-end support for `pincer acp --connect`: an editor (the test, over
//! ACP on stdio pipes) drives the bridge, which reaches a real `pincer
//! gateway` (with the mock model behind it) over a real socket. The bridge
//! and the gateway each have a sandbox of their own (home, working
//! directory), as two machines would. A [`Proxy`] between them can cut the
//! line to test reconnects.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tokio::net::{TcpListener, TcpStream};
use tokio::process::Command;
use tokio::task::JoinHandle;

use super::acp_client::{Acp, Sandbox, TIMEOUT};
use super::gateway::Gateway;
use super::mock_model::MockModel;

/// `pincer acp --connect URL --protocol openclaw --token-file FILE
/// <extra>` in `sandbox` (the bridge over OpenClaw's gateway protocol,
/// which a pincer gateway speaks too); the token sits in a file of the
/// sandbox, never on the command line.
pub fn bridge_command(sandbox: &Sandbox, url: &str, token: &str, extra: &[&str]) -> Command {
    connect_command(
        sandbox,
        url,
        token,
        &[&["--protocol", "openclaw"], extra].concat(),
    )
}

/// `pincer acp --connect URL --token-file FILE <extra>` in `sandbox`.
pub fn connect_command(sandbox: &Sandbox, url: &str, token: &str, extra: &[&str]) -> Command {
    let file = sandbox.dir.path().join("gateway-token");
    std::fs::write(&file, token).unwrap();
    let file = file.display().to_string();
    let mut args = vec!["acp", "--connect", url, "--token-file", &file];
    args.extend_from_slice(extra);
    sandbox.command(&args)
}

/// Sends `initialize` and returns the whole response.
pub async fn initialize(acp: &mut Acp) -> Value {
    let id = acp
        .send(
            "initialize",
            json!({"protocolVersion": 1, "clientCapabilities": {"fs": {"readTextFile": true, "writeTextFile": true}, "terminal": true}, "clientInfo": {"name": "test", "version": "0"}}),
        )
        .await;
    acp.until_response(id).await.0
}

/// A port on loopback that nobody listens on (yet).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// `pincer gateway --port PORT` in `sandbox` with `token`, talking to
/// `mock`: a gateway that can be stopped and started again at the same
/// address.
pub async fn gateway_on(sandbox: &Sandbox, mock: &MockModel, token: &str, port: u16) -> Gateway {
    let port = port.to_string();
    let mut cmd = sandbox.command(&["gateway", "--port", &port]);
    cmd.env("ANTHROPIC_API_KEY", "test-key")
        .env("ANTHROPIC_BASE_URL", mock.anthropic_url())
        .env("PINCER_GATEWAY_TOKEN", token)
        .stdin(std::process::Stdio::null());
    Gateway::spawn(cmd, Some(token)).await
}

/// One test's two machines: the gateway's (with the mock model) and the
/// editor's (running the bridge).
pub struct Remote {
    /// The gateway's machine: its home and the directory sessions work in.
    pub server: Sandbox,
    /// The editor's machine.
    pub editor: Sandbox,
    pub mock: MockModel,
    pub gateway: Gateway,
    pub acp: Acp,
}

impl Remote {
    /// A gateway and a bridge to it, initialized.
    pub async fn start() -> Self {
        Self::start_with(&[]).await
    }

    pub async fn start_with(extra: &[&str]) -> Self {
        let server = Sandbox::new();
        let editor = Sandbox::new();
        let mock = MockModel::start().await;
        let gateway = Gateway::start(&server, &mock).await;
        let token = gateway.token.clone().unwrap();
        let mut acp = Acp::spawn(bridge_command(&editor, &gateway.url(), &token, extra));
        let response = initialize(&mut acp).await;
        assert!(
            response.get("error").is_none(),
            "the bridge refused initialize: {response}\ngateway stderr:\n{}",
            gateway.stderr.text()
        );
        Self {
            server,
            editor,
            mock,
            gateway,
            acp,
        }
    }

    /// `session/new` from the editor's directory; the whole result.
    pub async fn new_session(&mut self) -> Value {
        let cwd = self.editor.work();
        let id = self
            .acp
            .send("session/new", json!({"cwd": cwd, "mcpServers": []}))
            .await;
        let (response, _) = self.acp.until_response(id).await;
        assert!(
            response.get("error").is_none(),
            "session/new failed: {response}\ngateway stderr:\n{}",
            self.gateway.stderr.text()
        );
        response["result"].clone()
    }

    /// A new session's id.
    pub async fn session(&mut self) -> String {
        self.new_session().await["sessionId"]
            .as_str()
            .unwrap()
            .to_string()
    }

    /// Another bridge to the same gateway, initialized.
    pub async fn another_bridge(&self, extra: &[&str]) -> Acp {
        let token = self.gateway.token.clone().unwrap();
        let mut acp = Acp::spawn(bridge_command(
            &self.editor,
            &self.gateway.url(),
            &token,
            extra,
        ));
        let response = initialize(&mut acp).await;
        assert!(response.get("error").is_none(), "{response}");
        acp
    }

    /// The user text of model request `index`.
    pub fn user_text(&self, index: usize) -> Vec<Value> {
        let body = &self.mock.requests()[index].body;
        let messages = body["messages"].as_array().unwrap();
        messages
            .iter()
            .filter(|m| m["role"] == "user")
            .map(|m| super::without_time_lines(&m["content"]))
            .collect()
    }
}

/// The relays a [`Proxy`] runs, each with its frozen flag.
type Relays = Arc<Mutex<Vec<(JoinHandle<()>, Arc<std::sync::atomic::AtomicBool>)>>>;

/// A TCP relay on a loopback port to `target`, which a test can cut (every
/// open connection dropped at once) to play a network failure.
pub struct Proxy {
    pub port: u16,
    /// Each open relay, and whether it is frozen.
    connections: Relays,
    /// While set, new connections are closed as soon as they come.
    held: Arc<std::sync::atomic::AtomicBool>,
    /// Connections accepted so far.
    pub accepted: Arc<std::sync::atomic::AtomicUsize>,
    /// Every byte the target sent back, over all connections (websocket
    /// frames from a server are not masked: their text shows as it is).
    pub downstream: Arc<Mutex<Vec<u8>>>,
    _accept: JoinHandle<()>,
}

impl Proxy {
    pub async fn start(target: std::net::SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let connections: Relays = Arc::default();
        let held: Arc<std::sync::atomic::AtomicBool> = Arc::default();
        let accepted: Arc<std::sync::atomic::AtomicUsize> = Arc::default();
        let open = connections.clone();
        let (hold, count) = (held.clone(), accepted.clone());
        let downstream: Arc<Mutex<Vec<u8>>> = Arc::default();
        let heard = downstream.clone();
        let accept = tokio::spawn(async move {
            while let Ok((mut inbound, _)) = listener.accept().await {
                count.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                if hold.load(std::sync::atomic::Ordering::SeqCst) {
                    drop(inbound);
                    continue;
                }
                let frozen: Arc<std::sync::atomic::AtomicBool> = Arc::default();
                let ice = frozen.clone();
                let heard = heard.clone();
                let relay = tokio::spawn(async move {
                    let Ok(outbound) = TcpStream::connect(target).await else {
                        return;
                    };
                    relay(&mut inbound, outbound, ice, heard).await;
                });
                open.lock().unwrap().push((relay, frozen));
            }
        });
        Self {
            port,
            connections,
            held,
            accepted,
            downstream,
            _accept: accept,
        }
    }

    pub fn url(&self) -> String {
        format!("ws://127.0.0.1:{}/", self.port)
    }

    /// Refuses (`true`) or lets through (`false`) new connections.
    pub fn hold(&self, held: bool) {
        self.held.store(held, std::sync::atomic::Ordering::SeqCst);
    }

    /// Drops every connection open now (both ends see a reset or EOF).
    pub fn cut(&self) -> usize {
        let open = std::mem::take(&mut *self.connections.lock().unwrap());
        let live = open.iter().filter(|(c, _)| !c.is_finished()).count();
        for (relay, _) in open {
            relay.abort();
        }
        live
    }

    /// Makes every connection open now a black hole: the sockets stay
    /// open, nothing more gets through either way (a network that went
    /// silent without a reset). New connections are not affected.
    pub fn freeze(&self) -> usize {
        let open = self.connections.lock().unwrap();
        let mut live = 0;
        for (relay, frozen) in open.iter() {
            if !relay.is_finished() {
                frozen.store(true, std::sync::atomic::Ordering::SeqCst);
                live += 1;
            }
        }
        live
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self._accept.abort();
        self.cut();
    }
}

/// Copies bytes both ways until either side closes; once `frozen`, reads
/// are dropped and the sockets are held open until the task is aborted.
async fn relay(
    inbound: &mut TcpStream,
    mut outbound: TcpStream,
    frozen: Arc<std::sync::atomic::AtomicBool>,
    heard: Arc<Mutex<Vec<u8>>>,
) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (mut a, mut b) = ([0u8; 16 * 1024], [0u8; 16 * 1024]);
    loop {
        let (read, to_outbound) = tokio::select! {
            n = inbound.read(&mut a) => (n, true),
            n = outbound.read(&mut b) => (n, false),
        };
        let n = match read {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        if frozen.load(std::sync::atomic::Ordering::SeqCst) {
            std::future::pending::<()>().await;
        }
        let written = if to_outbound {
            outbound.write_all(&a[..n]).await
        } else {
            heard.lock().unwrap().extend_from_slice(&b[..n]);
            inbound.write_all(&b[..n]).await
        };
        if written.is_err() {
            return;
        }
    }
}

/// The text of every `agent_message_chunk` among `messages`, joined.
pub fn streamed_text(messages: &[Value]) -> String {
    super::acp_client::updates_of(messages)
        .iter()
        .filter(|u| u["sessionUpdate"] == "agent_message_chunk")
        .filter_map(|u| u["content"]["text"].as_str())
        .collect()
}

/// A path in the gateway's working directory.
pub fn server_file(remote: &Remote, name: &str) -> PathBuf {
    remote.server.work().join(name)
}

/// How long the tests wait for anything.
pub const WAIT: std::time::Duration = TIMEOUT;

/// `session/new` on `acp` from `cwd`; the whole response (a test of a
/// refusal reads its error).
pub async fn session_new(acp: &mut Acp, cwd: &std::path::Path) -> Value {
    let id = acp
        .send("session/new", json!({"cwd": cwd, "mcpServers": []}))
        .await;
    acp.until_response(id).await.0
}

/// One whole turn on `key` run by a gateway client (not the bridge): the
/// mock model answers `answer`; returns the run id once its `final` came.
pub async fn turn_on(
    client: &mut super::gateway::Client,
    mock: &MockModel,
    key: &str,
    message: &str,
    answer: &str,
) -> String {
    mock.push(super::mock_model::Reply::sse(super::sse::anthropic_text(
        answer, 10,
    )));
    let run = client.chat_send(key, message).await;
    let end = client.chat_end(&run).await;
    assert_eq!(end["payload"]["state"], "final", "{end}");
    run
}

/// A certificate authority made for one test, and a server certificate it
/// signed for `localhost`.
pub struct TestCa {
    /// The CA's certificate, PEM: what `SSL_CERT_FILE` points at.
    pub ca_pem: String,
    pub chain: Vec<rustls::pki_types::CertificateDer<'static>>,
    pub key: rustls::pki_types::PrivateKeyDer<'static>,
    /// The server's certificate and its key, PEM, for servers that read
    /// files (PostgreSQL, NATS).
    pub cert_pem: String,
    pub key_pem: String,
}

impl TestCa {
    pub fn new() -> Self {
        Self::named("pincer test CA")
    }

    /// A CA whose name is `name` (two CAs of one name would make a
    /// verifier try the wrong one's key).
    pub fn named(name: &str) -> Self {
        Self::signing_with(name, &rcgen::PKCS_ECDSA_P256_SHA256)
    }

    /// A CA named `name` whose key (and so whose signature on the server's
    /// certificate) is of `algorithm`.
    pub fn signing_with(name: &str, algorithm: &'static rcgen::SignatureAlgorithm) -> Self {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, name);
        params.key_usages = vec![
            rcgen::KeyUsagePurpose::KeyCertSign,
            rcgen::KeyUsagePurpose::CrlSign,
            rcgen::KeyUsagePurpose::DigitalSignature,
        ];
        let ca_key = rcgen::KeyPair::generate_for(algorithm).unwrap();
        let ca = rcgen::CertifiedIssuer::self_signed(params, ca_key).unwrap();
        let mut leaf = rcgen::CertificateParams::new(vec!["localhost".to_string()]).unwrap();
        leaf.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
        let leaf_key = rcgen::KeyPair::generate().unwrap();
        let leaf = leaf.signed_by(&leaf_key, &ca).unwrap();
        Self {
            ca_pem: ca.pem(),
            cert_pem: leaf.pem(),
            key_pem: leaf_key.serialize_pem(),
            chain: vec![leaf.der().clone(), ca.der().clone()],
            key: rustls::pki_types::PrivateKeyDer::Pkcs8(
                rustls::pki_types::PrivatePkcs8KeyDer::from(leaf_key.serialize_der()),
            ),
        }
    }
}

/// A TLS-terminating relay on loopback in front of `target` (a plain
/// `ws://` gateway): what a reverse proxy with a certificate does. It
/// keeps the plaintext clients sent through it and the handshakes that
/// failed, so a test can tell what reached the gateway.
pub struct TlsRelay {
    pub port: u16,
    /// Every byte clients sent, decrypted.
    pub plaintext: Arc<Mutex<Vec<u8>>>,
    /// Why each failed handshake failed.
    pub refused: Arc<Mutex<Vec<String>>>,
    _accept: JoinHandle<()>,
}

impl TlsRelay {
    pub async fn start(target: std::net::SocketAddr, ca: &TestCa) -> Self {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(ca.chain.clone(), ca.key.clone_key())
            .unwrap();
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let plaintext: Arc<Mutex<Vec<u8>>> = Arc::default();
        let refused: Arc<Mutex<Vec<String>>> = Arc::default();
        let (seen, failures) = (plaintext.clone(), refused.clone());
        let accept = tokio::spawn(async move {
            while let Ok((inbound, _)) = listener.accept().await {
                let (acceptor, seen, failures) = (acceptor.clone(), seen.clone(), failures.clone());
                tokio::spawn(async move {
                    let tls = match acceptor.accept(inbound).await {
                        Ok(tls) => tls,
                        Err(e) => {
                            failures.lock().unwrap().push(e.to_string());
                            return;
                        }
                    };
                    let Ok(outbound) = TcpStream::connect(target).await else {
                        return;
                    };
                    let (mut from_client, mut to_client) = tokio::io::split(tls);
                    let (mut from_gateway, mut to_gateway) = outbound.into_split();
                    let down = tokio::spawn(async move {
                        let _ = tokio::io::copy(&mut from_gateway, &mut to_client).await;
                        let _ = tokio::io::AsyncWriteExt::shutdown(&mut to_client).await;
                    });
                    let mut buf = vec![0u8; 16 * 1024];
                    loop {
                        use tokio::io::{AsyncReadExt, AsyncWriteExt};
                        let n = match from_client.read(&mut buf).await {
                            Ok(0) | Err(_) => break,
                            Ok(n) => n,
                        };
                        seen.lock().unwrap().extend_from_slice(&buf[..n]);
                        if to_gateway.write_all(&buf[..n]).await.is_err() {
                            break;
                        }
                    }
                    let _ = tokio::io::AsyncWriteExt::shutdown(&mut to_gateway).await;
                    let _ = down.await;
                });
            }
        });
        Self {
            port,
            plaintext,
            refused,
            _accept: accept,
        }
    }

    /// The relay's address, by the name its certificate carries.
    pub fn url(&self) -> String {
        format!("wss://localhost:{}/", self.port)
    }

    /// What clients sent through it, as text (lossy).
    pub fn plaintext_text(&self) -> String {
        String::from_utf8_lossy(&self.plaintext.lock().unwrap()).into_owned()
    }
}
