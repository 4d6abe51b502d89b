//! AWS Signature Version 4 for the one request shape Bedrock needs: a POST
//! with a JSON body, signed in headers.
//!
//! The AWS SDK's signer (`aws-sigv4`) drags in the smithy runtime; the
//! algorithm itself is a canonical request, a string to sign and a chain of
//! HMACs, and AWS publishes test vectors for it, which the tests below use.
//! The clock is a parameter so that signatures are reproducible.
//!
//! The classic trap is the path: Bedrock's URL already carries the model id
//! percent-encoded (`anthropic.claude…-v1%3A0`), and for every service but
//! S3 the canonical URI encodes the path once more (`%253A`). Signing the
//! decoded or the once-encoded path yields `SignatureDoesNotMatch`.

use std::time::SystemTime;

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

const ALGORITHM: &str = "AWS4-HMAC-SHA256";

/// Who signs, for which region and service.
pub struct Signer<'a> {
    pub access_key_id: &'a str,
    pub secret_access_key: &'a str,
    /// Temporary credentials' token, sent and signed as
    /// `x-amz-security-token`.
    pub session_token: Option<&'a str>,
    pub region: &'a str,
    pub service: &'a str,
}

/// The parts of a request that the signature covers.
pub struct Request<'a> {
    pub method: &'a str,
    /// `host` or `host:port`, as the HTTP client will send it.
    pub host: &'a str,
    /// The path exactly as it appears in the URL (already percent-encoded).
    pub path: &'a str,
    /// Query parameters, not yet encoded.
    pub query: &'a [(&'a str, &'a str)],
    /// Further headers to sign besides `host`, `x-amz-date` and the token.
    pub headers: &'a [(&'a str, &'a str)],
    /// The body bytes exactly as sent.
    pub payload: &'a [u8],
}

/// The headers to add, and the intermediate strings (for tests and for
/// debugging a `SignatureDoesNotMatch`, whose message quotes AWS's own
/// canonical request).
#[derive(Debug)]
pub struct Signed {
    /// `x-amz-date`, `x-amz-security-token` (with a token) and
    /// `authorization`, in that order.
    pub headers: Vec<(String, String)>,
    pub canonical_request: String,
    pub string_to_sign: String,
}

impl Signer<'_> {
    pub fn sign(&self, request: &Request<'_>, now: SystemTime) -> Signed {
        // Outside jiff's range (years beyond 9999) no signature would be
        // valid anyway; the epoch keeps the function total.
        let timestamp = jiff::Timestamp::try_from(now).unwrap_or(jiff::Timestamp::UNIX_EPOCH);
        let amz_date = timestamp.strftime("%Y%m%dT%H%M%SZ").to_string();
        let date = &amz_date[..8];

        let mut headers: Vec<(String, String)> = vec![
            ("host".to_string(), request.host.to_string()),
            ("x-amz-date".to_string(), amz_date.clone()),
        ];
        if let Some(token) = self.session_token {
            headers.push(("x-amz-security-token".to_string(), token.to_string()));
        }
        headers.extend(
            request
                .headers
                .iter()
                .map(|(name, value)| (name.to_ascii_lowercase(), canonical_value(value))),
        );
        headers.sort();
        let signed_headers = headers
            .iter()
            .map(|(name, _)| name.as_str())
            .collect::<Vec<_>>()
            .join(";");
        let canonical_headers: String = headers
            .iter()
            .map(|(name, value)| format!("{name}:{value}\n"))
            .collect();

        let canonical_request = format!(
            "{}\n{}\n{}\n{}\n{}\n{}",
            request.method,
            canonical_uri(request.path),
            canonical_query(request.query),
            canonical_headers,
            signed_headers,
            sha256_hex(request.payload),
        );
        let scope = format!("{date}/{}/{}/aws4_request", self.region, self.service);
        let string_to_sign = format!(
            "{ALGORITHM}\n{amz_date}\n{scope}\n{}",
            sha256_hex(canonical_request.as_bytes())
        );
        let signature = hex(&hmac(&self.signing_key(date), string_to_sign.as_bytes()));
        let authorization = format!(
            "{ALGORITHM} Credential={}/{scope}, SignedHeaders={signed_headers}, Signature={signature}",
            self.access_key_id
        );

        let mut out = vec![("x-amz-date".to_string(), amz_date)];
        if let Some(token) = self.session_token {
            out.push(("x-amz-security-token".to_string(), token.to_string()));
        }
        out.push(("authorization".to_string(), authorization));
        Signed {
            headers: out,
            canonical_request,
            string_to_sign,
        }
    }

    fn signing_key(&self, date: &str) -> [u8; 32] {
        let key = hmac(
            format!("AWS4{}", self.secret_access_key).as_bytes(),
            date.as_bytes(),
        );
        let key = hmac(&key, self.region.as_bytes());
        let key = hmac(&key, self.service.as_bytes());
        hmac(&key, b"aws4_request")
    }
}

