//! Who is on the other end of a gateway connection, and how many of them
//! may hold a connection at once.
//!
//! Behind a TLS reverse proxy every TCP peer is the proxy, so limits kept
//! per TCP address would lump every client together: a few wrong connects
//! would lock the owner out and one idle client's connections would take
//! everyone's slots. When the peer is one of `[gateway] trusted_proxies`,
//! the client is the address the proxy put in `X-Forwarded-For` (or
//! RFC 7239 `Forwarded`), read from the right so that a client cannot
//! choose it by sending the header itself; from any other peer the headers
//! are ignored. Limits count an IPv6 client by its /64, the block one
//! subscriber usually holds, and an IPv4 client by its address.
//!
//! Connections are counted in three tiers, each with a global and a
//! per-address cap ([`Caps`]): TCP connections that have not become a
//! websocket (counted from `accept`), websockets that have not
//! authenticated, and authenticated clients. A connection holds a place in
//! one tier at a time, so strangers never take an authenticated client's.

use parking_lot::Mutex;
use std::collections::HashMap;
use std::net::{IpAddr, Ipv6Addr};
use std::sync::Arc;

use axum::http::HeaderMap;
use ipnet::IpNet;

/// The address limits count `ip` under: an IPv4 address as it is (also
/// when it comes mapped into IPv6), an IPv6 address by its /64.
pub fn limit_key(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V4(_) => ip,
        IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => IpAddr::V4(v4),
            None => {
                let bits = u128::from(v6) & !(u128::MAX >> 64);
                IpAddr::V6(Ipv6Addr::from(bits))
            }
        },
    }
}

/// `[gateway] trusted_proxies`, parsed.
#[derive(Clone, Debug, Default)]
pub struct Proxies(Vec<IpNet>);

impl Proxies {
    /// Parses addresses (`10.0.0.7`, `::1`) and CIDR ranges
    /// (`10.0.0.0/8`); the error names the entry and the form.
    pub fn parse(entries: &[String]) -> Result<Self, String> {
        entries
            .iter()
            .map(|entry| {
                let entry = entry.trim();
                entry
                    .parse::<IpNet>()
                    .or_else(|_| entry.parse::<IpAddr>().map(IpNet::from))
                    .map_err(|_| {
                        format!(
                            "[gateway] trusted_proxies: `{entry}` is neither an address nor a CIDR range (such as 127.0.0.1, ::1 or 10.0.0.0/8)"
                        )
                    })
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Self)
    }

    pub fn trusts(&self, ip: IpAddr) -> bool {
        let ip = match ip {
            IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
            IpAddr::V4(_) => ip,
        };
        self.0.iter().any(|net| net.contains(&ip))
    }

    /// The client behind `peer`: `peer` itself unless it is a trusted
    /// proxy; then the rightmost address in the forwarding header that is
    /// not a trusted proxy (each proxy appends the address it saw, so
    /// everything left of that hop may be the client's own invention).
    /// `X-Forwarded-For` is read when present, else `Forwarded`.
    pub fn client(&self, peer: IpAddr, headers: &HeaderMap) -> IpAddr {
        if !self.trusts(peer) {
            return peer;
        }
        let hops = forwarded_for(headers);
        for hop in hops.iter().rev() {
            match hop {
                Some(ip) if self.trusts(*ip) => continue,
                Some(ip) => return *ip,
                // `unknown`, an obfuscated name, garbage: nothing to its
                // left can be believed, and it names no one to count.
                None => return peer,
            }
        }
        // Every hop is a trusted proxy: the farthest one is the client.
        hops.first().copied().flatten().unwrap_or(peer)
    }
}

/// The hops of `X-Forwarded-For` (else of `Forwarded`'s `for=`), left to
/// right; `None` for a hop that is not an address.
fn forwarded_for(headers: &HeaderMap) -> Vec<Option<IpAddr>> {
    let joined = |name: &str| -> Option<String> {
        let values: Vec<&str> = headers
            .get_all(name)
            .iter()
            .map(|v| v.to_str().unwrap_or("\u{0}"))
            .collect();
        (!values.is_empty()).then(|| values.join(","))
    };
    if let Some(xff) = joined("x-forwarded-for") {
        return xff.split(',').map(|hop| parse_hop(hop.trim())).collect();
    }
    let Some(forwarded) = joined("forwarded") else {
        return Vec::new();
    };
    forwarded
        .split(',')
        .map(|element| {
            element
                .split(';')
                .filter_map(|pair| pair.split_once('='))
                .find(|(name, _)| name.trim().eq_ignore_ascii_case("for"))
                .and_then(|(_, value)| parse_hop(value.trim().trim_matches('"')))
        })
        .collect()
}

/// An address as a proxy writes it: `1.2.3.4`, `1.2.3.4:5678`, `::1`,
/// `[::1]` or `[::1]:5678`.
fn parse_hop(hop: &str) -> Option<IpAddr> {
    if let Ok(ip) = hop.parse::<IpAddr>() {
        return Some(ip);
    }
    if let Ok(socket) = hop.parse::<std::net::SocketAddr>() {
        return Some(socket.ip());
    }
    hop.strip_prefix('[')?.strip_suffix(']')?.parse().ok()
}

/// One tier of connections: how many are open, in all and per address.
#[derive(Debug)]
pub struct Caps {
    max: usize,
    per_address: usize,
    open: Mutex<(usize, HashMap<IpAddr, usize>)>,
}

/// A connection's place in a tier; freed when dropped.
#[derive(Debug)]
pub struct Slot {
    caps: Arc<Caps>,
    key: Option<IpAddr>,
}

impl Caps {
    pub fn new(max: usize, per_address: usize) -> Arc<Self> {
        Arc::new(Self {
            max,
            per_address,
            open: Mutex::new((0, HashMap::new())),
        })
    }

