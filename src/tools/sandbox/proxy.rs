//! The way out for `[sandbox] allow_hosts`: a proxy outside the sandbox
//! that connects only to the hosts the user listed.
//!
//! A sandboxed command's network is its own loopback. With `allow_hosts`
//! set, the process holding that network ([`forward`]) listens on a port
//! of its loopback and passes each connection, over a Unix socket, to this
//! proxy ([`serve`]), which runs as a process of its own on the machine's
//! network. The command finds it through `HTTP_PROXY`, `HTTPS_PROXY` and
//! `ALL_PROXY` ([`variables`]). It speaks:
//! - HTTP `CONNECT host:port` (HTTPS, and anything tunnelled);
//! - HTTP requests in absolute form (`GET http://host/path`), passed on
//!   with `Connection: close` and without the proxy's own headers;
//! - SOCKS5 `CONNECT` without authentication, by name or address.
//!
//! A host is allowed when it is an entry (`example.com`, or an address as
//! written) or under a wildcard entry (`*.example.com`: its subdomains,
//! not itself). The proxy resolves the name itself (the sandbox has no DNS)
//! and connects to the address it checked, so a name cannot change its
//! answer in between; a name allowed by a wildcard never reaches this
//! machine's own addresses (loopback, link-local such as a cloud's
//! metadata service, unspecified), which a name somebody else controls
//! could otherwise point at.
//!
//! What it cannot stop: what goes to an allowed host (a push, an upload,
//! a gist), a request for another site sent to an allowed host's servers
//! (a CDN serving many names), and programs that ignore the proxy
//! variables, which reach nothing at all.
//!
//! Everything it holds is bounded: [`MAX_CONNECTIONS`] at once, a request
//! head of [`MAX_HEAD`] bytes read within [`HEAD_TIMEOUT`], two small
//! threads a connection.

use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

/// Connections the proxy (and the forwarder) carry at once; more wait in
/// the listen queue, then are refused.
pub const MAX_CONNECTIONS: usize = 128;
/// The largest request head the proxy reads.
pub const MAX_HEAD: usize = 64 * 1024;
/// How long a client has to send its request.
pub const HEAD_TIMEOUT: Duration = Duration::from_secs(30);
/// How long a connection to a host may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// A copying thread's stack: it holds a buffer on the heap and little else.
const STACK: usize = 64 * 1024;

/// An `allow_hosts` entry as written, checked: a host name (letters,
/// digits, `-`, `.`), `*.` and a host name, or an IP address. Returned
/// lower-cased, without a trailing dot or IPv6 brackets.
pub fn pattern(text: &str) -> Result<String, String> {
    let bad = || {
        format!(
            "`{text}` in allow_hosts is not a host: write a name (`example.com`), its \
             subdomains (`*.example.com`) or an address, without a scheme, port or path"
        )
    };
    let host = normal(text);
    if host.parse::<IpAddr>().is_ok() {
        return Ok(host);
    }
    let name = host.strip_prefix("*.").unwrap_or(&host);
    let label_ok = |l: &str| {
        !l.is_empty()
            && l.len() <= 63
            && !l.starts_with('-')
            && !l.ends_with('-')
            && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
    };
    if name.is_empty() || name.len() > 253 || !name.split('.').all(label_ok) {
        return Err(bad());
    }
    Ok(host)
}

/// A host as compared: lower case, no trailing dot, no IPv6 brackets.
fn normal(host: &str) -> String {
    let host = host.trim().to_ascii_lowercase();
    let host = host.strip_suffix('.').unwrap_or(&host);
    let host = host
        .strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .unwrap_or(host);
    host.to_string()
}

/// How `host` is allowed by `patterns`: `Some(true)` by a wildcard only,
/// `Some(false)` by an entry naming it, `None` not at all.
fn matching(patterns: &[String], host: &str) -> Option<bool> {
    let host = normal(host);
    if patterns.contains(&host) {
        return Some(false);
    }
    let wild = patterns.iter().any(|p| {
        p.strip_prefix("*.")
            .is_some_and(|domain| host.ends_with(&format!(".{domain}")))
    });
    wild.then_some(true)
}

/// Whether `entry` (an `allow_hosts` pattern) allows nothing `patterns`
/// does not: a project may keep such an entry, never add another.
pub fn covered(entry: &str, patterns: &[String]) -> bool {
    let entry = normal(entry);
    match entry.strip_prefix("*.") {
        Some(domain) => patterns.iter().any(|p| {
            p.strip_prefix("*.")
                .is_some_and(|d| domain == d || domain.ends_with(&format!(".{d}")))
        }),
        None => matching(patterns, &entry).is_some(),
    }
}

