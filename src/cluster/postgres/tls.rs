//! TLS to the cluster's store, as libpq does it: the URL's `sslmode`
//! (`disable`, `allow`, `prefer` (the default), `require`, `verify-ca`,
//! `verify-full`) and `sslrootcert` (a PEM file of the certificates to
//! trust, or `system` for the system's roots) mean what PostgreSQL's
//! documentation says they mean, so a URL a team's other tools use works
//! here too.
//!
//! - `disable`: never TLS.
//! - `allow`, `prefer`: TLS when the server offers it, without checking
//!   its certificate; in the clear when it does not. (libpq's `allow`
//!   tries the clear first; here it is `prefer`.)
//! - `require`: TLS or no connection. The certificate is checked against
//!   `sslrootcert`, or `~/.postgresql/root.crt` when that exists (libpq's
//!   `verify-ca`), else not at all.
//! - `verify-ca`: TLS, and a certificate signed by one of those roots.
//! - `verify-full`: that, and a certificate for the host connected to.
//!   The default, and the only mode allowed, with `sslrootcert=system`.
//!
//! The SCRAM password exchange is bound to the TLS connection
//! (`tls-server-end-point`) when the server offers it, so a relay that
//! terminated TLS could not pass the exchange on; `channel_binding=require`
//! makes that a condition. Client certificates (`sslcert`, `sslkey`) are
//! not supported, and a URL naming them is refused rather than connected
//! without them.

use std::future::Future;
use std::io;
use std::path::{Path, PathBuf};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, SignatureScheme};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_postgres::Socket;
use tokio_postgres::tls::{ChannelBinding, MakeTlsConnect, TlsConnect};

use crate::config::cluster::redacted;

/// How the store is reached: the connection's settings, and the TLS it
/// uses when it uses TLS.
pub(super) struct Dial {
    pub config: tokio_postgres::Config,
    pub tls: Tls,
}

/// libpq's `sslmode`s, weakest first.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Mode {
    Disable,
    Allow,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

impl Mode {
    fn parse(value: &str) -> Option<Mode> {
        Some(match value {
            "disable" => Mode::Disable,
            "allow" => Mode::Allow,
            "prefer" => Mode::Prefer,
            "require" => Mode::Require,
            "verify-ca" => Mode::VerifyCa,
            "verify-full" => Mode::VerifyFull,
            _ => return None,
        })
    }
}

/// Where the certificates to trust come from.
enum Roots {
    /// None: the certificate is not checked.
    Unchecked,
    File(PathBuf),
    System,
}

