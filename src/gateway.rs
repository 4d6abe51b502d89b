//! The websocket gateway: OpenClaw's gateway protocol (version 4) in front
//! of pincer's sessions, for clients that are not an editor on stdio (the
//! `openclaw acp` bridge, web pages, chat channels, scripts).
//!
//! It listens on loopback unless told otherwise, and every client proves
//! the user's credential in its first frame before anything else happens.
//! Checks that need no websocket (a credential in the URL, a foreign
//! browser origin, too many connections) refuse the HTTP upgrade itself.
//! Strangers cost little: a TCP connection is counted (and refused over
//! its caps) the moment it is accepted, a request has deadlines for its
//! head and its body, and a websocket that has not authenticated holds a
//! place among the unauthenticated only (see `peers`).
//! docs/gateway.md describes the protocol as served here.

mod acp_socket;
mod auth;
pub mod channels;
pub mod client;
mod conn;
mod connection;
mod control_ui;
mod frames;
mod guard;
mod hub;
mod link;
pub mod logs;
mod methods;
mod peers;
pub mod protocol;
pub mod schedule;
pub mod scheduler;
mod usage;
mod web;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::{ConnectInfo, Request, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};

use crate::acp::registry::Registry;
use crate::config::Settings;
use crate::config::gateway::{AuthMode, GatewayConfig, is_loopback};

pub use auth::{create_token, is_placeholder};

/// Query parameters that would carry a credential in a URL.
const CREDENTIAL_PARAMS: &[&str] = &[
    "token",
    "password",
    "auth",
    "access_token",
    "api_key",
    "key",
];

/// Whether a URL query parameter of this name would carry a credential.
pub fn is_credential_param(name: &str) -> bool {
    CREDENTIAL_PARAMS.contains(&name.to_ascii_lowercase().as_str())
}

/// What the command line says (it wins over `[gateway]`).
#[derive(Clone, Debug, Default)]
pub struct Options {
    pub bind: Option<String>,
    pub port: Option<u16>,
    /// `--model` of `pincer acp` / `pincer gateway`.
    pub model: Option<String>,
    /// `--store`: the cluster's database (else `[cluster] store`).
    pub store: Option<String>,
    /// `--bus`: the cluster's NATS server (else `[cluster] bus`).
    pub bus: Option<String>,
}

/// A running gateway.
pub struct Running {
    pub address: SocketAddr,
    pub task: tokio::task::JoinHandle<()>,
    hub: Arc<hub::Hub>,
}

impl Running {
    /// Writes what is still only in memory (the session keys' latest
    /// changes), before the process exits.
    pub fn flush(&self) {
        self.hub.write_keys();
    }
}

struct Gateway {
    config: GatewayConfig,
    credential: auth::Credential,
    limiter: auth::Limiter,
    hub: Arc<hub::Hub>,
    /// The chat channels, for their webhooks.
    channels: channels::runner::Channels,
    /// `[gateway] trusted_proxies`.
    proxies: peers::Proxies,
    /// TCP connections that are not a websocket (yet).
    pending: Arc<peers::Caps>,
    /// Websockets that have not authenticated.
    preauth: Arc<peers::Caps>,
    /// Authenticated clients.
    authenticated: Arc<peers::Caps>,
    /// `--model`: the model sessions opened over `/acp` start with.
    model: Option<String>,
    /// `[gateway] control_ui`: OpenClaw's Control UI, served at `/`.
    control_ui: Option<Arc<control_ui::ControlUi>>,
}