/// Whether `ip` is one of this machine's own or nobody's: what a name
/// allowed by a wildcard must not lead to.
fn local(ip: IpAddr) -> bool {
    let ip = match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    };
    match ip {
        IpAddr::V4(v4) => {
            v4.is_loopback()
                || v4.is_unspecified()
                || v4.is_link_local()
                || v4.is_broadcast()
                || v4.is_multicast()
                || v4.octets()[0] == 0
        }
        IpAddr::V6(v6) => {
            v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || v6.is_unicast_link_local()
        }
    }
}

/// Why a host cannot be reached.
#[derive(Debug)]
enum Refusal {
    /// The allow-list does not let it be (the text says why).
    Forbidden(String),
    /// Its name does not resolve here.
    Unresolved(String),
    /// It did not answer.
    Failed(String),
}

impl Refusal {
    fn text(&self) -> &str {
        match self {
            Refusal::Forbidden(why) | Refusal::Unresolved(why) | Refusal::Failed(why) => why,
        }
    }
}

/// The addresses `host:port` may be reached at under `patterns`, or why
/// it may not.
fn addresses(patterns: &[String], host: &str, port: u16) -> Result<Vec<SocketAddr>, Refusal> {
    let Some(wildcard) = matching(patterns, host) else {
        return Err(Refusal::Forbidden(format!(
            "pincer's sandbox does not let commands reach {host}: it is not in [sandbox] \
             allow_hosts"
        )));
    };
    let host = normal(host);
    if let Ok(ip) = host.parse::<IpAddr>() {
        // An address is allowed as written, never by a wildcard that
        // happens to end like it (`*.0.0.1`).
        if wildcard {
            return Err(Refusal::Forbidden(format!(
                "pincer's sandbox does not let commands reach {host}: an address must be \
                 listed in [sandbox] allow_hosts as it is"
            )));
        }
        return Ok(vec![SocketAddr::new(ip, port)]);
    }
    let found: Vec<SocketAddr> = (host.as_str(), port)
        .to_socket_addrs()
        .map_err(|e| Refusal::Unresolved(format!("cannot resolve {host}: {e}")))?
        .collect();
    let kept: Vec<SocketAddr> = found
        .iter()
        .copied()
        .filter(|a| !wildcard || !local(a.ip()))
        .collect();
    if kept.is_empty() {
        return Err(Refusal::Forbidden(format!(
            "pincer's sandbox does not let commands reach {host}: a name allowed by a \
             wildcard points at this machine's own addresses"
        )));
    }
    Ok(kept)
}

/// What the proxy lets through, and the proxy it goes through itself.
#[derive(Clone, Debug, Default)]
pub struct Rules {
    /// Checked `allow_hosts` entries.
    pub patterns: Vec<String>,
    pub upstream: Option<Upstream>,
}

/// The proxy this machine reaches the network through (pincer's own
/// `HTTPS_PROXY`, as curl and pincer's provider calls use it): the
/// sandbox's proxy opens its connections through it too, by `CONNECT`,
/// except to the hosts its `NO_PROXY` names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Upstream {
    /// `host:port`.
    pub address: String,
    /// `Proxy-Authorization`'s value, from the URL's user and password;
    /// sent to the upstream proxy only.
    pub authorization: Option<String>,
    /// `NO_PROXY`'s entries.
    pub bypass: Vec<String>,
}

impl Upstream {
    /// The upstream proxy `var` (the environment) names: `https_proxy`,
    /// `HTTPS_PROXY`, `all_proxy`, `ALL_PROXY`, `http_proxy`, then
    /// `HTTP_PROXY`. Only an `http://` proxy (with or without the scheme
    /// written) can carry `CONNECT` here; `None` for anything else.
    pub fn from_env(var: impl Fn(&str) -> Option<String>) -> Option<Upstream> {
        let text = [
            "https_proxy",
            "HTTPS_PROXY",
            "all_proxy",
            "ALL_PROXY",
            "http_proxy",
            "HTTP_PROXY",
        ]
        .iter()
        .find_map(|name| var(name).filter(|v| !v.trim().is_empty()))?;
        let text = text.trim();
        let url = if text.contains("://") {
            url::Url::parse(text).ok()?
        } else {
            url::Url::parse(&format!("http://{text}")).ok()?
        };
        if url.scheme() != "http" {
            return None;
        }
        let host = url.host_str()?;
        let port = url.port_or_known_default()?;
        let address = if host.contains(':') && !host.starts_with('[') {
            format!("[{host}]:{port}")
        } else {
            format!("{host}:{port}")
        };
        let authorization = (!url.username().is_empty()).then(|| {
            use base64::Engine;
            let decode = |t: &str| {
                url::form_urlencoded::parse(format!("x={}", t.replace('+', "%2B")).as_bytes())
                    .next()
                    .map(|(_, v)| v.into_owned())
                    .unwrap_or_default()
            };
            let pair = format!(
                "{}:{}",
                decode(url.username()),
                decode(url.password().unwrap_or_default())
            );
            format!(
                "Basic {}",
                base64::engine::general_purpose::STANDARD.encode(pair)
            )
        });
        let bypass = ["no_proxy", "NO_PROXY"]
            .iter()
            .find_map(|name| var(name))
            .map(|v| {
                v.split(',')
                    .map(|e| e.trim().to_ascii_lowercase())
                    .filter(|e| !e.is_empty())
                    .collect()
            })
            .unwrap_or_default();
        Some(Upstream {
            address,
            authorization,
            bypass,
        })
    }

