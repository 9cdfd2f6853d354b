//! The HTTP side of a static file's answer that does not touch the disk: the request
//! headers it depends on (read in one pass), its type, entity tag and header map, the
//! preconditions of RFC 9110 §13 (304, 412) and byte ranges (206, 416).

use crate::static_cache::Facts;
use http::header::{
    HeaderMap, HeaderValue, ACCEPT_ENCODING, ACCEPT_RANGES, CACHE_CONTROL, CONTENT_LENGTH, CONTENT_TYPE, ETAG, IF_MATCH,
    IF_MODIFIED_SINCE, IF_NONE_MATCH, IF_RANGE, IF_UNMODIFIED_SINCE, LAST_MODIFIED, RANGE, VARY,
};
use std::time::{SystemTime, UNIX_EPOCH};

/// The request headers a static answer depends on, the first of each, found in one walk
/// over the request's headers (most requests carry none of them: a lookup each would cost
/// more than the walk).
#[derive(Default)]
pub(crate) struct Asked<'a> {
    pub accept: Option<&'a HeaderValue>,
    pub range: Option<&'a HeaderValue>,
    pub if_match: Option<&'a HeaderValue>,
    pub if_none_match: Option<&'a HeaderValue>,
    pub if_modified_since: Option<&'a HeaderValue>,
    pub if_unmodified_since: Option<&'a HeaderValue>,
    pub if_range: Option<&'a HeaderValue>,
}

impl<'a> Asked<'a> {
    pub fn of(headers: &'a HeaderMap) -> Asked<'a> {
        let mut a = Asked::default();
        for (name, value) in headers {
            let slot = if *name == ACCEPT_ENCODING {
                &mut a.accept
            } else if *name == RANGE {
                &mut a.range
            } else if !name.as_str().starts_with("if-") {
                continue;
            } else if *name == IF_NONE_MATCH {
                &mut a.if_none_match
            } else if *name == IF_MODIFIED_SINCE {
                &mut a.if_modified_since
            } else if *name == IF_MATCH {
                &mut a.if_match
            } else if *name == IF_UNMODIFIED_SINCE {
                &mut a.if_unmodified_since
            } else if *name == IF_RANGE {
                &mut a.if_range
            } else {
                continue;
            };
            slot.get_or_insert(value);
        }
        a
    }
}

/// What the preconditions decide.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    Send,
    NotModified,
    Failed,
}

/// RFC 9110 §13.2.2's order: If-Match, else If-Unmodified-Since (412); If-None-Match,
/// else If-Modified-Since (304).
pub(crate) fn preconditions(asked: &Asked, tag: &HeaderValue, mtime: SystemTime) -> Verdict {
    let modified = secs(mtime);
    if let Some(m) = asked.if_match {
        if !tag_matches(m, tag, true) {
            return Verdict::Failed;
        }
    } else if let Some(since) = asked.if_unmodified_since.and_then(date) {
        if modified > since {
            return Verdict::Failed;
        }
    }
    let not_modified = match asked.if_none_match {
        Some(list) => tag_matches(list, tag, false),
        None => asked.if_modified_since.and_then(date).is_some_and(|since| modified <= since),
    };
    if not_modified { Verdict::NotModified } else { Verdict::Send }
}

/// Whether a Range applies: no If-Range, or one naming this version (a strong tag, or the
/// exact modification date).
pub(crate) fn if_range_holds(asked: &Asked, tag: &HeaderValue, mtime: SystemTime) -> bool {
    match asked.if_range {
        None => true,
        Some(v) if v.as_bytes().starts_with(b"\"") => tag_matches(v, tag, true),
        Some(v) => date(v) == Some(secs(mtime)),
    }
}

pub(crate) fn content_type(rel: &str) -> HeaderValue {
    let name = rel.rsplit('/').next().unwrap_or(rel);
    let essence = crate::mime_types::guess(name);
    if essence.starts_with("text/") || essence == "application/javascript" {
        HeaderValue::from_str(&format!("{essence}; charset=utf-8")).unwrap_or(HeaderValue::from_static("application/octet-stream"))
    } else {
        HeaderValue::from_static(essence)
    }
}