/// Starts the gateway of this process over `registry` (the sessions it
/// shares with an editor's connection, if any). Errors are sentences for
/// the user.
pub async fn start(options: Options, registry: Arc<Registry>) -> Result<Running, String> {
    let cwd = std::env::current_dir().map_err(|e| format!("no working directory: {e}"))?;
    let settings = Settings::load_from_process(&cwd).map_err(|e| e.to_string())?;
    let config = settings.config.gateway.clone().unwrap_or_default();
    let bind = options
        .bind
        .clone()
        .unwrap_or_else(|| config.bind().to_string());
    let port = options.port.unwrap_or_else(|| config.port());
    let loopback = is_loopback(&bind);
    // The process's own environment: an empty variable counts as set.
    let env = |key: &str| std::env::var(key).ok();
    let (credential, source) = auth::resolve(&config, &settings.paths.config_dir, &env, &bind)?;
    let proxies = peers::Proxies::parse(&config.trusted_proxies)?;
    match &source {
        auth::Source::Created(file) => eprintln_log(&format!(
            "created a gateway token in {} (readable by you alone); clients send it in their `connect`",
            file.display()
        )),
        auth::Source::Env(var) => {
            tracing::info!("the gateway {} comes from ${var}", credential.mode.as_str())
        }
        auth::Source::File(file) => tracing::info!(
            "the gateway {} comes from {}",
            credential.mode.as_str(),
            file.display()
        ),
    }
    if !loopback {
        eprintln_log(&format!(
            "warning: listening on {bind}, beyond this machine, over plain ws://; put TLS in front of it (a reverse proxy such as Caddy or nginx) before using it across a network"
        ));
    }
    let host = bind
        .trim_start_matches('[')
        .trim_end_matches(']')
        .to_string();
    let listener = tokio::net::TcpListener::bind((host.as_str(), port))
        .await
        .map_err(|e| format!("cannot listen on {bind}:{port}: {e}"))?;
    let address = listener
        .local_addr()
        .map_err(|e| format!("cannot listen on {bind}:{port}: {e}"))?;
    let sessions_cwd = config.cwd.clone().unwrap_or(cwd);
    logs::open(&settings.paths.data_dir);
    let hub = hub::Hub::new(
        registry,
        sessions_cwd,
        settings.paths.data_dir.clone(),
        Duration::from_secs(config.approval_timeout_secs()),
    );
    hub.start(options.model.clone()).await?;
    hub.unload_idle_after(Duration::from_secs(config.session_idle_secs()));
    let cluster = crate::cluster::join(
        &settings.config.cluster,
        options.store.as_deref(),
        options.bus.as_deref(),
    )
    .await?;
    if let Some(joined) = &cluster.joined {
        eprintln_log(&format!("cluster: {joined}"));
    }
    if let Some(sessions) = cluster.sessions {
        hub.use_store(sessions, &cluster.replica, cluster.lease);
    }
    if let Some(bus) = cluster.bus {
        hub.join_bus(bus).await?;
    }
    // In a cluster, a channel's receiving waits for its lease.
    let shared = cluster.joined.is_some().then(|| channels::runner::Shared {
        claims: cluster.claims.clone(),
        every: cluster.lease.div_f32(3.0),
    });
    let built = channels::build(&settings.config.channels, &env, &settings.paths.data_dir);
    let channels = channels::runner::start(&hub, built, shared);
    let _ = hub.channels.set(Arc::new(channels.clone()));
    for name in channels.names() {
        eprintln_log(&format!("channel {name} started"));
    }
    let plan = Arc::new(scheduler::Plan::new(
        &settings.config.cron,
        settings.config.heartbeat.as_ref(),
        &settings.paths.config_dir,
        &settings.paths.data_dir,
    ));
    let _ = hub.scheduled.set(plan.clone());
    scheduler::start(&hub, channels.clone(), plan, cluster.claims);
    let control_ui = match &config.control_ui {
        None => None,
        Some(path) => {
            let path = if path.is_relative() {
                settings.paths.config_dir.join(path)
            } else {
                path.clone()
            };
            Some(Arc::new(control_ui::ControlUi::load(&path)?))
        }
    };
    let gateway = Arc::new(Gateway {
        control_ui,
        channels,
        limiter: auth::Limiter::new(
            config.auth_failures(),
            config.auth_failures_global(),
            Duration::from_secs(config.auth_lockout_secs()),
        ),
        credential,
        hub: hub.clone(),
        proxies,
        pending: peers::Caps::new(
            config.max_pending_connections(),
            config.max_pending_connections_per_ip(),
        ),
        preauth: peers::Caps::new(
            config.max_preauth_connections(),
            config.max_preauth_connections_per_ip(),
        ),
        authenticated: peers::Caps::new(config.max_connections(), config.max_connections_per_ip()),
        model: options.model.clone(),
        config,
    });
    let gateway_config_handshake = gateway.config.handshake_timeout_ms();
    let tick = Duration::from_millis(gateway.config.tick_interval_ms());
    let ticker = hub.clone();
    tokio::spawn(async move {
        let mut interval = tokio::time::interval(tick);
        interval.tick().await;
        loop {
            interval.tick().await;
            ticker.tick();
        }
    });
    let app = axum::Router::new()
        .fallback(upgrade)
        .with_state(gateway.clone());
    let header_timeout = Duration::from_millis(gateway_config_handshake);
    let task = tokio::spawn(accept(listener, app, gateway, header_timeout));
    eprintln_log(&format!("listening on ws://{address}"));
    Ok(Running { address, task, hub })
}