/// Reads the store's URL (`postgres://…` or libpq's `key=value` form):
/// what tokio-postgres takes of it, and the TLS its `sslmode` and
/// `sslrootcert` ask for. `home` is where `~/.postgresql/root.crt` is
/// looked for.
pub(super) fn plan(url: &str, home: Option<&Path>) -> Result<Dial, String> {
    let refuse = |why: String| format!("cluster store {}: {why}", redacted(url));
    let (rest, options) = options_of(url);
    let mut mode = None;
    let mut root_cert = None;
    for (key, value) in &options {
        match key.as_str() {
            "sslmode" => {
                mode = Some(Mode::parse(value).ok_or_else(|| {
                    refuse(format!(
                        "`sslmode={value}` is not one of disable, allow, prefer, require, verify-ca, verify-full"
                    ))
                })?);
            }
            "sslrootcert" => root_cert = Some(value.clone()),
            "sslcert" | "sslkey" | "sslpassword" | "sslcrl" | "sslcrldir" => {
                return Err(refuse(format!(
                    "`{key}` is not supported: pincer does not present client certificates or read revocation lists"
                )));
            }
            _ => {}
        }
    }
    let system = root_cert.as_deref() == Some("system");
    let mode = match mode {
        Some(mode) if system && mode < Mode::VerifyFull => {
            return Err(refuse(
                "`sslrootcert=system` needs `sslmode=verify-full` (as in libpq): the system's roots vouch for names, not for a server".to_string(),
            ));
        }
        Some(mode) => mode,
        None if system => Mode::VerifyFull,
        None => Mode::Prefer,
    };
    let default_roots = home.map(|home| home.join(".postgresql").join("root.crt"));
    let roots = match (mode, root_cert) {
        (Mode::Disable | Mode::Allow | Mode::Prefer, _) => Roots::Unchecked,
        (_, Some(_)) if system => Roots::System,
        (_, Some(file)) => Roots::File(PathBuf::from(file)),
        (Mode::Require, None) => match default_roots {
            Some(file) if file.exists() => Roots::File(file),
            _ => Roots::Unchecked,
        },
        (_, None) => match default_roots {
            Some(file) if file.exists() => Roots::File(file),
            file => {
                return Err(refuse(format!(
                    "`sslmode={}` checks the server's certificate, and no root certificate was given: name a PEM file with `sslrootcert=…`{}, or use `sslrootcert=system` for the system's roots",
                    if mode == Mode::VerifyCa {
                        "verify-ca"
                    } else {
                        "verify-full"
                    },
                    file.map(|f| format!(" or put it in {}", f.display()))
                        .unwrap_or_default()
                )));
            }
        },
    };
    let check_name = mode == Mode::VerifyFull;
    let passed = passed_on(&rest, &options, mode);
    let mut config: tokio_postgres::Config = passed.parse().map_err(|e| refuse(format!("{e}")))?;
    // Over a Unix socket there is no TLS, and libpq ignores `sslmode`.
    let hosts = config.get_hosts();
    if !hosts.is_empty()
        && hosts
            .iter()
            .all(|host| matches!(host, tokio_postgres::config::Host::Unix(_)))
    {
        config.ssl_mode(tokio_postgres::config::SslMode::Disable);
    }
    let tls = Tls::new(&roots, check_name).map_err(refuse)?;
    Ok(Dial { config, tls })
}

/// The URL split into what stays (scheme to path, or nothing in the
/// `key=value` form) and its options, decoded.
fn options_of(url: &str) -> (String, Vec<(String, String)>) {
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        let Some((base, query)) = url.split_once('?') else {
            return (url.to_string(), Vec::new());
        };
        let options = query
            .split('&')
            .filter(|pair| !pair.is_empty())
            .map(|pair| {
                let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
                (percent_decoded(key), percent_decoded(value))
            })
            .collect();
        return (base.to_string(), options);
    }
    (String::new(), key_values(url))
}

/// What tokio-postgres is given: the URL without the options it does
/// not know, its `sslmode` one it knows (the certificate's checks are
/// this module's).
fn passed_on(base: &str, options: &[(String, String)], mode: Mode) -> String {
    let ssl = match mode {
        Mode::Disable => "disable",
        Mode::Allow | Mode::Prefer => "prefer",
        Mode::Require | Mode::VerifyCa | Mode::VerifyFull => "require",
    };
    let kept = options
        .iter()
        .filter(|(key, _)| key != "sslmode" && key != "sslrootcert");
    if base.is_empty() {
        let mut passed: Vec<String> = kept
            .map(|(key, value)| {
                format!(
                    "{key}='{}'",
                    value.replace('\\', "\\\\").replace('\'', "\\'")
                )
            })
            .collect();
        passed.push(format!("sslmode={ssl}"));
        return passed.join(" ");
    }
    let mut pairs: Vec<String> = kept
        .map(|(key, value)| format!("{}={}", percent_encoded(key), percent_encoded(value)))
        .collect();
    pairs.push(format!("sslmode={ssl}"));
    format!("{base}?{}", pairs.join("&"))
}