    /// Whether `NO_PROXY` sends `host` direct: `*`, the host, or a domain
    /// above it (`corp.example` or `.corp.example`).
    fn bypassed(&self, host: &str) -> bool {
        let host = normal(host);
        self.bypass.iter().any(|entry| {
            let entry = entry.trim_start_matches("*.").trim_start_matches('.');
            entry == "*" || host == entry || host.ends_with(&format!(".{entry}"))
        })
    }

    /// A tunnel to `host:port` through the upstream proxy.
    fn tunnel(&self, host: &str, port: u16) -> Result<TcpStream, String> {
        let addresses: Vec<SocketAddr> = self
            .address
            .to_socket_addrs()
            .map_err(|e| format!("cannot resolve the upstream proxy {}: {e}", self.address))?
            .collect();
        let mut stream =
            connect(&addresses).map_err(|e| format!("the upstream proxy {}: {e}", self.address))?;
        let target = if host.contains(':') {
            format!("[{host}]:{port}")
        } else {
            format!("{host}:{port}")
        };
        let mut request = format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n");
        if let Some(authorization) = &self.authorization {
            request.push_str(&format!("Proxy-Authorization: {authorization}\r\n"));
        }
        request.push_str("\r\n");
        stream
            .write_all(request.as_bytes())
            .map_err(|e| format!("the upstream proxy {}: {e}", self.address))?;
        let _ = stream.set_read_timeout(Some(HEAD_TIMEOUT));
        let Some(head) = head_of(&mut stream) else {
            return Err(format!(
                "the upstream proxy {} did not answer CONNECT",
                self.address
            ));
        };
        let status = head.lines().next().unwrap_or_default();
        if status.split(' ').nth(1) != Some("200") {
            return Err(format!(
                "the upstream proxy {} answered `{status}` for {target}",
                self.address
            ));
        }
        Ok(stream)
    }
}

/// An HTTP head read from `stream` through its blank line, byte by byte
/// (what follows it is not the head's), at most [`MAX_HEAD`] bytes.
fn head_of(stream: &mut impl Read) -> Option<String> {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if head.len() > MAX_HEAD || stream.read_exact(&mut byte).is_err() {
            return None;
        }
        head.push(byte[0]);
    }
    Some(String::from_utf8_lossy(&head).into_owned())
}

/// A connection to `host:port` under `rules`: straight to the address the
/// proxy checked, or through the upstream proxy (which then resolves a
/// name that does not resolve here).
fn open(rules: &Rules, host: &str, port: u16) -> Result<TcpStream, Refusal> {
    let upstream = rules.upstream.as_ref().filter(|u| !u.bypassed(host));
    match (addresses(&rules.patterns, host, port), upstream) {
        (Err(Refusal::Unresolved(_)) | Ok(_), Some(upstream)) => upstream
            .tunnel(&normal(host), port)
            .map_err(Refusal::Failed),
        (Ok(addresses), None) => connect(&addresses).map_err(Refusal::Failed),
        (Err(refusal), _) => Err(refusal),
    }
}

/// The first of `addresses` that answers.
fn connect(addresses: &[SocketAddr]) -> Result<TcpStream, String> {
    let mut last = String::from("no address");
    for address in addresses {
        match TcpStream::connect_timeout(address, CONNECT_TIMEOUT) {
            Ok(stream) => return Ok(stream),
            Err(e) => last = format!("cannot connect to {address}: {e}"),
        }
    }
    Err(last)
}

/// The environment a sandboxed command finds the proxy by, listening on
/// `port` of its loopback. Its own loopback stays direct.
pub fn variables(port: u16) -> Vec<(&'static str, String)> {
    let http = format!("http://127.0.0.1:{port}");
    let socks = format!("socks5h://127.0.0.1:{port}");
    let direct = "localhost,127.0.0.1,::1".to_string();
    vec![
        ("HTTP_PROXY", http.clone()),
        ("http_proxy", http.clone()),
        ("HTTPS_PROXY", http.clone()),
        ("https_proxy", http),
        ("ALL_PROXY", socks.clone()),
        ("all_proxy", socks),
        ("NO_PROXY", direct.clone()),
        ("no_proxy", direct),
    ]
}

/// A count of connections carried, and the slot one of them holds.
struct Slot(Arc<AtomicUsize>);