/// Accepts connections and serves HTTP/1 on each, with a deadline for the
/// request head: a peer that opens a connection and never finishes its
/// request (slowloris) is dropped instead of holding a slot. A connection
/// over the caps of `pending` is closed as soon as it is accepted: a
/// descriptor is what silent connections exhaust, before any byte.
async fn accept(
    listener: tokio::net::TcpListener,
    app: axum::Router,
    gateway: Arc<Gateway>,
    header_timeout: Duration,
) {
    loop {
        let (stream, peer) = match listener.accept().await {
            Ok(accepted) => accepted,
            Err(e) => {
                // Out of file descriptors and the like: wait, then go on.
                tracing::warn!(error = %e, "cannot accept a gateway connection");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        // A trusted proxy carries many clients; which one is known only
        // from its request, so here it counts in the total alone.
        let key = (!gateway.proxies.trusts(peer.ip())).then(|| peers::limit_key(peer.ip()));
        let Some(pending) = gateway.pending.take(key) else {
            tracing::debug!(peer = %peer.ip(), "too many pending gateway connections; closed one at once");
            drop(stream);
            continue;
        };
        // Each event is a small frame that should leave at once: without
        // this, Nagle's algorithm holds a frame back until the client's
        // delayed acknowledgement of the previous one (up to 40 ms).
        if let Err(e) = stream.set_nodelay(true) {
            tracing::debug!(error = %e, "cannot set TCP_NODELAY on a gateway connection");
        }
        let app = app.clone();
        tokio::spawn(async move {
            let service = hyper::service::service_fn(
                move |mut request: hyper::Request<hyper::body::Incoming>| {
                    request.extensions_mut().insert(ConnectInfo(peer));
                    let mut app = app.clone();
                    tower_service::Service::call(&mut app, request.map(axum::body::Body::new))
                },
            );
            let served = hyper::server::conn::http1::Builder::new()
                .timer(hyper_util::rt::TokioTimer::new())
                .header_read_timeout(header_timeout)
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                .with_upgrades()
                .await;
            // Upgraded or closed: either way no longer pending.
            drop(pending);
            if let Err(e) = served {
                tracing::debug!(error = %e, "a gateway connection ended");
            }
        });
    }
}

/// A line for the person who started pincer, on stderr (stdout may be an
/// editor's protocol).
pub(crate) fn eprintln_log(line: &str) {
    use std::io::Write;
    let _ = writeln!(std::io::stderr(), "pincer gateway: {line}");
    logs::write("info", "gateway", line);
}

/// `pincer gateway`: serves until interrupted.
pub async fn serve(options: Options) -> Result<(), String> {
    let mut running = start(options, Registry::new()).await?;
    let stopped = tokio::select! {
        _ = &mut running.task => Err("the gateway stopped".to_string()),
        _ = shutdown_signal() => Ok(()),
    };
    running.flush();
    stopped
}

async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        if let Ok(mut term) = signal(SignalKind::terminate()) {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
            return;
        }
    }
    let _ = tokio::signal::ctrl_c().await;
}

/// `pincer gateway token`: a new token in the default file.
pub fn new_token(
    config_dir: &std::path::Path,
    config: &GatewayConfig,
) -> Result<(PathBuf, crate::llm::Secret), String> {
    let file = config.credential_file(config_dir);
    if config.auth() == AuthMode::Password {
        return Err("auth = \"password\" is configured; a token would not be used".to_string());
    }
    let token = create_token(&file)?;
    Ok((file, token))
}