/// libpq's `key=value` form: pairs apart by white space, a value in
/// single quotes when it holds any, `\` escaping within it.
fn key_values(text: &str) -> Vec<(String, String)> {
    let mut pairs = Vec::new();
    let mut chars = text.chars().peekable();
    loop {
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        let mut key = String::new();
        while let Some(c) = chars.next_if(|c| *c != '=' && !c.is_whitespace()) {
            key.push(c);
        }
        if key.is_empty() {
            return pairs;
        }
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        if chars.next_if_eq(&'=').is_none() {
            pairs.push((key, String::new()));
            continue;
        }
        while chars.next_if(|c| c.is_whitespace()).is_some() {}
        let mut value = String::new();
        if chars.next_if_eq(&'\'').is_some() {
            while let Some(c) = chars.next() {
                match c {
                    '\'' => break,
                    '\\' => value.extend(chars.next()),
                    c => value.push(c),
                }
            }
        } else {
            while let Some(c) = chars.next_if(|c| !c.is_whitespace()) {
                match c {
                    '\\' => value.extend(chars.next()),
                    c => value.push(c),
                }
            }
        }
        pairs.push((key, value));
    }
}

fn percent_decoded(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut decoded = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| char::from(b).to_digit(16);
        match (bytes[i], bytes.get(i + 1), bytes.get(i + 2)) {
            (b'%', Some(&high), Some(&low)) if hex(high).is_some() && hex(low).is_some() => {
                let value = hex(high).unwrap_or(0) * 16 + hex(low).unwrap_or(0);
                decoded.push(u8::try_from(value).unwrap_or(b'?'));
                i += 3;
            }
            (byte, _, _) => {
                decoded.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&decoded).into_owned()
}

fn percent_encoded(text: &str) -> String {
    let mut encoded = String::with_capacity(text.len());
    for byte in text.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~/:".contains(&byte) {
            encoded.push(char::from(byte));
        } else {
            encoded.push_str(&format!("%{byte:02X}"));
        }
    }
    encoded
}

/// The TLS side of a connection to the store.
#[derive(Clone)]
pub(super) struct Tls {
    config: Arc<rustls::ClientConfig>,
}

impl Tls {
    fn new(roots: &Roots, check_name: bool) -> Result<Tls, String> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let verifier: Arc<dyn ServerCertVerifier> = match roots {
            Roots::Unchecked => Arc::new(Unchecked(provider.clone())),
            Roots::File(file) => checking(trusted_in(file)?, check_name, &provider)?,
            Roots::System => checking(system_roots()?, check_name, &provider)?,
        };
        let config = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| e.to_string())?
            .dangerous()
            .with_custom_certificate_verifier(verifier)
            .with_no_client_auth();
        Ok(Tls {
            config: Arc::new(config),
        })
    }
}

fn trusted_in(file: &Path) -> Result<rustls::RootCertStore, String> {
    let shown = file.display();
    let certificates = CertificateDer::pem_file_iter(file)
        .map_err(|e| format!("cannot read the root certificates in {shown}: {e}"))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("cannot read the root certificates in {shown}: {e}"))?;
    let mut roots = rustls::RootCertStore::empty();
    let (added, _) = roots.add_parsable_certificates(certificates);
    if added == 0 {
        return Err(format!("{shown} holds no certificate pincer can use"));
    }
    Ok(roots)
}

fn system_roots() -> Result<rustls::RootCertStore, String> {
    let found = rustls_native_certs::load_native_certs();
    let mut roots = rustls::RootCertStore::empty();
    let (added, _) = roots.add_parsable_certificates(found.certs);
    if added == 0 {
        return Err(
            "`sslrootcert=system`: no trusted root certificates were found on this system (install the CA certificates, or point SSL_CERT_FILE at a PEM bundle)"
                .to_string(),
        );
    }
    Ok(roots)
}

fn checking(
    roots: rustls::RootCertStore,
    check_name: bool,
    provider: &Arc<CryptoProvider>,
) -> Result<Arc<dyn ServerCertVerifier>, String> {
    let chain = rustls::client::WebPkiServerVerifier::builder_with_provider(
        Arc::new(roots),
        provider.clone(),
    )
    .build()
    .map_err(|e| e.to_string())?;
    Ok(if check_name {
        chain
    } else {
        Arc::new(ChainOnly(chain))
    })
}

/// `prefer` and `require` without roots: encrypted, the server not
/// checked (its handshake's signatures still are).
#[derive(Debug)]
struct Unchecked(Arc<CryptoProvider>);

