//! The opening handshake (RFC 6455 §4.2): what a valid upgrade request carries and the
//! 101 answer to it.

use http::header::{HeaderMap, UPGRADE};
#[cfg(feature = "ws")]
use http::header::{HeaderValue, CONNECTION, SEC_WEBSOCKET_ACCEPT, SEC_WEBSOCKET_KEY, SEC_WEBSOCKET_VERSION};
#[cfg(feature = "ws")]
use http::{Method, Version};

#[cfg(feature = "ws")]
pub(crate) enum UpgradeCheck {
    /// A valid upgrade; the Sec-WebSocket-Accept value.
    Valid(HeaderValue),
    /// Not an upgrade at all: a WebSocket route answers 426 with `Upgrade: websocket`.
    NotUpgrade,
    /// An upgrade with something missing or wrong: 400 (or 426 for the version).
    Bad(u16, &'static str),
}

fn has_token(headers: &HeaderMap, name: http::header::HeaderName, token: &str) -> bool {
    headers
        .get_all(name)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|t| t.trim().eq_ignore_ascii_case(token))
}

/// The request asks for a WebSocket (its route then goes to a WebSocket endpoint).
pub(crate) fn wants_upgrade(headers: &HeaderMap) -> bool {
    has_token(headers, UPGRADE, "websocket")
}

#[cfg(feature = "ws")]
pub(crate) fn check_upgrade(method: &Method, version: Version, headers: &HeaderMap) -> UpgradeCheck {
    if !has_token(headers, UPGRADE, "websocket") {
        return UpgradeCheck::NotUpgrade;
    }
    if method != Method::GET || version != Version::HTTP_11 {
        return UpgradeCheck::Bad(400, "a WebSocket upgrade is a GET over HTTP/1.1");
    }
    if !has_token(headers, CONNECTION, "upgrade") {
        return UpgradeCheck::Bad(400, "Connection: Upgrade is missing");
    }
    if headers.get(SEC_WEBSOCKET_VERSION).is_none_or(|v| v.as_bytes() != b"13") {
        return UpgradeCheck::Bad(426, "only WebSocket version 13 is spoken here");
    }
    let Some(key) = headers.get(SEC_WEBSOCKET_KEY) else { return UpgradeCheck::Bad(400, "Sec-WebSocket-Key is missing") };
    // The key is 16 bytes, base64: 24 characters.
    if key.len() != 24 {
        return UpgradeCheck::Bad(400, "Sec-WebSocket-Key is not 16 bytes in base64");
    }
    let accept = tungstenite::handshake::derive_accept_key(key.as_bytes());
    match HeaderValue::from_str(&accept) {
        Ok(v) => UpgradeCheck::Valid(v),
        Err(_) => UpgradeCheck::Bad(400, "bad Sec-WebSocket-Key"),
    }
}

#[cfg(feature = "ws")]
/// The engine's part of the 101: the host's extra headers (subprotocol) come on top.
pub(crate) fn switching_headers(headers: &mut HeaderMap, accept: HeaderValue) {
    headers.insert(UPGRADE, HeaderValue::from_static("websocket"));
    headers.insert(CONNECTION, HeaderValue::from_static("Upgrade"));
    headers.insert(SEC_WEBSOCKET_ACCEPT, accept);
}

#[cfg(all(test, feature = "ws"))]
mod tests {
    use super::*;

    #[test]
    fn the_rfc_example_key_gets_the_rfc_accept_value() {
        let mut h = HeaderMap::new();
        h.insert(UPGRADE, HeaderValue::from_static("websocket"));
        h.insert(CONNECTION, HeaderValue::from_static("keep-alive, Upgrade"));
        h.insert(SEC_WEBSOCKET_VERSION, HeaderValue::from_static("13"));
        h.insert(SEC_WEBSOCKET_KEY, HeaderValue::from_static("dGhlIHNhbXBsZSBub25jZQ=="));
        match check_upgrade(&Method::GET, Version::HTTP_11, &h) {
            UpgradeCheck::Valid(v) => assert_eq!(v, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="),
            _ => panic!("valid upgrade refused"),
        }
        h.insert(SEC_WEBSOCKET_VERSION, HeaderValue::from_static("8"));
        assert!(matches!(check_upgrade(&Method::GET, Version::HTTP_11, &h), UpgradeCheck::Bad(426, _)));
        assert!(matches!(check_upgrade(&Method::GET, Version::HTTP_11, &HeaderMap::new()), UpgradeCheck::NotUpgrade));
    }
}
