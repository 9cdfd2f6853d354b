//! Who the client really is behind a proxy: the PROXY protocol (v1 text or v2 binary, as
//! HAProxy and nginx send it) at the start of a connection, and the `Forwarded` /
//! `X-Forwarded-For` / `X-Forwarded-Proto` headers of each request. Either is believed only
//! from a trusted proxy: a client cannot claim another address by sending the header
//! itself. Parsing of PROXY headers is the `ppp` crate's.

use http::HeaderMap;
use ipnet::IpNet;
use ppp::{v1, v2, HeaderResult, PartialResult};
use std::io;
use std::net::{IpAddr, SocketAddr};
use tokio::io::AsyncReadExt;
use tokio::net::TcpStream;

/// The largest PROXY header taken (v2 allows TLVs; real ones are a few dozen bytes).
const MAX_HEADER: usize = 4096;

/// The proxies whose word on the client is believed.
#[derive(Debug, Clone, Default)]
pub struct Trusted(pub Vec<IpNet>);

impl Trusted {
    pub fn contains(&self, ip: IpAddr) -> bool {
        let ip = canonical(ip);
        self.0.iter().any(|net| net.contains(&ip))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// An IPv4 peer on an IPv6 socket (::ffff:a.b.c.d) is that IPv4 address.
fn canonical(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// Reads the PROXY header a connection starts with. Ok(Some(client)) for a proxied TCP
/// connection, Ok(None) for LOCAL / UNKNOWN (the proxy's own health check: keep the peer),
/// Err for anything else (the connection is then closed).
pub(crate) async fn read_header(stream: &mut TcpStream) -> io::Result<Option<SocketAddr>> {
    let mut buf = vec![0u8; 256];
    loop {
        let n = stream.peek(&mut buf).await?;
        if n == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
        let (len, client) = match HeaderResult::parse(&buf[..n]) {
            r if r.is_incomplete() => {
                if n == buf.len() {
                    if buf.len() >= MAX_HEADER {
                        return Err(io::Error::new(io::ErrorKind::InvalidData, "PROXY header too long"));
                    }
                    buf.resize(buf.len() * 2, 0);
                } else {
                    // Part of the header is here; wait for more (the header timeout bounds it).
                    tokio::time::sleep(std::time::Duration::from_millis(2)).await;
                }
                continue;
            }
            HeaderResult::V1(Ok(h)) => (h.header.len(), v1_client(&h.addresses)),
            HeaderResult::V2(Ok(h)) => (h.len(), v2_client(&h)),
            _ => return Err(io::Error::new(io::ErrorKind::InvalidData, "not a PROXY protocol header")),
        };
        let mut consumed = vec![0u8; len];
        stream.read_exact(&mut consumed).await?;
        return Ok(client);
    }
}

fn v1_client(a: &v1::Addresses) -> Option<SocketAddr> {
    match a {
        v1::Addresses::Tcp4(ip) => Some(SocketAddr::new(ip.source_address.into(), ip.source_port)),
        v1::Addresses::Tcp6(ip) => Some(SocketAddr::new(ip.source_address.into(), ip.source_port)),
        v1::Addresses::Unknown => None,
    }
}

fn v2_client(h: &v2::Header<'_>) -> Option<SocketAddr> {
    if h.command == v2::Command::Local {
        return None;
    }
    match h.addresses {
        v2::Addresses::IPv4(ip) => Some(SocketAddr::new(ip.source_address.into(), ip.source_port)),
        v2::Addresses::IPv6(ip) => Some(SocketAddr::new(ip.source_address.into(), ip.source_port)),
        _ => None,
    }
}

/// The client and scheme a request was made with, when `peer` is a trusted proxy that
/// said so: the nearest address in the forwarding chain that is not itself a trusted proxy
/// (RFC 7239 `Forwarded: for=`, else `X-Forwarded-For`), and `proto=` /
/// `X-Forwarded-Proto`. None when nothing is to be believed.
pub(crate) fn forwarded(peer: IpAddr, headers: &HeaderMap, trusted: &Trusted) -> Option<(Option<String>, Option<&'static str>)> {
    if trusted.is_empty() || !trusted.contains(peer) {
        return None;
    }
    let (chain, proto) = match headers.get_all(http::header::FORWARDED).iter().next() {
        Some(_) => forwarded_header(headers),
        None => (x_forwarded_for(headers), headers.get("x-forwarded-proto").and_then(|v| v.to_str().ok()).map(str::to_owned)),
    };
    // Walk from the nearest hop back: the first address not a trusted proxy is the client.
    let mut client = None;
    for hop in chain.iter().rev() {
        let Some(ip) = parse_ip(hop) else { break };
        client = Some(hop.clone());
        if !trusted.contains(ip) {
            break;
        }
    }
    let scheme = match proto.as_deref().map(|p| p.trim().to_ascii_lowercase()) {
        Some(p) if p == "https" => Some("https"),
        Some(p) if p == "http" => Some("http"),
        _ => None,
    };
    Some((client, scheme))
}

fn x_forwarded_for(headers: &HeaderMap) -> Vec<String> {
    headers
        .get_all("x-forwarded-for")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
        .collect()
}

/// RFC 7239: `Forwarded: for=192.0.2.43;proto=https, for="[2001:db8::1]:4711"`.
fn forwarded_header(headers: &HeaderMap) -> (Vec<String>, Option<String>) {
    let mut chain = Vec::new();
    let mut proto = None;
    for value in headers.get_all(http::header::FORWARDED).iter().filter_map(|v| v.to_str().ok()) {
        for element in value.split(',') {
            for pair in element.split(';') {
                let Some((k, v)) = pair.split_once('=') else { continue };
                let v = v.trim().trim_matches('"').to_owned();
                match k.trim().to_ascii_lowercase().as_str() {
                    "for" => chain.push(v),
                    "proto" => proto = Some(v),
                    _ => {}
                }
            }
        }
    }
    (chain, proto)
}

/// "203.0.113.7", "203.0.113.7:1234", "[2001:db8::1]:4711", "2001:db8::1".
fn parse_ip(hop: &str) -> Option<IpAddr> {
    if let Ok(sa) = hop.parse::<SocketAddr>() {
        return Some(sa.ip());
    }
    hop.trim_start_matches('[').trim_end_matches(']').parse::<IpAddr>().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trusted() -> Trusted {
        Trusted(vec!["10.0.0.0/8".parse().unwrap(), "127.0.0.1/32".parse().unwrap()])
    }

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(http::header::HeaderName::from_bytes(k.as_bytes()).unwrap(), v.parse().unwrap());
        }
        h
    }

    #[test]
    fn only_a_trusted_peer_is_believed_and_the_nearest_untrusted_hop_is_the_client() {
        let h = headers(&[("x-forwarded-for", "198.51.100.9, 203.0.113.7, 10.1.2.3"), ("x-forwarded-proto", "https")]);
        assert_eq!(forwarded("127.0.0.1".parse().unwrap(), &h, &trusted()), Some((Some("203.0.113.7".into()), Some("https"))));
        assert_eq!(forwarded("192.0.2.1".parse().unwrap(), &h, &trusted()), None, "an untrusted peer's claim is ignored");
        assert_eq!(forwarded("127.0.0.1".parse().unwrap(), &h, &Trusted::default()), None);
        let f = headers(&[("forwarded", "for=192.0.2.60;proto=https;by=203.0.113.43, for=\"[2001:db8::17]:4711\"")]);
        assert_eq!(forwarded("::ffff:10.0.0.1".parse().unwrap(), &f, &trusted()), Some((Some("[2001:db8::17]:4711".into()), Some("https"))));
    }

    #[test]
    fn proxy_headers_v1_and_v2_give_the_client() {
        let v1 = HeaderResult::parse(b"PROXY TCP4 203.0.113.7 10.0.0.1 56324 443\r\nGET /");
        match v1 {
            HeaderResult::V1(Ok(h)) => {
                assert_eq!(h.header.len(), "PROXY TCP4 203.0.113.7 10.0.0.1 56324 443\r\n".len());
                assert_eq!(v1_client(&h.addresses), Some("203.0.113.7:56324".parse().unwrap()));
            }
            other => panic!("{other:?}"),
        }
        assert!(HeaderResult::parse(b"PROXY TCP4 203.0.1").is_incomplete());
    }
}