pub(crate) fn tag_of(mtime: SystemTime, len: u64, suffix: &str) -> HeaderValue {
    let t = mtime.duration_since(UNIX_EPOCH).unwrap_or_default();
    let v = format!("\"{:x}.{:x}-{:x}{suffix}\"", t.as_secs(), t.subsec_nanos(), len);
    HeaderValue::from_str(&v).expect("hex digits make a valid header value")
}

/// The headers of the file's own bytes, whole (200): type, Cache-Control, Last-Modified,
/// Vary (when another representation may be chosen), ETag, Accept-Ranges, Content-Length.
/// Made once per kept file version, cloned by each hit.
pub(crate) fn file_headers(facts: &Facts, cache_control: Option<&HeaderValue>, vary: bool) -> HeaderMap {
    let mut h = HeaderMap::with_capacity(10);
    h.insert(CONTENT_TYPE, facts.ctype.clone());
    if let Some(cc) = cache_control {
        h.insert(CACHE_CONTROL, cc.clone());
    }
    if let Some(v) = &facts.last_modified {
        h.insert(LAST_MODIFIED, v.clone());
    }
    if vary {
        h.insert(VARY, HeaderValue::from_static("Accept-Encoding"));
    }
    h.insert(ETAG, facts.etag.clone());
    h.insert(ACCEPT_RANGES, HeaderValue::from_static("bytes"));
    h.insert(CONTENT_LENGTH, HeaderValue::from(facts.len));
    h
}

/// Any entity tag in `list` ("*", or comma-separated tags) equal to `tag`; weak
/// comparison (W/ ignored) unless `strong`.
pub(crate) fn tag_matches(list: &HeaderValue, tag: &HeaderValue, strong: bool) -> bool {
    let Ok(list) = list.to_str() else { return false };
    let tag = tag.to_str().unwrap_or("");
    if list.trim() == "*" {
        return true;
    }
    list.split(',').map(str::trim).any(|t| {
        if strong {
            !t.starts_with("W/") && !tag.starts_with("W/") && t == tag
        } else {
            t.trim_start_matches("W/") == tag.trim_start_matches("W/")
        }
    })
}

fn date(v: &HeaderValue) -> Option<u64> {
    let t = httpdate::parse_http_date(v.to_str().ok()?).ok()?;
    Some(t.duration_since(UNIX_EPOCH).ok()?.as_secs())
}