    fn lock(&self) -> parking_lot::MutexGuard<'_, (usize, HashMap<IpAddr, usize>)> {
        self.open.lock()
    }

    /// A place for a connection from `key` (see [`limit_key`]); `None` as
    /// the key counts it in the total only (a trusted proxy's connection,
    /// before its client is known). `None` back when a cap is reached.
    pub fn take(self: &Arc<Self>, key: Option<IpAddr>) -> Option<Slot> {
        let mut open = self.lock();
        let from_key = key.map_or(0, |key| open.1.get(&key).copied().unwrap_or(0));
        if open.0 >= self.max || (key.is_some() && from_key >= self.per_address) {
            return None;
        }
        open.0 += 1;
        if let Some(key) = key {
            *open.1.entry(key).or_default() += 1;
        }
        Some(Slot {
            caps: self.clone(),
            key,
        })
    }

    /// Open connections, in all.
    #[cfg(test)]
    pub fn open(&self) -> usize {
        self.lock().0
    }
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut open = self.caps.lock();
        open.0 = open.0.saturating_sub(1);
        if let Some(key) = self.key
            && let Some(n) = open.1.get_mut(&key)
        {
            *n = n.saturating_sub(1);
            if *n == 0 {
                open.1.remove(&key);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, HeaderValue::from_str(value).unwrap());
        }
        map
    }

    #[test]
    fn ipv6_counts_by_its_64_and_ipv4_by_its_address() {
        assert_eq!(limit_key(ip("2001:db8:1:2:aaaa::1")), ip("2001:db8:1:2::"));
        assert_eq!(
            limit_key(ip("2001:db8:1:2:ffff:1:2:3")),
            limit_key(ip("2001:db8:1:2::9"))
        );
        assert_ne!(
            limit_key(ip("2001:db8:1:3::1")),
            limit_key(ip("2001:db8:1:2::1"))
        );
        assert_eq!(limit_key(ip("10.1.2.3")), ip("10.1.2.3"));
        assert_ne!(limit_key(ip("10.1.2.3")), limit_key(ip("10.1.2.4")));
        assert_eq!(limit_key(ip("::ffff:10.1.2.3")), ip("10.1.2.3"));
    }

    #[test]
    fn forwarding_headers_count_only_from_a_trusted_proxy_and_from_the_right() {
        let proxies = Proxies::parse(&["127.0.0.1".into(), "10.0.0.0/8".into()]).unwrap();
        let proxy = ip("127.0.0.1");
        // From a stranger the header is ignored.
        let spoofed = headers(&[("x-forwarded-for", "203.0.113.9")]);
        assert_eq!(
            proxies.client(ip("198.51.100.7"), &spoofed),
            ip("198.51.100.7")
        );
        // From the proxy: the rightmost hop that is no proxy of ours, not
        // what the client wrote to the left of it.
        let chain = headers(&[("x-forwarded-for", "6.6.6.6, 198.51.100.7, 10.1.1.1")]);
        assert_eq!(proxies.client(proxy, &chain), ip("198.51.100.7"));
        let split = headers(&[
            ("x-forwarded-for", "6.6.6.6"),
            ("x-forwarded-for", "198.51.100.8"),
        ]);
        assert_eq!(proxies.client(proxy, &split), ip("198.51.100.8"));
        let forwarded = headers(&[(
            "forwarded",
            "for=6.6.6.6, for=\"[2001:db8::5]:4711\";proto=https, for=10.2.2.2",
        )]);
        assert_eq!(proxies.client(proxy, &forwarded), ip("2001:db8::5"));
        // Garbage in the proxy's own hop names no one: the proxy counts.
        let unknown = headers(&[("forwarded", "for=6.6.6.6, for=unknown")]);
        assert_eq!(proxies.client(proxy, &unknown), proxy);
        // No header: the proxy itself.
        assert_eq!(proxies.client(proxy, &HeaderMap::new()), proxy);
        // Ports and brackets as proxies write them.
        let ported = headers(&[("x-forwarded-for", "198.51.100.7:5555")]);
        assert_eq!(proxies.client(proxy, &ported), ip("198.51.100.7"));
        // No proxies configured: nobody's header counts.
        assert_eq!(Proxies::default().client(proxy, &chain), proxy);
        let err = Proxies::parse(&["10.0.0.0/33".into()]).unwrap_err();
        assert!(err.contains("`10.0.0.0/33`"), "{err}");
    }

    #[test]
    fn caps_hold_a_total_and_a_per_address_count_until_slots_drop() {
        let caps = Caps::new(3, 2);
        let a = Some(ip("10.0.0.1"));
        let a1 = caps.take(a).unwrap();
        let _a2 = caps.take(a).unwrap();
        assert!(caps.take(a).is_none(), "per address");
        let _b = caps.take(Some(ip("10.0.0.2"))).unwrap();
        assert!(caps.take(None).is_none(), "in all");
        drop(a1);
        assert_eq!(caps.open(), 2);
        let _unkeyed = caps.take(None).unwrap();
        assert!(caps.take(a).is_none());
    }
}