/// Every HTTP request: a websocket upgrade after the checks that need no
/// websocket, anything else a pointer to what this port is.
async fn upgrade(
    State(gateway): State<Arc<Gateway>>,
    ConnectInfo(peer): ConnectInfo<SocketAddr>,
    mut request: Request,
) -> Response {
    // A chat platform's webhook: no gateway client, checked by the
    // platform's own signature or secret.
    if let Some(rest) = request.uri().path().strip_prefix("/channels/") {
        let (name, path) = rest.split_once('/').map_or((rest, ""), |(n, p)| (n, p));
        let Some(platform) = gateway.channels.platform(name) else {
            return (StatusCode::NOT_FOUND, "no such channel\n").into_response();
        };
        let path = format!("/{path}");
        let method = request.method().clone();
        let query = request.uri().query().map(String::from);
        let headers = request.headers().clone();
        if let Some(answer) = platform.check_head(&method, &path, &headers) {
            return webhook_response(answer);
        }
        // The whole body within one deadline, however it trickles in: a
        // read timeout alone would let a byte a second hold it for ever.
        let deadline = Duration::from_millis(gateway.config.request_timeout_ms());
        let read = axum::body::to_bytes(request.into_body(), channels::WEBHOOK_MAX_BODY);
        let body = match tokio::time::timeout(deadline, read).await {
            Ok(Ok(body)) => body,
            Ok(Err(_)) => return (StatusCode::PAYLOAD_TOO_LARGE, "too large\n").into_response(),
            Err(_) => {
                tracing::debug!(peer = %peer.ip(), "a webhook body did not arrive in time");
                let mut response = (
                    StatusCode::REQUEST_TIMEOUT,
                    "the body did not arrive in time\n",
                )
                    .into_response();
                response
                    .headers_mut()
                    .insert(header::CONNECTION, HeaderValue::from_static("close"));
                return response;
            }
        };
        let answer = platform
            .webhook(channels::WebhookRequest {
                method,
                path,
                query,
                headers,
                body,
            })
            .await;
        return webhook_response(answer);
    }
    let headers = request.headers();
    if let Some(query) = request.uri().query() {
        let leaks = url::form_urlencoded::parse(query.as_bytes())
            .any(|(name, _)| is_credential_param(&name));
        if leaks {
            tracing::warn!(peer = %peer.ip(), "refused a connection with a credential in its URL");
            return (
                StatusCode::BAD_REQUEST,
                "credentials never go in a URL (proxies and histories keep URLs); send them in the `connect` frame\n",
            )
                .into_response();
        }
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        let host = headers.get(header::HOST).and_then(|h| h.to_str().ok());
        let allowed = origin
            .to_str()
            .is_ok_and(|origin| origin_allowed(origin, host, &gateway.config.allowed_origins));
        if !allowed {
            tracing::warn!(peer = %peer.ip(), "refused a browser connection from a foreign origin");
            return (
                StatusCode::FORBIDDEN,
                "this page's origin may not use the gateway; add it to [gateway] allowed_origins to allow it\n",
            )
                .into_response();
        }
    }
    let acp = request.uri().path() == acp_socket::PATH;
    let Some(key) = websocket_key(headers) else {
        if acp {
            return acp_socket::not_websocket();
        }
        let get = matches!(
            *request.method(),
            axum::http::Method::GET | axum::http::Method::HEAD
        );
        // Not a websocket: OpenClaw's Control UI when the user asked for
        // it, else pincer's web chat page, for a browser.
        if get && let Some(ui) = &gateway.control_ui {
            let client = gateway.proxies.client(peer.ip(), headers);
            let offered = acp_socket::bearer(headers);
            let credential_ok = match offered {
                None => false,
                Some(_) if gateway.limiter.locked(client).is_some() => false,
                Some(_) => match gateway.credential.check(offered) {
                    Ok(()) => true,
                    Err(_) => {
                        gateway.limiter.failed(client);
                        false
                    }
                },
            };
            // Files are read off the runtime's threads.
            let (ui, path, headers) = (
                ui.clone(),
                request.uri().path().to_string(),
                headers.clone(),
            );
            return tokio::task::spawn_blocking(move || ui.serve(&path, &headers, credential_ok))
                .await
                .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response());
        }
        if get && let Some(page) = web::asset(request.uri().path()) {
            return page;
        }
        return (
            StatusCode::NOT_FOUND,
            "pincer gateway: the chat page is at /; clients connect with a websocket (ws://host:port/)\n",
        )
            .into_response();
    };
    // Behind a trusted proxy the client is the one its headers name.
    let client = gateway.proxies.client(peer.ip(), headers);
    if acp {
        return acp_upgrade(gateway, client, request, &key);
    }
    let Some(slot) = gateway.preauth.take(Some(peers::limit_key(client))) else {
        tracing::debug!(%client, "too many unauthenticated websockets; refused an upgrade");
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            "too many connections; try again later\n",
        )
            .into_response();
    };
    let accept = tokio_tungstenite::tungstenite::handshake::derive_accept_key(key.as_bytes());
    let on_upgrade = hyper::upgrade::on(&mut request);
    let max = gateway.config.max_payload();
    tokio::spawn(async move {
        let upgraded = match on_upgrade.await {
            Ok(upgraded) => upgraded,
            Err(e) => {
                tracing::debug!(error = %e, "a websocket upgrade failed");
                return;
            }
        };
        let budget = Arc::new(guard::Budget::default());
        let io = guard::Guarded::new(hyper_util::rt::TokioIo::new(upgraded), budget.clone());
        let socket = tokio_tungstenite::WebSocketStream::from_raw_socket(
            io,
            tokio_tungstenite::tungstenite::protocol::Role::Server,
            Some(socket_config(max)),
        )
        .await;
        connection::run(socket, budget, client, gateway, slot).await;
    });
    switching_protocols(&accept)
}

