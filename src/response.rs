//! Turning the host's answer (status, a block of header lines, a body) into a checked
//! `Answer`, and the engine's own canned answers.

use crate::error::{Error, ErrorKind, Result};
use crate::request::Answer;
use bytes::Bytes;
use http::header::{HeaderName, HeaderValue, CONNECTION, CONTENT_LENGTH, TRANSFER_ENCODING};
use http::HeaderMap;

/// Parses "Name: value" lines separated by CRLF or LF. Content-Length and
/// Transfer-Encoding are the engine's business and are dropped.
pub fn parse_header_block(block: &[u8]) -> Result<HeaderMap> {
    parse_head(block).map(|(map, _)| map)
}

/// Header blocks this long or shorter are remembered per thread: a host answers most
/// requests with one of a few fixed blocks, and a copy of the parsed map costs a fraction of
/// parsing and validating it again.
const CACHED_BLOCK: usize = 256;
const CACHE_ENTRIES: usize = 8;

/// The map, the Content-Length the host stated, and whether the block names the output
/// cache's marker (most never do: then nothing has to take it off).
type Parsed = (HeaderMap, Option<u64>, bool);

/// Room in every answer's header map. hyper keeps the map of the answer it wrote and
/// parses the connection's next request into it: a copy made to measure (what `clone`
/// gives) had to grow, a reallocation inside hyper on every request.
pub(crate) const MAP_ROOM: usize = 6;

thread_local! {
    static PARSED: std::cell::RefCell<Vec<(Box<[u8]>, Parsed)>> = const { std::cell::RefCell::new(Vec::new()) };
    /// A request's header map, done with once its data was copied for the host: the next
    /// answer on this thread fills it instead of allocating its own (and the request's is
    /// not freed). One at most, so what it holds stays bounded.
    static SPARE_MAP: std::cell::Cell<Option<HeaderMap>> = const { std::cell::Cell::new(None) };
}

/// Hands a map nobody needs any more to this thread's next answer.
pub(crate) fn lend_map(map: HeaderMap) {
    if map.capacity() >= MAP_ROOM {
        SPARE_MAP.with(|s| s.set(Some(map)));
    }
}

/// Like `parse_header_block`, also returning the Content-Length the host stated (an
/// answer to HEAD may state the size of what GET would send).
pub fn parse_head(block: &[u8]) -> Result<(HeaderMap, Option<u64>)> {
    parse_marked(block).map(|(map, declared, _)| (map, declared))
}

fn parse_marked(block: &[u8]) -> Result<Parsed> {
    if block.is_empty() {
        return Ok((HeaderMap::new(), None, false));
    }
    if block.len() > CACHED_BLOCK {
        return parse_uncached(block);
    }
    let hit = PARSED.with(|c| {
        c.borrow().iter().find(|(k, _)| &k[..] == block).map(|(_, (map, declared, marked))| (roomy_copy(map), *declared, *marked))
    });
    if let Some(parsed) = hit {
        return Ok(parsed);
    }
    let parsed = parse_uncached(block)?;
    PARSED.with(|c| {
        let mut c = c.borrow_mut();
        if c.len() == CACHE_ENTRIES {
            c.remove(0);
        }
        c.push((block.into(), parsed.clone()));
    });
    Ok(parsed)
}

pub(crate) fn roomy_copy(map: &HeaderMap) -> HeaderMap {
    let mut copy = match SPARE_MAP.with(|s| s.take()) {
        Some(mut spare) => {
            spare.clear();
            spare.reserve(MAP_ROOM.max(map.len()));
            spare
        }
        None => HeaderMap::with_capacity(MAP_ROOM.max(map.len())),
    };
    for (name, value) in map {
        copy.append(name.clone(), value.clone());
    }
    copy
}

fn parse_uncached(block: &[u8]) -> Result<Parsed> {
    let mut declared = None;
    let mut map = HeaderMap::new();
    for raw in block.split(|b| *b == b'\n') {
        let line = raw.strip_suffix(b"\r").unwrap_or(raw);
        if line.is_empty() {
            continue;
        }
        let colon = line.iter().position(|b| *b == b':').ok_or_else(|| bad_line(line, "has no ':'"))?;
        let name = HeaderName::from_bytes(&line[..colon]).map_err(|_| bad_line(line, "has an invalid name"))?;
        let value = trim(&line[colon + 1..]);
        let value = HeaderValue::from_bytes(value).map_err(|_| bad_line(line, "has an invalid value"))?;
        if name == CONTENT_LENGTH {
            let n = value.to_str().ok().and_then(|v| v.parse::<u64>().ok());
            declared = Some(n.ok_or_else(|| bad_line(line, "is not a length"))?);
            continue;
        }
        if name == TRANSFER_ENCODING {
            continue;
        }
        map.append(name, value);
    }
    let marked = map.contains_key(crate::cache::MARKER);
    Ok((map, declared, marked))
}