impl Slot {
    fn take(count: &Arc<AtomicUsize>) -> Option<Slot> {
        let taken = count.fetch_add(1, Ordering::AcqRel);
        if taken >= MAX_CONNECTIONS {
            count.fetch_sub(1, Ordering::AcqRel);
            return None;
        }
        Some(Slot(count.clone()))
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

/// A stream one side of a splice: read, write, a second handle, and the
/// end of writing.
pub trait Duplex: Read + Write + Send + Sized + 'static {
    fn another(&self) -> io::Result<Self>;
    fn end_writing(&self);
    fn no_timeouts(&self);
}

/// TCP and Unix streams have the same methods, in no common trait.
macro_rules! duplex {
    ($($stream:ty),*) => {$(
        impl Duplex for $stream {
            fn another(&self) -> io::Result<Self> {
                self.try_clone()
            }
            fn end_writing(&self) {
                let _ = self.shutdown(std::net::Shutdown::Write);
            }
            fn no_timeouts(&self) {
                let _ = self.set_read_timeout(None);
            }
        }
    )*};
}

duplex!(TcpStream, UnixStream);

/// Copies each way between `a` and `b` until both ends are done.
pub fn splice<A: Duplex, B: Duplex>(a: A, b: B) {
    a.no_timeouts();
    b.no_timeouts();
    let (Ok(mut a_read), Ok(mut b_write)) = (a.another(), b.another()) else {
        return;
    };
    let there = std::thread::Builder::new()
        .stack_size(STACK)
        .spawn(move || {
            let _ = io::copy(&mut a_read, &mut b_write);
            b_write.end_writing();
        });
    let (mut b_read, mut a_write) = (b, a);
    let _ = io::copy(&mut b_read, &mut a_write);
    a_write.end_writing();
    if let Ok(there) = there {
        let _ = there.join();
    }
}

/// Runs `work` on a thread of its own while it holds a slot of `count`;
/// without a free slot `stream` is dropped (closed).
fn carry<S: Send + 'static>(count: &Arc<AtomicUsize>, stream: S, work: fn(S)) {
    let Some(slot) = Slot::take(count) else {
        return;
    };
    let _ = std::thread::Builder::new()
        .stack_size(STACK)
        .spawn(move || {
            work(stream);
            drop(slot);
        });
}

/// The forwarder, in the sandbox's network: each connection to `listener`
/// (on its loopback) is carried to the proxy's socket at `proxy`.
pub fn forward(listener: TcpListener, proxy: std::path::PathBuf) {
    static PROXY: std::sync::OnceLock<std::path::PathBuf> = std::sync::OnceLock::new();
    let _ = PROXY.set(proxy);
    let count = Arc::new(AtomicUsize::new(0));
    for stream in listener.incoming() {
        let Ok(stream) = stream else { continue };
        carry(&count, stream, |stream: TcpStream| {
            let Some(path) = PROXY.get() else { return };
            if let Ok(proxy) = UnixStream::connect(path) {
                splice(stream, proxy);
            }
        });
    }
}

/// The proxy: serves each connection to `listener` under `rules`.
pub fn serve(listener: UnixListener, rules: Rules) {
    static RULES: std::sync::OnceLock<Rules> = std::sync::OnceLock::new();
    let _ = RULES.set(rules);
    let count = Arc::new(AtomicUsize::new(0));
    for stream in listener.incoming() {
        let Ok(stream) = stream else { continue };
        carry(&count, stream, |stream: UnixStream| {
            if let Some(rules) = RULES.get() {
                handle(stream, rules);
            }
        });
    }
}

/// One client of the proxy, whichever protocol it speaks.
pub fn handle(mut client: UnixStream, patterns: &Rules) {
    let _ = client.set_read_timeout(Some(HEAD_TIMEOUT));
    let mut first = [0u8; 1];
    if client.read_exact(&mut first).is_err() {
        return;
    }
    if first[0] == 5 {
        socks(client, patterns);
    } else {
        http(client, first[0], patterns);
    }
}

/// An HTTP answer of the proxy's own, and the end of the connection.
fn refuse(client: &mut UnixStream, code: u16, reason: &str, body: &str) {
    let body = format!("{body}\n");
    let _ = write!(
        client,
        "HTTP/1.1 {code} {reason}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
}

/// The request head (through its blank line) and whatever followed it.
fn read_head(client: &mut UnixStream, first: u8) -> Option<(String, Vec<u8>)> {
    // The whole head within HEAD_TIMEOUT, not each read: a byte now and
    // then does not hold a connection.
    let deadline = std::time::Instant::now() + HEAD_TIMEOUT;
    let mut buffer = vec![first];
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(end) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            let rest = buffer.split_off(end + 4);
            return String::from_utf8(buffer).ok().map(|head| (head, rest));
        }
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        if buffer.len() > MAX_HEAD || left.is_zero() || client.set_read_timeout(Some(left)).is_err()
        {
            return None;
        }
        match client.read(&mut chunk) {
            Ok(0) | Err(_) => return None,
            Ok(n) => buffer.extend_from_slice(&chunk[..n]),
        }
    }
}