/// A server websocket's settings: frames up to `max` bytes, and small
/// buffers (a thousand idle clients must not cost 128 KiB each,
/// tungstenite's default). Frames wait in the write buffer until the
/// writer flushes the batch it has (`connection::WRITE_BATCH`), or the
/// buffer holds that much.
fn socket_config(max: usize) -> tokio_tungstenite::tungstenite::protocol::WebSocketConfig {
    tokio_tungstenite::tungstenite::protocol::WebSocketConfig::default()
        .max_message_size(Some(max))
        .max_frame_size(Some(max))
        .read_buffer_size(4 * 1024)
        .write_buffer_size(connection::WRITE_BATCH)
}

/// The `101` that completes a websocket upgrade, `accept` its
/// `Sec-WebSocket-Accept`.
fn switching_protocols(accept: &str) -> Response {
    let mut response = StatusCode::SWITCHING_PROTOCOLS.into_response();
    let headers = response.headers_mut();
    headers.insert(header::CONNECTION, HeaderValue::from_static("upgrade"));
    headers.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
    if let Ok(accept) = HeaderValue::from_str(accept) {
        headers.insert(header::SEC_WEBSOCKET_ACCEPT, accept);
    }
    response
}

/// `/acp`: the credential is checked on the upgrade request itself, then
/// the socket serves ACP (see [`acp_socket`]).
fn acp_upgrade(
    gateway: Arc<Gateway>,
    client: std::net::IpAddr,
    mut request: Request,
    key: &str,
) -> Response {
    let slot = match acp_socket::admit(&gateway, client, request.headers()) {
        Ok(slot) => slot,
        Err(refused) => return *refused,
    };
    let accept = tokio_tungstenite::tungstenite::handshake::derive_accept_key(key.as_bytes());
    let on_upgrade = hyper::upgrade::on(&mut request);
    let max = gateway.config.max_payload();
    let connection = uuid::Uuid::new_v4().to_string();
    tokio::spawn(async move {
        let upgraded = match on_upgrade.await {
            Ok(upgraded) => upgraded,
            Err(e) => {
                tracing::debug!(error = %e, "an ACP websocket upgrade failed");
                return;
            }
        };
        let socket = tokio_tungstenite::WebSocketStream::from_raw_socket(
            hyper_util::rt::TokioIo::new(upgraded),
            tokio_tungstenite::tungstenite::protocol::Role::Server,
            Some(socket_config(max)),
        )
        .await;
        let registry = gateway.hub.registry.clone();
        let cwd = gateway.hub.cwd.clone();
        let max_sessions = gateway.config.max_sessions_per_client();
        acp_socket::serve(
            socket,
            registry,
            gateway.model.clone(),
            cwd,
            max_sessions,
            slot,
        )
        .await;
    });
    let mut response = switching_protocols(&accept);
    if let Ok(id) = HeaderValue::from_str(&connection) {
        response.headers_mut().insert(acp_socket::CONNECTION_ID, id);
    }
    response
}