/// The Host header the HTTP client derives from `url`: the port only when
/// it is not the scheme's default.
pub fn host(url: &url::Url) -> String {
    match (url.host_str(), url.port()) {
        (Some(host), Some(port)) => format!("{host}:{port}"),
        (Some(host), None) => host.to_string(),
        (None, _) => String::new(),
    }
}

/// AWS's `UriEncode`: everything but the unreserved characters
/// (`A-Z a-z 0-9 - _ . ~`) as `%XX` with upper-case hex; `/` kept only
/// when `keep_slash`.
pub fn uri_encode(input: &str, keep_slash: bool) -> String {
    let mut out = String::with_capacity(input.len());
    for &byte in input.as_bytes() {
        match byte {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(char::from(byte))
            }
            b'/' if keep_slash => out.push('/'),
            _ => out.push_str(&format!("%{byte:02X}")),
        }
    }
    out
}

/// The path as it appears in the URL, encoded once more (what every
/// service but S3 expects).
fn canonical_uri(path: &str) -> String {
    if path.is_empty() {
        return "/".to_string();
    }
    uri_encode(path, true)
}

fn canonical_query(query: &[(&str, &str)]) -> String {
    let mut pairs: Vec<(String, String)> = query
        .iter()
        .map(|(k, v)| (uri_encode(k, false), uri_encode(v, false)))
        .collect();
    pairs.sort();
    pairs
        .iter()
        .map(|(k, v)| format!("{k}={v}"))
        .collect::<Vec<_>>()
        .join("&")
}

