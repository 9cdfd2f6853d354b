//! Answering a request for a file under a static mount: the file (or its index.html, or
//! the SPA fallback), its type, ETag and Last-Modified with 304 and 412, a single byte
//! range (206 / 416), a precompressed `.br` / `.gz` sibling or compression on the fly,
//! Cache-Control per mount. Small files are read at once; larger ones stream from disk
//! (`file_body`).

use crate::compress::{self, Coding, Encoder, BR, GZIP};
use crate::file_body::{read_new, FileBody};
use crate::request::Answer;
use crate::response::canned;
#[cfg(target_os = "linux")]
use crate::static_cache as kept;
use crate::static_cache::Facts;
use crate::static_files::{Mount, Refusal, Target, INDEX, PRECOMPRESSED, SPA};
use bytes::Bytes;
use http::header::{
    HeaderMap, HeaderValue, ACCEPT_ENCODING, ACCEPT_RANGES, ALLOW, CACHE_CONTROL, CONTENT_LENGTH, CONTENT_RANGE, CONTENT_TYPE,
    ETAG, IF_MATCH, IF_MODIFIED_SINCE, IF_NONE_MATCH, IF_RANGE, IF_UNMODIFIED_SINCE, LAST_MODIFIED, LOCATION, RANGE,
};
use http::Method;
use std::fs::{File, Metadata};
use std::time::{SystemTime, UNIX_EPOCH};

/// Files up to this size are read whole, at once: a page-cache read of a few KiB costs
/// less than a trip to the blocking pool (nginx reads them on its event loop too).
const SMALL_MAX: u64 = 64 * 1024;

/// The parts of a request a static answer depends on.
pub(crate) struct StaticRequest<'a> {
    pub method: &'a Method,
    pub path: &'a str,
    pub query: Option<&'a str>,
    pub headers: &'a HeaderMap,
    /// Codings the server compresses with on this path (0 = none) and from what size.
    pub codings: u32,
    pub min_bytes: usize,
}

struct Found {
    file: File,
    meta: Metadata,
    rel: String,
}

/// Where the bytes of an answer come from.
enum Source {
    File(File),
    /// A small file kept in memory (`static_cache`).
    Memory(Bytes),
}

enum Opened {
    File(Found),
    Redirect,
    Refused(Refusal),
}

fn refused(r: Refusal) -> Answer {
    canned(if r == Refusal::Forbidden { 403 } else { 404 }, false)
}

fn open(mount: &Mount, target: Target) -> Opened {
    let found = match open_file(mount, &target.rel) {
        Ok(f) if f.meta.is_dir() => {
            if !target.dir {
                return Opened::Redirect;
            }
            if mount.flags & INDEX == 0 {
                Err(Refusal::NotFound)
            } else {
                let rel = if target.rel.is_empty() { "index.html".to_owned() } else { format!("{}/index.html", target.rel) };
                open_file(mount, &rel).and_then(|f| if f.meta.is_file() { Ok(f) } else { Err(Refusal::NotFound) })
            }
        }
        Ok(f) if f.meta.is_file() && !target.dir => Ok(f),
        Ok(_) => Err(Refusal::NotFound),
        Err(r) => Err(r),
    };
    match found {
        Ok(f) => Opened::File(f),
        Err(Refusal::NotFound) if mount.flags & SPA != 0 => match open_file(mount, "index.html") {
            Ok(f) if f.meta.is_file() => Opened::File(f),
            _ => Opened::Refused(Refusal::NotFound),
        },
        Err(r) => Opened::Refused(r),
    }
}

fn open_file(mount: &Mount, rel: &str) -> Result<Found, Refusal> {
    let file = mount.open(rel)?;
    let meta = file.metadata().map_err(|_| Refusal::NotFound)?;
    Ok(Found { file, meta, rel: rel.to_owned() })
}

/// The sibling `rel` + ".br"/".gz", if it is a regular file.
fn sibling(mount: &Mount, rel: &str, coding: Coding) -> Option<Found> {
    open_file(mount, &format!("{rel}{}", coding.suffix())).ok().filter(|f| f.meta.is_file())
}

fn content_type(rel: &str) -> HeaderValue {
    let name = rel.rsplit('/').next().unwrap_or(rel);
    let essence = crate::mime_types::guess(name);
    if essence.starts_with("text/") || essence == "application/javascript" {
        HeaderValue::from_str(&format!("{essence}; charset=utf-8")).unwrap_or(HeaderValue::from_static("application/octet-stream"))
    } else {
        HeaderValue::from_static(essence)
    }
}

fn mtime(meta: &Metadata) -> SystemTime {
    meta.modified().unwrap_or(UNIX_EPOCH)
}

fn etag(meta: &Metadata, suffix: &str) -> HeaderValue {
    tag_of(mtime(meta), meta.len(), suffix)
}

fn tag_of(mtime: SystemTime, len: u64, suffix: &str) -> HeaderValue {
    let t = mtime.duration_since(UNIX_EPOCH).unwrap_or_default();
    let v = format!("\"{:x}.{:x}-{:x}{suffix}\"", t.as_secs(), t.subsec_nanos(), len);
    HeaderValue::from_str(&v).expect("hex digits make a valid header value")
}