fn secs(t: SystemTime) -> u64 {
    t.duration_since(UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

/// A byte range request, as far as it can be served.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Ranged {
    /// No range, another unit, or several ranges: the whole file (200).
    Whole,
    /// Bytes start..=end.
    Part(u64, u64),
    /// Malformed, or outside the file: 416.
    Unsatisfiable,
}

pub(crate) fn parse_range(v: &HeaderValue, len: u64) -> Ranged {
    let Ok(v) = v.to_str() else { return Ranged::Unsatisfiable };
    let v = v.trim();
    let Some((unit, spec)) = v.split_once('=') else { return Ranged::Unsatisfiable };
    if !unit.trim().eq_ignore_ascii_case("bytes") {
        return Ranged::Whole;
    }
    if spec.contains(',') {
        return Ranged::Whole;
    }
    let Some((a, b)) = spec.trim().split_once('-') else { return Ranged::Unsatisfiable };
    let num = |s: &str| if !s.is_empty() && s.bytes().all(|c| c.is_ascii_digit()) { s.parse::<u64>().ok() } else { None };
    let (a, b) = (a.trim(), b.trim());
    match (a.is_empty(), b.is_empty()) {
        (true, false) => match num(b) {
            Some(n) if n > 0 && len > 0 => Ranged::Part(len.saturating_sub(n), len - 1),
            _ => Ranged::Unsatisfiable,
        },
        (false, true) => match num(a) {
            Some(s) if s < len => Ranged::Part(s, len - 1),
            _ => Ranged::Unsatisfiable,
        },
        (false, false) => match (num(a), num(b)) {
            (Some(s), Some(e)) if s <= e && s < len => Ranged::Part(s, e.min(len - 1)),
            _ => Ranged::Unsatisfiable,
        },
        (true, true) => Ranged::Unsatisfiable,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hv(s: &'static str) -> HeaderValue {
        HeaderValue::from_static(s)
    }

    #[test]
    fn ranges_parse_as_rfc_9110_says() {
        assert_eq!(parse_range(&hv("bytes=0-9"), 100), Ranged::Part(0, 9));
        assert_eq!(parse_range(&hv("bytes=90-"), 100), Ranged::Part(90, 99));
        assert_eq!(parse_range(&hv("bytes=-10"), 100), Ranged::Part(90, 99));
        assert_eq!(parse_range(&hv("bytes=-1000"), 100), Ranged::Part(0, 99));
        assert_eq!(parse_range(&hv("bytes=50-1000"), 100), Ranged::Part(50, 99));
        assert_eq!(parse_range(&hv("bytes=100-"), 100), Ranged::Unsatisfiable);
        assert_eq!(parse_range(&hv("bytes=9-2"), 100), Ranged::Unsatisfiable);
        assert_eq!(parse_range(&hv("bytes=abc"), 100), Ranged::Unsatisfiable);
        assert_eq!(parse_range(&hv("bytes=-0"), 100), Ranged::Unsatisfiable);
        assert_eq!(parse_range(&hv("bytes=0-0"), 0), Ranged::Unsatisfiable);
        assert_eq!(parse_range(&hv("bytes=+1-2"), 100), Ranged::Unsatisfiable);
        assert_eq!(parse_range(&hv("items=0-9"), 100), Ranged::Whole);
        assert_eq!(parse_range(&hv("bytes=0-1, 5-6"), 100), Ranged::Whole);
    }

    #[test]
    fn entity_tags_compare_weakly_or_strongly() {
        let tag = hv("\"abc\"");
        assert!(tag_matches(&hv("\"x\", W/\"abc\""), &tag, false));
        assert!(!tag_matches(&hv("W/\"abc\""), &tag, true));
        assert!(tag_matches(&hv("*"), &tag, true));
        assert!(!tag_matches(&hv("\"abd\""), &tag, false));
    }

    #[test]
    fn types_come_from_the_extension_with_a_charset_for_text() {
        assert_eq!(content_type("a/index.html"), "text/html; charset=utf-8");
        assert!(content_type("app.js").to_str().unwrap().ends_with("javascript; charset=utf-8"));
        assert_eq!(content_type("x.png"), "image/png");
        assert_eq!(content_type("noext"), "application/octet-stream");
    }

    #[test]
    fn the_headers_a_static_answer_depends_on_are_found_in_one_walk() {
        let mut h = HeaderMap::new();
        h.insert("host", hv("x"));
        h.append("if-none-match", hv("\"a\""));
        h.append("if-none-match", hv("\"b\""));
        h.insert("range", hv("bytes=0-1"));
        h.insert("if-range", hv("\"a\""));
        h.insert("if-unmodified-since", hv("Sun, 06 Nov 1994 08:49:37 GMT"));
        h.insert("x-if-match", hv("no"));
        let a = Asked::of(&h);
        assert_eq!(a.if_none_match, Some(&hv("\"a\"")));
        assert_eq!(a.range, Some(&hv("bytes=0-1")));
        assert_eq!(a.if_range, Some(&hv("\"a\"")));
        assert!(a.if_unmodified_since.is_some());
        assert!(a.if_match.is_none() && a.accept.is_none() && a.if_modified_since.is_none());
    }

    #[test]
    fn preconditions_follow_rfc_9110_order() {
        let t = UNIX_EPOCH + std::time::Duration::from_secs(1_000_000);
        let tag = hv("\"t\"");
        let mut h = HeaderMap::new();
        h.insert("if-none-match", hv("W/\"t\""));
        assert_eq!(preconditions(&Asked::of(&h), &tag, t), Verdict::NotModified);
        // If-None-Match wins over If-Modified-Since.
        h.insert("if-none-match", hv("\"u\""));
        h.insert("if-modified-since", hv("Sun, 06 Nov 2094 08:49:37 GMT"));
        assert_eq!(preconditions(&Asked::of(&h), &tag, t), Verdict::Send);
        h.insert("if-match", hv("\"u\""));
        assert_eq!(preconditions(&Asked::of(&h), &tag, t), Verdict::Failed);
    }
}