fn trim(mut v: &[u8]) -> &[u8] {
    while let [b' ' | b'\t', rest @ ..] = v {
        v = rest;
    }
    while let [rest @ .., b' ' | b'\t'] = v {
        v = rest;
    }
    v
}

fn bad_line(line: &[u8], why: &str) -> Error {
    Error::new(ErrorKind::InvalidArg, format!("response header line {:?} {why}", String::from_utf8_lossy(line)))
}

/// Validates the status of a host's answer: a final status, 200..=999. A 1xx cannot end
/// a request: 101 comes from the engine when it accepts a WebSocket, and hyper has no
/// way to send an interim 103 from a server.
pub fn check_status(status: u16) -> Result<()> {
    match status {
        200..=999 => Ok(()),
        100..=199 => Err(Error::new(
            ErrorKind::InvalidArg,
            format!("status {status} is informational (1xx) and cannot end a request; answer with 200-999"),
        )),
        _ => Err(Error::new(ErrorKind::InvalidArg, format!("status {status} is not an HTTP status (200-999)"))),
    }
}

pub fn answer(status: u16, header_block: &[u8], body: Bytes) -> Result<Answer> {
    check_status(status)?;
    let (headers, declared_len, marked) = parse_marked(header_block)?;
    Ok(Answer { declared_len, marked, ..Answer::new(status, headers, body) })
}

/// A short plain-text answer the engine gives on its own (404, 413, 503 ...).
pub fn canned(status: u16, close: bool) -> Answer {
    let mut headers = HeaderMap::new();
    headers.insert(http::header::CONTENT_TYPE, HeaderValue::from_static("text/plain; charset=utf-8"));
    if close {
        headers.insert(CONNECTION, HeaderValue::from_static("close"));
    }
    let reason = http::StatusCode::from_u16(status).ok().and_then(|s| s.canonical_reason()).unwrap_or("Error");
    Answer::new(status, headers, Bytes::from(format!("{status} {reason}\n")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lent_request_map_carries_only_the_answers_headers() {
        let block = b"Content-Type: application/json\r\nX-Lent: 1\r\n";
        parse_header_block(block).unwrap();
        let mut request = HeaderMap::with_capacity(16);
        for n in 0..12 {
            request.append(HeaderName::from_bytes(format!("x-req-{n}").as_bytes()).unwrap(), HeaderValue::from_static("v"));
        }
        request.append("x-lent", HeaderValue::from_static("from the request"));
        lend_map(request);
        let m = parse_header_block(block).unwrap();
        assert_eq!(m.len(), 2);
        assert_eq!(m.get_all("x-lent").iter().collect::<Vec<_>>(), ["1"]);
        assert!(m.capacity() >= 12, "the request's room was reused");
    }

    #[test]
    fn header_block_accepts_crlf_and_lf_and_drops_framing_headers() {
        let m = parse_header_block(b"Content-Type: text/plain\r\nX-A:  1 \nContent-Length: 99\r\n").unwrap();
        assert_eq!(m["content-type"], "text/plain");
        assert_eq!(m["x-a"], "1");
        assert!(m.get("content-length").is_none());
    }

    #[test]
    fn bad_header_lines_are_rejected_with_the_line_named() {
        let e = parse_header_block(b"NoColon\r\n").unwrap_err();
        assert_eq!(e.kind, ErrorKind::InvalidArg);
        assert!(e.message.contains("NoColon"));
        assert!(parse_header_block(b"Bad Name: x\r\n").is_err());
        assert!(parse_header_block(b"X: a\x00b\r\n").is_err());
    }

    #[test]
    fn a_stated_content_length_is_kept_aside_and_a_bad_one_refused() {
        let (m, n) = parse_head(b"Content-Length: 1234\r\nX: y\r\n").unwrap();
        assert_eq!(n, Some(1234));
        assert!(m.get("content-length").is_none());
        assert!(parse_head(b"Content-Length: lots\r\n").is_err());
    }

    #[test]
    fn informational_and_out_of_range_statuses_are_refused() {
        assert!(check_status(200).is_ok());
        assert!(check_status(599).is_ok());
        assert!(check_status(100).is_err());
        assert!(check_status(1000).is_err());
    }
}
