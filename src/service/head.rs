//! What the engine needs from a request's headers, taken in one pass over them: a lookup
//! per header hashed its name and probed the map four times per request.

use http::header::{AUTHORIZATION, CONTENT_LENGTH, HOST, TRANSFER_ENCODING, UPGRADE};
use http::{HeaderMap, Version};

#[derive(Clone, Copy)]
pub(crate) struct Head {
    /// Neither Transfer-Encoding nor a Content-Length other than 0.
    pub bodiless: bool,
    /// The request's Content-Length (the first, as hyper has refused conflicting ones).
    pub declared: Option<u64>,
    /// RFC 9112 §3.2: an HTTP/1.1 request carries exactly one Host header, HTTP/1.0 at
    /// most one.
    pub host_ok: bool,
    /// An Upgrade header is there; whether it asks for a WebSocket is read only then.
    pub upgrade: bool,
    /// An Authorization header is there: the output cache neither serves nor keeps the
    /// answer (its lookup of the name cost a hash per request).
    pub authorization: bool,
}

pub(crate) fn scan(version: Version, headers: &HeaderMap) -> Head {
    let (mut hosts, mut length, mut chunked, mut upgrade, mut authorization) = (0usize, None, false, false, false);
    for (name, value) in headers {
        if *name == HOST {
            hosts += 1;
        } else if *name == CONTENT_LENGTH {
            length = length.or(Some(value));
        } else if *name == TRANSFER_ENCODING {
            chunked = true;
        } else if *name == UPGRADE {
            upgrade = true;
        } else if *name == AUTHORIZATION {
            authorization = true;
        }
    }
    Head {
        bodiless: !chunked && length.is_none_or(|v| v.as_bytes() == b"0"),
        declared: length.and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok()),
        host_ok: if version == Version::HTTP_11 { hosts == 1 } else { hosts <= 1 },
        upgrade,
        authorization,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn head(version: Version, lines: &[(&'static str, &'static str)]) -> Head {
        let mut map = HeaderMap::new();
        for (k, v) in lines {
            map.append(*k, HeaderValue::from_static(v));
        }
        scan(version, &map)
    }

    #[test]
    fn one_pass_reads_what_the_lookups_read() {
        let h = head(Version::HTTP_11, &[("host", "a"), ("accept", "*/*")]);
        assert!(h.bodiless && h.host_ok && !h.upgrade && h.declared.is_none() && !h.authorization);
        assert!(head(Version::HTTP_11, &[("host", "a"), ("authorization", "Basic eA==")]).authorization);
        let h = head(Version::HTTP_11, &[("host", "a"), ("content-length", "0")]);
        assert!(h.bodiless && h.declared == Some(0));
        let h = head(Version::HTTP_11, &[("host", "a"), ("content-length", "12"), ("upgrade", "websocket")]);
        assert!(!h.bodiless && h.declared == Some(12) && h.upgrade);
        let h = head(Version::HTTP_11, &[("host", "a"), ("transfer-encoding", "chunked")]);
        assert!(!h.bodiless && h.declared.is_none());
        assert!(!head(Version::HTTP_11, &[]).host_ok);
        assert!(!head(Version::HTTP_11, &[("host", "a"), ("host", "b")]).host_ok);
        assert!(head(Version::HTTP_10, &[]).host_ok);
        assert!(!head(Version::HTTP_10, &[("host", "a"), ("host", "b")]).host_ok);
    }
}