impl ServerCertVerifier for Unchecked {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// `verify-ca`: the chain up to a trusted root is checked, the name the
/// certificate is for is not. (The chain is checked before the name, so
/// a certificate that fails only on its name has a good chain.)
#[derive(Debug)]
struct ChainOnly(Arc<rustls::client::WebPkiServerVerifier>);

impl ServerCertVerifier for ChainOnly {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        match self
            .0
            .verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now)
        {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            checked => checked,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

impl MakeTlsConnect<Socket> for Tls {
    type Stream = Stream;
    type TlsConnect = Connect;
    type Error = io::Error;

    fn make_tls_connect(&mut self, host: &str) -> Result<Connect, io::Error> {
        // No name for a Unix socket (a list of hosts that mixes them with
        // TCP ones): the server refuses TLS there anyway.
        let host = if host.is_empty() { "localhost" } else { host };
        let name = ServerName::try_from(host.to_string())
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidInput, e))?;
        Ok(Connect {
            connector: tokio_rustls::TlsConnector::from(self.config.clone()),
            name,
        })
    }
}

pub(super) struct Connect {
    connector: tokio_rustls::TlsConnector,
    name: ServerName<'static>,
}

impl TlsConnect<Socket> for Connect {
    type Stream = Stream;
    type Error = io::Error;
    type Future = Pin<Box<dyn Future<Output = io::Result<Stream>> + Send>>;

    fn connect(self, socket: Socket) -> Self::Future {
        Box::pin(async move {
            let stream = self.connector.connect(self.name, socket).await?;
            Ok(Stream(stream))
        })
    }
}

/// A TLS connection to the store.
pub(super) struct Stream(tokio_rustls::client::TlsStream<Socket>);

impl AsyncRead for Stream {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_read(cx, buf)
    }
}

impl AsyncWrite for Stream {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.0).poll_write(cx, buf)
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_flush(cx)
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.0).poll_shutdown(cx)
    }
}

impl tokio_postgres::tls::TlsStream for Stream {
    fn channel_binding(&self) -> ChannelBinding {
        let (_, connection) = self.0.get_ref();
        let certificate = connection
            .peer_certificates()
            .and_then(|chain| chain.first());
        match certificate.and_then(|c| end_point(c.as_ref())) {
            Some(hash) => ChannelBinding::tls_server_end_point(hash),
            None => ChannelBinding::none(),
        }
    }
}

/// RFC 5929's `tls-server-end-point`: the hash of the server's
/// certificate, with the hash function of the certificate's signature
/// (SHA-256 for MD5 and SHA-1). `None` for a signature with no single
/// hash (Ed25519, RSA-PSS): the exchange then goes unbound, as with
/// PostgreSQL's own clients.
fn end_point(certificate: &[u8]) -> Option<Vec<u8>> {
    let algorithm = signature_hash(certificate)?;
    Some(
        ring::digest::digest(algorithm, certificate)
            .as_ref()
            .to_vec(),
    )
}

/// The hash of an X.509 certificate's signature algorithm, read from its
/// DER: `Certificate ::= SEQUENCE { tbsCertificate, signatureAlgorithm
/// AlgorithmIdentifier, signature }`.
fn signature_hash(certificate: &[u8]) -> Option<&'static ring::digest::Algorithm> {
    let (tag, body, _) = der_item(certificate)?;
    if tag != 0x30 {
        return None;
    }
    let (_, _, after_tbs) = der_item(body)?;
    let (tag, identifier, _) = der_item(after_tbs)?;
    if tag != 0x30 {
        return None;
    }
    let (tag, oid, _) = der_item(identifier)?;
    if tag != 0x06 {
        return None;
    }
    // 1.2.840.113549.1.1.n (RSA with …) and 1.2.840.10045.4.3.n (ECDSA with …).
    const RSA: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01];
    const ECDSA: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03];
    const ECDSA_SHA1: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x01];
    use ring::digest::{SHA256, SHA384, SHA512};
    if oid == ECDSA_SHA1 {
        return Some(&SHA256);
    }
    let (family, last) = oid.split_last().map(|(last, family)| (family, *last))?;
    match (family, last) {
        // md5, sha1, sha256. (sha224 would need SHA-224, which ring
        // has not: such a certificate's exchange goes unbound.)
        (RSA, 0x04 | 0x05 | 0x0b) => Some(&SHA256),
        (RSA, 0x0c) => Some(&SHA384),
        (RSA, 0x0d) => Some(&SHA512),
        (ECDSA, 0x02) => Some(&SHA256),
        (ECDSA, 0x03) => Some(&SHA384),
        (ECDSA, 0x04) => Some(&SHA512),
        _ => None,
    }
}