/// Trimmed, with runs of spaces collapsed to one.
fn canonical_value(value: &str) -> String {
    value.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn sha256_hex(data: &[u8]) -> String {
    hex(&Sha256::digest(data))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[expect(
    clippy::expect_used,
    reason = "HMAC is defined for keys of every length; `new_from_slice` cannot fail for it"
)]
fn hmac(key: &[u8], data: &[u8]) -> [u8; 32] {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC accepts any key length");
    mac.update(data);
    mac.finalize().into_bytes().into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    /// The credentials, scope and time of AWS's SigV4 test suite.
    fn suite_signer(session_token: Option<&str>) -> Signer<'_> {
        Signer {
            access_key_id: "AKIDEXAMPLE",
            secret_access_key: "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
            session_token,
            region: "us-east-1",
            service: "service",
        }
    }

    /// 2015-08-30T12:36:00Z.
    fn suite_time() -> SystemTime {
        SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(1_440_938_160)
    }

    fn suite_request<'a>(
        method: &'a str,
        path: &'a str,
        query: &'a [(&'a str, &'a str)],
        headers: &'a [(&'a str, &'a str)],
        payload: &'a [u8],
    ) -> Request<'a> {
        Request {
            method,
            host: "example.amazonaws.com",
            path,
            query,
            headers,
            payload,
        }
    }

    fn authorization(signed: &Signed) -> &str {
        &signed.headers.last().unwrap().1
    }

    const SUITE_TOKEN: &str = "AQoDYXdzEPT//////////wEXAMPLEtc764bNrC9SAPBSM22wDOk4x4HIZ8j4FZTwdQWLWsKWHGBuFqwAeMicRXmxfpSPfIeoIYRqTflfKD8YUuwthAx7mSEI/qkPpKPi/kMcGdQrmGdeehM4IC1NtBmUpp2wUE8phUZampKsburEDy0KPkyQDYwT7WZ0wq5VSXDvp75YU9HFvlRd8Tx6q6fE8YQcHNVXAkiY9q6d+xo0rKwT38xVqr7ZD0u0iPPkUL64lIZbqBAz+scqKmlzm8FDrypNC9Yjc8fPOLn9FX9KSYvKTr4rvx3iSIlTJabIQwj2ICCR/oLxBA==";

    #[test]
    fn get_vanilla_every_step() {
        let signed =
            suite_signer(None).sign(&suite_request("GET", "/", &[], &[], b""), suite_time());
        assert_eq!(
            signed.canonical_request,
            "GET\n/\n\nhost:example.amazonaws.com\nx-amz-date:20150830T123600Z\n\nhost;x-amz-date\n\
             e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
        assert_eq!(
            signed.string_to_sign,
            "AWS4-HMAC-SHA256\n20150830T123600Z\n20150830/us-east-1/service/aws4_request\n\
             bb579772317eb040ac9ed261061d46c1f17a8133879d6129b6e1c25292927e63"
        );
        assert_eq!(
            hex(&suite_signer(None).signing_key("20150830")),
            "938127b5336810ddb6a5d6af445fcac9e371f9ed418ed386b022aed82901be75"
        );
        assert_eq!(
            signed.headers,
            vec![
                ("x-amz-date".to_string(), "20150830T123600Z".to_string()),
                (
                    "authorization".to_string(),
                    "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, \
                     SignedHeaders=host;x-amz-date, \
                     Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31"
                        .to_string()
                ),
            ]
        );
    }

    #[test]
    fn published_suite_signatures() {
        let prefix =
            "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, ";
        let cases: Vec<(&str, Request<'_>, Option<&str>, &str)> = vec![
            (
                "post-vanilla",
                suite_request("POST", "/", &[], &[], b""),
                None,
                "SignedHeaders=host;x-amz-date, Signature=5da7c1a2acd57cee7505fc6676e4e544621c30862966e37dddb68e92efbe5d6b",
            ),
            (
                "get-vanilla-query-order-key-case",
                suite_request(
                    "GET",
                    "/",
                    &[("Param2", "value2"), ("Param1", "value1")],
                    &[],
                    b"",
                ),
                None,
                "SignedHeaders=host;x-amz-date, Signature=b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500",
            ),
            (
                "get-utf8",
                suite_request("GET", "/ሴ", &[], &[], b""),
                None,
                "SignedHeaders=host;x-amz-date, Signature=8318018e0b0f223aa2bbf98705b62bb787dc9c0e678f255a891fd03141be5d85",
            ),
            (
                "get-header-value-trim",
                suite_request(
                    "GET",
                    "/",
                    &[],
                    &[("My-Header1", " value1"), ("My-Header2", "\"a   b   c\"")],
                    b"",
                ),
                None,
                "SignedHeaders=host;my-header1;my-header2;x-amz-date, Signature=acc3ed3afb60bb290fc8d2dd0098b9911fcaa05412b367055dee359757a9c736",
            ),
            (
                "post-x-www-form-urlencoded",
                suite_request(
                    "POST",
                    "/",
                    &[],
                    &[("Content-Type", "application/x-www-form-urlencoded")],
                    b"Param1=value1",
                ),
                None,
                "SignedHeaders=content-type;host;x-amz-date, Signature=ff11897932ad3f4e8b18135d722051e5ac45fc38421b1da7b9d196a0fe09473a",
            ),
            (
                "post-sts-header-before",
                suite_request("POST", "/", &[], &[], b""),
                Some(SUITE_TOKEN),
                "SignedHeaders=host;x-amz-date;x-amz-security-token, Signature=85d96828115b5dc0cfc3bd16ad9e210dd772bbebba041836c64533a82be05ead",
            ),
        ];
        for (name, request, token, expected) in cases {
            let signed = suite_signer(token).sign(&request, suite_time());
            assert_eq!(
                authorization(&signed),
                format!("{prefix}{expected}"),
                "{name}"
            );
        }
    }

    #[test]
    fn the_session_token_is_sent_and_signed() {
        let signed = suite_signer(Some(SUITE_TOKEN))
            .sign(&suite_request("POST", "/", &[], &[], b""), suite_time());
        assert_eq!(
            signed.string_to_sign.lines().last(),
            // The suite's post-sts-header-before.sts.
            Some("c237e1b440d4c63c32ca95b5b99481081cb7b13c7e40434868e71567c1a882f6")
        );
        assert_eq!(
            signed.headers[1],
            ("x-amz-security-token".to_string(), SUITE_TOKEN.to_string())
        );
    }

    #[test]
    fn encoded_paths_are_encoded_again() {
        assert_eq!(
            canonical_uri("/model/anthropic.claude-sonnet-4-5-20250929-v1%3A0/converse-stream"),
            "/model/anthropic.claude-sonnet-4-5-20250929-v1%253A0/converse-stream"
        );
        assert_eq!(canonical_uri(""), "/");
        assert_eq!(
            uri_encode(
                "arn:aws:bedrock:us-east-1:1:inference-profile/us.x~y z",
                false
            ),
            "arn%3Aaws%3Abedrock%3Aus-east-1%3A1%3Ainference-profile%2Fus.x~y%20z"
        );
    }
}