/// `host:port` (`[v6]:port`) split; `default` when there is no port.
fn host_port(authority: &str, default: Option<u16>) -> Option<(String, u16)> {
    let authority = authority.rsplit('@').next().unwrap_or(authority);
    let (host, port) = if let Some(rest) = authority.strip_prefix('[') {
        let (host, after) = rest.split_once(']')?;
        match after.strip_prefix(':') {
            Some(port) => (host, Some(port)),
            None if after.is_empty() => (host, None),
            None => return None,
        }
    } else {
        match authority.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (authority, None),
        }
    };
    let port = match port {
        Some(port) => port.parse().ok()?,
        None => default?,
    };
    (!host.is_empty()).then(|| (host.to_string(), port))
}

fn http(mut client: UnixStream, first: u8, patterns: &Rules) {
    let Some((head, rest)) = read_head(&mut client, first) else {
        refuse(
            &mut client,
            400,
            "Bad Request",
            "pincer's sandbox proxy could not read the request",
        );
        return;
    };
    let mut lines = head.split("\r\n");
    let request = lines.next().unwrap_or_default();
    let mut words = request.split(' ');
    let (Some(method), Some(target), Some(version), None) =
        (words.next(), words.next(), words.next(), words.next())
    else {
        refuse(&mut client, 400, "Bad Request", "not an HTTP request");
        return;
    };
    if method.eq_ignore_ascii_case("CONNECT") {
        let Some((host, port)) = host_port(target, None) else {
            refuse(&mut client, 400, "Bad Request", "CONNECT needs host:port");
            return;
        };
        let upstream = match open(patterns, &host, port) {
            Err(Refusal::Forbidden(why)) => return refuse(&mut client, 403, "Forbidden", &why),
            Err(other) => return refuse(&mut client, 502, "Bad Gateway", other.text()),
            Ok(upstream) => upstream,
        };
        if client
            .write_all(b"HTTP/1.1 200 Connection Established\r\n\r\n")
            .is_err()
        {
            return;
        }
        let mut upstream = upstream;
        if !rest.is_empty() && upstream.write_all(&rest).is_err() {
            return;
        }
        splice(client, upstream);
        return;
    }
    let Some(after) = target
        .get(..7)
        .filter(|s| s.eq_ignore_ascii_case("http://"))
        .map(|_| &target[7..])
    else {
        refuse(
            &mut client,
            400,
            "Bad Request",
            "pincer's sandbox proxy takes CONNECT or http:// requests",
        );
        return;
    };
    let split = after.find(['/', '?']).unwrap_or(after.len());
    let (authority, path) = after.split_at(split);
    let Some((host, port)) = host_port(authority, Some(80)) else {
        refuse(&mut client, 400, "Bad Request", "the URL has no host");
        return;
    };
    let path = match path {
        "" => "/".to_string(),
        p if p.starts_with('?') => format!("/{p}"),
        p => p.to_string(),
    };
    let mut upstream = match open(patterns, &host, port) {
        Err(Refusal::Forbidden(why)) => return refuse(&mut client, 403, "Forbidden", &why),
        Err(other) => return refuse(&mut client, 502, "Bad Gateway", other.text()),
        Ok(upstream) => upstream,
    };
    let mut out = format!("{method} {path} {version}\r\n");
    for line in lines.filter(|l| !l.is_empty()) {
        let name = line.split(':').next().unwrap_or_default().trim();
        let hop = [
            "proxy-connection",
            "proxy-authorization",
            "connection",
            "keep-alive",
        ]
        .iter()
        .any(|h| name.eq_ignore_ascii_case(h));
        if !hop {
            out.push_str(line);
            out.push_str("\r\n");
        }
    }
    out.push_str("Connection: close\r\n\r\n");
    if upstream.write_all(out.as_bytes()).is_err()
        || (!rest.is_empty() && upstream.write_all(&rest).is_err())
    {
        return;
    }
    splice(client, upstream);
}