/// One DER item: its tag, its contents, and what follows it.
fn der_item(input: &[u8]) -> Option<(u8, &[u8], &[u8])> {
    let (&tag, rest) = input.split_first()?;
    let (&first, rest) = rest.split_first()?;
    let (length, rest) = if first < 0x80 {
        (usize::from(first), rest)
    } else {
        let count = usize::from(first & 0x7f);
        if count == 0 || count > 4 || rest.len() < count {
            return None;
        }
        let (digits, rest) = rest.split_at(count);
        let length = digits
            .iter()
            .fold(0usize, |length, digit| (length << 8) | usize::from(*digit));
        (length, rest)
    };
    if rest.len() < length {
        return None;
    }
    let (contents, after) = rest.split_at(length);
    Some((tag, contents, after))
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio_postgres::config::SslMode;

    fn mode_of(url: &str) -> SslMode {
        plan(url, None)
            .map(|dial| dial.config.get_ssl_mode())
            .unwrap()
    }

    #[test]
    fn sslmode_is_libpq_s_and_prefer_by_default() {
        assert_eq!(mode_of("postgres://u@db/p"), SslMode::Prefer);
        assert_eq!(
            mode_of("postgres://u@db/p?sslmode=disable"),
            SslMode::Disable
        );
        assert_eq!(mode_of("postgres://u@db/p?sslmode=allow"), SslMode::Prefer);
        assert_eq!(
            mode_of("postgres://u@db/p?sslmode=require"),
            SslMode::Require
        );
        let error = plan("postgres://u:pw@db/p?sslmode=sometimes", None)
            .err()
            .unwrap();
        assert!(
            error.contains("`sslmode=sometimes` is not one of"),
            "{error}"
        );
        assert!(!error.contains("pw@"), "{error}");
    }

    #[test]
    fn a_mode_that_checks_the_server_needs_roots_to_check_it_with() {
        for mode in ["verify-ca", "verify-full"] {
            let error = plan(&format!("postgres://u:pw@db/p?sslmode={mode}"), None)
                .err()
                .unwrap();
            assert!(error.contains("sslrootcert="), "{error}");
            assert!(!error.contains("pw@"), "{error}");
        }
        // libpq's default file counts, when it is there.
        let home = tempfile::tempdir().unwrap();
        let error = plan("postgres://u@db/p?sslmode=verify-full", Some(home.path()))
            .err()
            .unwrap();
        assert!(error.contains(".postgresql/root.crt"), "{error}");
        std::fs::create_dir(home.path().join(".postgresql")).unwrap();
        std::fs::write(home.path().join(".postgresql/root.crt"), ca_pem()).unwrap();
        let dial = plan("postgres://u@db/p?sslmode=verify-full", Some(home.path())).unwrap();
        assert_eq!(dial.config.get_ssl_mode(), SslMode::Require);
        // A file of no certificates is not a set of roots.
        std::fs::write(home.path().join("empty.pem"), "").unwrap();
        let url = format!(
            "postgres://u@db/p?sslmode=verify-ca&sslrootcert={}",
            home.path().join("empty.pem").display()
        );
        let error = plan(&url, None).err().unwrap();
        assert!(error.contains("no certificate"), "{error}");
    }

    #[test]
    fn the_system_s_roots_vouch_for_names_only() {
        let error = plan("postgres://u@db/p?sslmode=require&sslrootcert=system", None)
            .err()
            .unwrap();
        assert!(error.contains("verify-full"), "{error}");
        // Without a mode, `system` means verify-full (when the system has
        // roots at all; this one may not).
        if let Ok(dial) = plan("postgres://u@db/p?sslrootcert=system", None) {
            assert_eq!(dial.config.get_ssl_mode(), SslMode::Require);
        }
    }

    #[test]
    fn a_unix_socket_has_no_tls_whatever_the_mode_as_in_libpq() {
        for url in [
            "postgres://u@%2Fvar%2Frun%2Fpostgresql/p?sslmode=require",
            "host=/var/run/postgresql user=u dbname=p sslmode=prefer",
        ] {
            assert_eq!(mode_of(url), SslMode::Disable, "{url}");
        }
        assert_eq!(
            mode_of("postgres://u@db/p?sslmode=require"),
            SslMode::Require
        );
    }

    #[test]
    fn client_certificates_are_refused_not_left_out() {
        for key in ["sslcert", "sslkey", "sslcrl"] {
            let error = plan(&format!("postgres://u@db/p?{key}=/x"), None)
                .err()
                .unwrap();
            assert!(error.contains("not supported"), "{error}");
        }
    }

    #[test]
    fn the_other_options_reach_tokio_postgres_in_either_form() {
        let dir = tempfile::tempdir().unwrap();
        let roots = dir.path().join("my roots.pem");
        std::fs::write(&roots, ca_pem()).unwrap();
        let encoded = roots.display().to_string().replace(' ', "%20");
        let dial = plan(
            &format!(
                "postgres://team:s%40cret@db.internal:6432/pincer?application_name=replica%201&sslrootcert={encoded}&sslmode=verify-ca&channel_binding=require"
            ),
            None,
        )
        .unwrap();
        assert_eq!(dial.config.get_user(), Some("team"));
        assert_eq!(dial.config.get_password(), Some(&b"s@cret"[..]));
        assert_eq!(dial.config.get_application_name(), Some("replica 1"));
        assert_eq!(dial.config.get_ports(), [6432]);
        assert_eq!(dial.config.get_ssl_mode(), SslMode::Require);
        assert_eq!(
            dial.config.get_channel_binding(),
            tokio_postgres::config::ChannelBinding::Require
        );
        let dial = plan(
            &format!(
                "host=db.internal user=team password='it\\'s' dbname=pincer sslmode=verify-full sslrootcert='{}'",
                roots.display()
            ),
            None,
        )
        .unwrap();
        assert_eq!(dial.config.get_password(), Some(&b"it's"[..]));
        assert_eq!(dial.config.get_dbname(), Some("pincer"));
        assert_eq!(dial.config.get_ssl_mode(), SslMode::Require);
    }

    fn certificate_signed_with(algorithm: &'static rcgen::SignatureAlgorithm) -> Vec<u8> {
        let key = rcgen::KeyPair::generate_for(algorithm).unwrap();
        let params = rcgen::CertificateParams::new(vec!["db.internal".to_string()]).unwrap();
        params.self_signed(&key).unwrap().der().to_vec()
    }

    fn ca_pem() -> String {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        params.self_signed(&key).unwrap().pem()
    }

    /// The binding hashes with the certificate's signature's hash: a
    /// server computes the same, or refuses the password exchange.
    #[test]
    fn the_channel_binding_hash_is_the_certificate_signature_s() {
        let p256 = certificate_signed_with(&rcgen::PKCS_ECDSA_P256_SHA256);
        assert_eq!(
            end_point(&p256).unwrap(),
            ring::digest::digest(&ring::digest::SHA256, &p256).as_ref()
        );
        let p384 = certificate_signed_with(&rcgen::PKCS_ECDSA_P384_SHA384);
        assert_eq!(
            end_point(&p384).unwrap(),
            ring::digest::digest(&ring::digest::SHA384, &p384).as_ref()
        );
        assert_eq!(
            end_point(&certificate_signed_with(&rcgen::PKCS_ED25519)),
            None
        );
        assert_eq!(end_point(b"\x30\x82\xff"), None);
        assert_eq!(end_point(b""), None);
    }
}