/// The header values of a file version.
fn facts_of(rel: &str, meta: &Metadata) -> Facts {
    let ctype = content_type(rel);
    Facts {
        len: meta.len(),
        mtime: mtime(meta),
        compressible: compress::compressible(ctype.as_bytes()),
        ctype,
        last_modified: HeaderValue::from_str(&httpdate::fmt_http_date(mtime(meta))).ok(),
        etag: etag(meta, ""),
    }
}

/// A small file that has settled is read now and kept for the next requests.
#[cfg(target_os = "linux")]
fn keep(mount: &Mount, found: &Found, facts: &Facts) -> Option<Bytes> {
    if found.meta.len() > kept::MAX_FILE {
        return None;
    }
    let body = read_small(&found.file, 0, found.meta.len()).ok()?;
    // Read first, then judged: a change after this moment moves the file's times.
    if body.len() as u64 == found.meta.len() && kept::settled(&found.meta) {
        mount.small.put(&found.rel, kept::ident(&found.meta), body.clone(), facts.clone());
    }
    Some(body)
}

#[cfg(not(target_os = "linux"))]
fn keep(_mount: &Mount, _found: &Found, _facts: &Facts) -> Option<Bytes> {
    None
}

/// Any entity tag in `list` ("*", or comma-separated tags) equal to `tag`; weak
/// comparison (W/ ignored) unless `strong`.
fn tag_matches(list: &HeaderValue, tag: &HeaderValue, strong: bool) -> bool {
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

pub(crate) async fn serve(mount: &Mount, rest: &str, req: StaticRequest<'_>) -> Answer {
    let (get, head) = (req.method == Method::GET, req.method == Method::HEAD);
    if !get && !head {
        let mut a = canned(405, false);
        a.headers.insert(ALLOW, HeaderValue::from_static("GET, HEAD"));
        return a;
    }
    let target = match mount.target(rest) {
        Ok(t) => t,
        Err(r) => return refused(r),
    };
    // A small file kept in memory and unchanged on disk: no open, no read, no formatting.
    let hit = if target.dir || target.rel.is_empty() { None } else { mount.kept(&target.rel) };
    let (rel, facts, source) = if let Some(hit) = hit {
        (target.rel, hit.facts.clone(), Source::Memory(hit.body.clone()))
    } else {
        let found = match open(mount, target) {
            Opened::File(f) => f,
            Opened::Refused(r) => return refused(r),
            Opened::Redirect => {
            let mut a = canned(301, false);
            let to = match req.query {
                Some(q) => format!("{}/?{q}", req.path),
                None => format!("{}/", req.path),
            };
            if let Ok(v) = HeaderValue::from_str(&to) {
                a.headers.insert(LOCATION, v);
            }
                return a;
            }
        };
        let facts = facts_of(&found.rel, &found.meta);
        let source = match keep(mount, &found, &facts) {
            Some(body) => Source::Memory(body),
            None => Source::File(found.file),
        };
        (found.rel, facts, source)
    };
    let compressible = facts.compressible;
    let len = facts.len;
    let mut headers = HeaderMap::with_capacity(10);
    headers.insert(CONTENT_TYPE, facts.ctype.clone());
    if let Some(cc) = &mount.cache_control {
        headers.insert(CACHE_CONTROL, cc.clone());
    }
    if let Some(v) = &facts.last_modified {
        headers.insert(LAST_MODIFIED, v.clone());
    }
    let precompressed = mount.flags & PRECOMPRESSED != 0 && compressible;
    let dynamic = if req.codings != 0 && compressible && len >= req.min_bytes as u64 && get { req.codings } else { 0 };
    if precompressed || dynamic != 0 {
        compress::add_vary(&mut headers);
    }
    let range = if get { req.headers.get(RANGE) } else { None };
    let accept = req.headers.get(ACCEPT_ENCODING);

    // Which representation: a sibling the client accepts, or compression on the fly, or
    // the file itself. A range asks for the file's own bytes.
    let mut chosen: Option<(Coding, Option<Found>)> = None;
    if range.is_none() {
        if precompressed {
            let first = compress::negotiate(accept, GZIP | BR);
            let second = first.and_then(|c| compress::negotiate(accept, (GZIP | BR) & !c.bit()));
            for coding in [first, second].into_iter().flatten() {
                if let Some(s) = sibling(mount, &rel, coding) {
                    chosen = Some((coding, Some(s)));
                    break;
                }
            }
        }
        if chosen.is_none() && dynamic != 0 {
            chosen = compress::negotiate(accept, dynamic).map(|c| (c, None));
        }
    }
    let tag = match &chosen {
        None => facts.etag.clone(),
        Some((c, Some(s))) => etag(&s.meta, &format!("-{}", c.token())),
        Some((c, None)) => {
            let strong = tag_of(facts.mtime, len, &format!("-{}", c.token()));
            HeaderValue::from_str(&format!("W/{}", strong.to_str().unwrap_or(""))).unwrap_or(strong)
        }
    };
    headers.insert(ETAG, tag.clone());

    // Preconditions, in RFC 9110 §13.2.2's order.
    let modified = secs(facts.mtime);
    if let Some(m) = req.headers.get(IF_MATCH) {
        if !tag_matches(m, &tag, true) {
            return precondition_failed();
        }
    } else if let Some(since) = req.headers.get(IF_UNMODIFIED_SINCE).and_then(date) {
        if modified > since {
            return precondition_failed();
        }
    }
    let not_modified = match req.headers.get(IF_NONE_MATCH) {
        Some(list) => tag_matches(list, &tag, false),
        None => req.headers.get(IF_MODIFIED_SINCE).and_then(date).is_some_and(|since| modified <= since),
    };
    if not_modified {
        headers.remove(CONTENT_TYPE);
        return Answer::new(304, headers, Bytes::new());
    }

    match chosen {
        Some((coding, Some(sib))) => {
            compress::mark(&mut headers, coding);
            let n = sib.meta.len();
            whole(headers, Source::File(sib.file), n, head, None).await
        }
        Some((coding, None)) => {
            compress::mark(&mut headers, coding);
            whole(headers, source, len, head, Some(coding)).await
        }
        None => {
            headers.insert(ACCEPT_RANGES, HeaderValue::from_static("bytes"));
            let if_range_ok = match req.headers.get(IF_RANGE) {
                None => true,
                Some(v) if v.as_bytes().starts_with(b"\"") => tag_matches(v, &tag, true),
                Some(v) => date(v) == Some(modified),
            };
            match range.filter(|_| if_range_ok).map(|r| parse_range(r, len)) {
                None | Some(Ranged::Whole) => whole(headers, source, len, head, None).await,
                Some(Ranged::Unsatisfiable) => {
                    let mut a = canned(416, false);
                    a.headers.insert(CONTENT_RANGE, HeaderValue::from_str(&format!("bytes */{len}")).expect("digits"));
                    a
                }
                Some(Ranged::Part(start, end)) => {
                    headers.insert(CONTENT_RANGE, HeaderValue::from_str(&format!("bytes {start}-{end}/{len}")).expect("digits"));
                    let mut a = part(headers, source, start, end - start + 1).await;
                    a.status = 206;
                    a
                }
            }
        }
    }
}

fn precondition_failed() -> Answer {
    canned(412, false)
}

/// `len` bytes of `file` from the start, compressed with `coding` when given.
async fn whole(mut headers: HeaderMap, source: Source, len: u64, head: bool, coding: Option<Coding>) -> Answer {
    if head {
        let mut a = Answer::new(200, headers, Bytes::new());
        a.declared_len = Some(len);
        return a;
    }
    let Some(coding) = coding else { return part(headers, source, 0, len).await };
    let data = match source {
        Source::File(file) if len > SMALL_MAX => {
            let mut a = Answer::new(200, headers, Bytes::new());
            match Encoder::new(coding) {
                Ok(e) => a.file = Some(Box::new(FileBody::new(file, 0, len, Some(e)))),
                Err(_) => return canned(500, false),
            }
            return a;
        }
        Source::File(file) => match read_small(&file, 0, len) {
            Ok(d) => d,
            Err(_) => return canned(500, false),
        },
        Source::Memory(data) => data,
    };
    match compress::compress(coding, data.clone()).await {
        Some(packed) => Answer::new(200, headers, packed),
        None => {
            // No smaller: the file as it is, with the tag of the file itself.
            headers.remove(http::header::CONTENT_ENCODING);
            if let Some(t) = headers.get(ETAG).and_then(|t| t.to_str().ok()).map(|t| t.trim_start_matches("W/").to_owned()) {
                let plain = t.rsplit_once('-').map(|(a, _)| format!("{a}\"")).unwrap_or(t);
                if let Ok(v) = HeaderValue::from_str(&plain) {
                    headers.insert(ETAG, v);
                }
            }
            Answer::new(200, headers, data)
        }
    }
}

/// `len` bytes of the file from `start`, as they are.
async fn part(mut headers: HeaderMap, source: Source, start: u64, len: u64) -> Answer {
    headers.insert(CONTENT_LENGTH, HeaderValue::from(len));
    let file = match source {
        Source::Memory(data) => return Answer::new(200, headers, data.slice(start as usize..(start + len) as usize)),
        Source::File(file) => file,
    };
    if len <= SMALL_MAX {
        return match read_small(&file, start, len) {
            Ok(d) => Answer::new(200, headers, d),
            Err(_) => canned(500, false),
        };
    }
    let mut a = Answer::new(200, headers, Bytes::new());
    a.file = Some(Box::new(FileBody::new(file, start, len, None)));
    a
}

fn read_small(file: &File, start: u64, len: u64) -> std::io::Result<Bytes> {
    read_new(file, start, len as usize).map(Bytes::from)
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
}