fn socks(mut client: UnixStream, patterns: &Rules) {
    // Greeting: the methods offered; only "no authentication" is taken.
    let mut count = [0u8; 1];
    if client.read_exact(&mut count).is_err() {
        return;
    }
    let mut methods = vec![0u8; usize::from(count[0])];
    if client.read_exact(&mut methods).is_err() {
        return;
    }
    if !methods.contains(&0) {
        let _ = client.write_all(&[5, 0xff]);
        return;
    }
    if client.write_all(&[5, 0]).is_err() {
        return;
    }
    // Request: version, command, reserved, address type, address, port.
    let mut fixed = [0u8; 4];
    if client.read_exact(&mut fixed).is_err() {
        return;
    }
    let reply = |client: &mut UnixStream, code: u8| {
        let _ = client.write_all(&[5, code, 0, 1, 0, 0, 0, 0, 0, 0]);
    };
    let host = match fixed[3] {
        1 => {
            let mut a = [0u8; 4];
            if client.read_exact(&mut a).is_err() {
                return;
            }
            IpAddr::from(a).to_string()
        }
        4 => {
            let mut a = [0u8; 16];
            if client.read_exact(&mut a).is_err() {
                return;
            }
            IpAddr::from(a).to_string()
        }
        3 => {
            let mut len = [0u8; 1];
            if client.read_exact(&mut len).is_err() {
                return;
            }
            let mut name = vec![0u8; usize::from(len[0])];
            if client.read_exact(&mut name).is_err() {
                return;
            }
            match String::from_utf8(name) {
                Ok(name) => name,
                Err(_) => return reply(&mut client, 8),
            }
        }
        _ => return reply(&mut client, 8),
    };
    let mut port = [0u8; 2];
    if client.read_exact(&mut port).is_err() {
        return;
    }
    let port = u16::from_be_bytes(port);
    if fixed[0] != 5 || fixed[1] != 1 {
        // Only CONNECT: no BIND, no UDP.
        return reply(&mut client, 7);
    }
    let upstream = match open(patterns, &host, port) {
        Err(Refusal::Forbidden(_)) => return reply(&mut client, 2),
        Err(Refusal::Unresolved(_)) => return reply(&mut client, 4),
        Err(Refusal::Failed(_)) => return reply(&mut client, 5),
        Ok(upstream) => upstream,
    };
    reply(&mut client, 0);
    splice(client, upstream);
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn list(entries: &[&str]) -> Vec<String> {
        entries.iter().map(|e| pattern(e).unwrap()).collect()
    }

    #[test]
    fn entries_are_names_wildcards_or_addresses() {
        assert_eq!(pattern("GitHub.com.").unwrap(), "github.com");
        assert_eq!(pattern("*.npmjs.org").unwrap(), "*.npmjs.org");
        assert_eq!(pattern("[::1]").unwrap(), "::1");
        assert_eq!(pattern("10.0.0.7").unwrap(), "10.0.0.7");
        for bad in [
            "*",
            "",
            "https://github.com",
            "github.com:443",
            "github.com/x",
            "*.*.com",
            "a..b",
            "-a.com",
        ] {
            assert!(pattern(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_host_matches_its_entry_or_a_wildcard_above_it() {
        let p = list(&["github.com", "*.npmjs.org", "127.0.0.1"]);
        assert_eq!(matching(&p, "GITHUB.com"), Some(false));
        assert_eq!(matching(&p, "api.github.com"), None);
        assert_eq!(matching(&p, "registry.npmjs.org"), Some(true));
        assert_eq!(matching(&p, "npmjs.org"), None);
        assert_eq!(matching(&p, "evilnpmjs.org"), None);
        assert_eq!(matching(&p, "127.0.0.1"), Some(false));
        assert_eq!(matching(&p, "[::1]"), None);
    }

    #[test]
    fn a_project_keeps_only_entries_the_user_s_list_covers() {
        let user = list(&["github.com", "*.npmjs.org"]);
        assert!(covered("github.com", &user));
        assert!(covered("registry.npmjs.org", &user));
        assert!(covered("*.npmjs.org", &user));
        assert!(covered("*.a.npmjs.org", &user));
        assert!(!covered("*.github.com", &user));
        assert!(!covered("evil.com", &user));
    }

    #[test]
    fn a_wildcard_name_never_leads_to_this_machine() {
        for ip in [
            "127.0.0.1",
            "0.0.0.0",
            "169.254.169.254",
            "::1",
            "::ffff:127.0.0.1",
            "fe80::1",
        ] {
            assert!(local(ip.parse().unwrap()), "{ip}");
        }
        for ip in ["140.82.112.3", "10.1.2.3", "2606:4700::1"] {
            assert!(!local(ip.parse().unwrap()), "{ip}");
        }
        // "localhost" named: the user's own choice. Under a wildcard: no.
        let named = list(&["localhost"]);
        assert!(addresses(&named, "localhost", 80).is_ok());
        let wild = list(&["*.localhost"]);
        if let Ok(found) = ("a.localhost", 80).to_socket_addrs()
            && found.count() > 0
        {
            assert!(addresses(&wild, "a.localhost", 80).is_err());
        }
        assert!(addresses(&list(&["*.0.0.1"]), "127.0.0.1", 80).is_err());
        let why = addresses(&named, "example.com", 443).unwrap_err();
        assert!(
            why.text().contains("not in [sandbox] allow_hosts"),
            "{why:?}"
        );
    }

    #[test]
    fn connections_beyond_the_bound_are_not_carried() {
        let count = Arc::new(AtomicUsize::new(0));
        let slots: Vec<Slot> = (0..MAX_CONNECTIONS)
            .map(|_| Slot::take(&count).unwrap())
            .collect();
        assert!(Slot::take(&count).is_none());
        assert_eq!(count.load(Ordering::Acquire), MAX_CONNECTIONS);
        drop(slots);
        assert_eq!(count.load(Ordering::Acquire), 0);
        // A connection over the bound is closed at once, not queued.
        let full = Arc::new(AtomicUsize::new(MAX_CONNECTIONS));
        let (mut mine, theirs) = UnixStream::pair().unwrap();
        carry(&full, theirs, |_stream: UnixStream| {
            panic!("carried past the bound")
        });
        let mut out = Vec::new();
        assert_eq!(mine.read_to_end(&mut out).unwrap(), 0);
    }

    #[test]
    fn authorities_split_into_host_and_port() {
        assert_eq!(host_port("a.com:443", None), Some(("a.com".into(), 443)));
        assert_eq!(host_port("a.com", Some(80)), Some(("a.com".into(), 80)));
        assert_eq!(host_port("a.com", None), None);
        assert_eq!(host_port("[::1]:8080", None), Some(("::1".into(), 8080)));
        assert_eq!(host_port("u:p@a.com:81", None), Some(("a.com".into(), 81)));
        assert_eq!(host_port(":80", None), None);
        assert_eq!(host_port("a.com:x", None), None);
    }

    /// A listener on this machine's loopback answering one HTTP request
    /// with the request's first line and headers.
    fn origin() -> u16 {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        std::thread::spawn(move || {
            for stream in listener.incoming().take(4) {
                let mut stream = stream.unwrap();
                let body = head_of(&mut stream)
                    .unwrap_or_default()
                    .replace("\r\n", "|");
                let _ = write!(
                    stream,
                    "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}",
                    body.len()
                );
            }
        });
        port
    }

    /// `request` sent through a proxy allowing `entries`; what came back.
    fn through(entries: &[&str], request: &[u8]) -> String {
        String::from_utf8_lossy(&through_bytes(entries, request)).into_owned()
    }

    fn through_bytes(entries: &[&str], request: &[u8]) -> Vec<u8> {
        let rules = Rules {
            patterns: list(entries),
            upstream: None,
        };
        through_rules(rules, request)
    }

    fn through_rules(rules: Rules, request: &[u8]) -> Vec<u8> {
        let (mut mine, theirs) = UnixStream::pair().unwrap();
        let proxy = std::thread::spawn(move || handle(theirs, &rules));
        // The proxy may stop reading (and close) before all is written.
        let _ = mine.write_all(request);
        let mut out = Vec::new();
        let _ = mine.read_to_end(&mut out);
        drop(mine);
        proxy.join().unwrap();
        out
    }

    #[test]
    fn plain_http_goes_to_an_allowed_host_in_origin_form_and_not_elsewhere() {
        let port = origin();
        let answer = through(
            &["127.0.0.1"],
            format!(
                "GET http://127.0.0.1:{port}/x?y=1 HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nProxy-Authorization: Basic c2VjcmV0\r\nProxy-Connection: keep-alive\r\n\r\n"
            )
            .as_bytes(),
        );
        assert!(answer.starts_with("HTTP/1.1 200 OK"), "{answer}");
        assert!(answer.contains("GET /x?y=1 HTTP/1.1|"), "{answer}");
        assert!(answer.contains("Connection: close"), "{answer}");
        assert!(!answer.contains("Proxy-"), "{answer}");
        let answer = through(
            &["127.0.0.2"],
            format!("GET http://127.0.0.1:{port}/ HTTP/1.1\r\n\r\n").as_bytes(),
        );
        assert!(answer.starts_with("HTTP/1.1 403 Forbidden"), "{answer}");
        assert!(
            answer.contains("does not let commands reach 127.0.0.1"),
            "{answer}"
        );
    }

    #[test]
    fn connect_tunnels_to_an_allowed_host_only() {
        let port = origin();
        let answer = through(
            &["127.0.0.1"],
            format!("CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\nGET /t HTTP/1.1\r\n\r\n").as_bytes(),
        );
        assert!(
            answer.starts_with("HTTP/1.1 200 Connection Established\r\n\r\nHTTP/1.1 200 OK"),
            "{answer}"
        );
        assert!(answer.contains("GET /t HTTP/1.1"), "{answer}");
        let answer = through(
            &["example.com"],
            format!("CONNECT 127.0.0.1:{port} HTTP/1.1\r\n\r\n").as_bytes(),
        );
        assert!(answer.starts_with("HTTP/1.1 403"), "{answer}");
    }

    #[test]
    fn socks5_connects_to_an_allowed_host_only() {
        let port = origin();
        let mut request = vec![5, 1, 0, 5, 1, 0, 3, 9];
        request.extend_from_slice(b"localhost");
        request.extend_from_slice(&port.to_be_bytes());
        request.extend_from_slice(b"GET /s HTTP/1.1\r\n\r\n");
        let answer = through(&["localhost"], &request);
        assert!(answer.as_bytes().starts_with(&[5, 0, 5, 0]), "{answer:?}");
        assert!(answer.contains("GET /s HTTP/1.1"), "{answer}");
        let answer = through(&["github.com"], &request);
        assert_eq!(answer.as_bytes(), &[5, 0, 5, 2, 0, 1, 0, 0, 0, 0, 0, 0]);
        // A client that offers only a password is turned away.
        assert_eq!(through_bytes(&["localhost"], &[5, 1, 2]), [5, 0xff]);
    }

    #[test]
    fn a_head_too_large_or_not_http_is_refused() {
        let mut huge = b"GET http://a.com/ HTTP/1.1\r\nX: ".to_vec();
        huge.extend(std::iter::repeat_n(b'a', MAX_HEAD + 10));
        let answer = through(&["a.com"], &huge);
        assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
        let answer = through(&["a.com"], b"GET /relative HTTP/1.1\r\n\r\n");
        assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    }

    #[test]
    fn the_upstream_proxy_comes_from_the_environment() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |name: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == name)
                    .map(|(_, v)| v.to_string())
            }
        };
        let up = Upstream::from_env(env(&[
            ("HTTPS_PROXY", "http://me%40corp:p%3Ass@proxy.corp:3128"),
            ("HTTP_PROXY", "http://other:8080"),
            ("NO_PROXY", "localhost, .corp.example,*.internal"),
        ]))
        .unwrap();
        assert_eq!(up.address, "proxy.corp:3128");
        // "me@corp:p:ss", as RFC 7617 writes it.
        assert_eq!(up.authorization.as_deref(), Some("Basic bWVAY29ycDpwOnNz"));
        assert!(up.bypassed("localhost"));
        assert!(up.bypassed("git.corp.example"));
        assert!(up.bypassed("a.internal"));
        assert!(!up.bypassed("github.com"));
        let plain = Upstream::from_env(env(&[("http_proxy", "10.0.0.1:3128")])).unwrap();
        assert_eq!(plain.address, "10.0.0.1:3128");
        assert_eq!(plain.authorization, None);
        assert_eq!(
            Upstream::from_env(env(&[("HTTPS_PROXY", "socks5://p:1080")])),
            None
        );
        assert_eq!(Upstream::from_env(env(&[])), None);
    }

    /// An upstream proxy on this machine's loopback: takes one `CONNECT`,
    /// answers 200, then answers the request that comes through the
    /// tunnel as the origin would. Sends what it was asked back on `said`.
    fn upstream_proxy() -> (u16, std::sync::mpsc::Receiver<String>) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let (said, heard) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let (mut stream, _) = listener.accept().unwrap();
            said.send(head_of(&mut stream).unwrap()).unwrap();
            stream.write_all(b"HTTP/1.1 200 OK\r\n\r\n").unwrap();
            said.send(head_of(&mut stream).unwrap()).unwrap();
            let body = "via the upstream proxy";
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            );
        });
        (port, heard)
    }

    #[test]
    fn connections_go_through_the_upstream_proxy_with_its_credentials_only() {
        let (port, heard) = upstream_proxy();
        let rules = Rules {
            patterns: list(&["example.invalid"]),
            upstream: Some(Upstream {
                address: format!("127.0.0.1:{port}"),
                authorization: Some("Basic dTpw".into()),
                bypass: Vec::new(),
            }),
        };
        // A name that does not resolve here is the upstream's to resolve.
        let answer = String::from_utf8(through_rules(
            rules.clone(),
            b"GET http://example.invalid/x HTTP/1.1\r\nHost: example.invalid\r\n\r\n",
        ))
        .unwrap();
        assert!(answer.ends_with("via the upstream proxy"), "{answer}");
        let connect = heard.recv().unwrap();
        assert!(
            connect.starts_with("CONNECT example.invalid:80 HTTP/1.1\r\n"),
            "{connect}"
        );
        assert!(
            connect.contains("Proxy-Authorization: Basic dTpw\r\n"),
            "{connect}"
        );
        let request = heard.recv().unwrap();
        assert!(request.starts_with("GET /x HTTP/1.1\r\n"), "{request}");
        assert!(!request.contains("Proxy-Authorization"), "{request}");
        // A host not listed never reaches the upstream proxy.
        let answer = String::from_utf8(through_rules(
            rules,
            b"CONNECT github.com:443 HTTP/1.1\r\n\r\n",
        ))
        .unwrap();
        assert!(answer.starts_with("HTTP/1.1 403"), "{answer}");
    }
}