/// A platform's answer to its webhook as an HTTP response.
fn webhook_response(answer: channels::WebhookResponse) -> Response {
    Response::builder()
        .status(answer.status)
        .header(header::CONTENT_TYPE, answer.content_type)
        .body(axum::body::Body::from(answer.body))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

/// The key of a websocket upgrade request (RFC 6455 §4.2.1), if it is one.
fn websocket_key(headers: &HeaderMap) -> Option<String> {
    let has = |name: header::HeaderName, token: &str| {
        headers.get_all(name).iter().any(|value| {
            value.to_str().is_ok_and(|v| {
                v.split(',')
                    .any(|part| part.trim().eq_ignore_ascii_case(token))
            })
        })
    };
    if !has(header::UPGRADE, "websocket") || !has(header::CONNECTION, "upgrade") {
        return None;
    }
    if headers.get(header::SEC_WEBSOCKET_VERSION)?.to_str().ok()? != "13" {
        return None;
    }
    let key = headers.get(header::SEC_WEBSOCKET_KEY)?.to_str().ok()?;
    (!key.is_empty()).then(|| key.to_string())
}

/// Whether a browser page from `origin` may connect: the gateway's own
/// origin (its host and port, as the browser addressed it), or one the
/// user listed.
fn origin_allowed(origin: &str, host: Option<&str>, allowed: &[String]) -> bool {
    let origin = origin.trim_end_matches('/');
    if allowed
        .iter()
        .any(|a| a.trim_end_matches('/').eq_ignore_ascii_case(origin))
    {
        return true;
    }
    let Ok(url) = url::Url::parse(origin) else {
        return false;
    };
    if !matches!(url.scheme(), "http" | "https") {
        return false;
    }
    let Some(origin_host) = url.host_str() else {
        return false;
    };
    // A page whose own name points at this machine (DNS rebinding) is
    // "same origin" to any check that trusts names: only addresses and
    // `localhost` count as the gateway's own origin; a gateway reached by
    // a name lists that origin in `allowed_origins`.
    let named = url::Host::parse(origin_host).is_ok_and(|h| matches!(h, url::Host::Domain(_)));
    if named && !origin_host.eq_ignore_ascii_case("localhost") {
        return false;
    }
    let origin_authority = match url.port() {
        Some(port) => format!("{origin_host}:{port}"),
        None => origin_host.to_string(),
    };
    host.is_some_and(|host| host.eq_ignore_ascii_case(&origin_authority))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_gateway_s_own_or_listed_origins_may_connect() {
        let host = Some("127.0.0.1:18789");
        assert!(origin_allowed("http://127.0.0.1:18789", host, &[]));
        assert!(!origin_allowed("http://127.0.0.1:18790", host, &[]));
        assert!(!origin_allowed("https://evil.example", host, &[]));
        assert!(!origin_allowed("null", host, &[]));
        assert!(!origin_allowed(
            "http://127.0.0.1:18789.evil.example",
            host,
            &[]
        ));
        // DNS rebinding: a foreign name that resolves here is not ours.
        assert!(!origin_allowed(
            "http://evil.example:18789",
            Some("evil.example:18789"),
            &[]
        ));
        assert!(origin_allowed(
            "http://localhost:18789",
            Some("localhost:18789"),
            &[]
        ));
        assert!(origin_allowed(
            "http://[::1]:18789",
            Some("[::1]:18789"),
            &[]
        ));
        let listed = vec!["https://chat.example.com".to_string()];
        assert!(origin_allowed("https://chat.example.com", host, &listed));
        assert!(!origin_allowed(
            "https://chat.example.com.evil",
            host,
            &listed
        ));
        assert!(!origin_allowed("http://chat.example.com", host, &listed));
    }
}
