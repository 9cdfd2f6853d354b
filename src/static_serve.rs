//! Answering a request for a file under a static mount: the file (or its index.html, or
//! the SPA fallback), a precompressed `.zst` / `.br` / `.gz` sibling or compression on the fly, a
//! single byte range, Cache-Control per mount; the header and precondition rules are
//! `static_http`. Small files are read at once (and kept: `static_cache`); larger ones
//! stream from disk (`file_body`). Everything is decided within the call; only a large body
//! to compress whole waits for the blocking pool (`Served::Compress`).

use crate::compress::{self, Accepted, Coding, Encoder};
use crate::file_body::{read_new, FileBody};
use crate::request::Answer;
use crate::response::canned;
#[cfg(target_os = "linux")]
use crate::static_cache as kept;
use crate::static_cache::Facts;
use crate::static_files::{Mount, Refusal, Target, INDEX, PRECOMPRESSED, SPA};
use crate::static_http::{self as web, Asked, Ranged, Verdict};
use bytes::Bytes;
use http::header::{HeaderMap, HeaderValue, ACCEPT_RANGES, ALLOW, CONTENT_ENCODING, CONTENT_LENGTH, CONTENT_RANGE, CONTENT_TYPE, ETAG, LOCATION};
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

/// The answer, or what is left to do for it.
pub(crate) enum Served {
    Now(Answer),
    /// The body (more than `compress::INLINE_MAX` bytes) is to be compressed with this
    /// coding on the blocking pool, then finished by `packed_or_plain`.
    Compress(Answer, Coding),
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

fn open(mount: &Mount, target: &Target) -> Opened {
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

/// The sibling `rel` + ".zst"/".br"/".gz", if it is a regular file.
fn sibling(mount: &Mount, rel: &str, coding: Coding) -> Option<Found> {
    open_file(mount, &format!("{rel}{}", coding.suffix())).ok().filter(|f| f.meta.is_file())
}

fn mtime(meta: &Metadata) -> SystemTime {
    meta.modified().unwrap_or(UNIX_EPOCH)
}

/// The header values of a file version.
fn facts_of(rel: &str, meta: &Metadata) -> Facts {
    let ctype = web::content_type(rel);
    Facts {
        len: meta.len(),
        mtime: mtime(meta),
        compressible: compress::compressible(ctype.as_bytes()),
        ctype,
        last_modified: HeaderValue::from_str(&httpdate::fmt_http_date(mtime(meta))).ok(),
        etag: web::tag_of(mtime(meta), meta.len(), ""),
    }
}

/// A small file that has settled is read now and kept, with its answer headers, for the
/// next requests.
#[cfg(target_os = "linux")]
fn keep(mount: &Mount, found: &Found, facts: &Facts) -> Option<Bytes> {
    if found.meta.len() > kept::MAX_FILE {
        return None;
    }
    let body = read_small(&found.file, 0, found.meta.len()).ok()?;
    // Read first, then judged: a change after this moment moves the file's times.
    if body.len() as u64 == found.meta.len() && kept::settled(&found.meta) {
        let cc = mount.cache_control.as_ref();
        let headers = [web::file_headers(facts, cc, false), web::file_headers(facts, cc, true)];
        mount.small.put(&found.rel, kept::ident(&found.meta), body.clone(), facts.clone(), headers);
    }
    Some(body)
}

#[cfg(not(target_os = "linux"))]
fn keep(_mount: &Mount, _found: &Found, _facts: &Facts) -> Option<Bytes> {
    None
}

pub(crate) fn serve(mount: &Mount, rest: &str, req: StaticRequest<'_>) -> Served {
    let (get, head) = (req.method == Method::GET, req.method == Method::HEAD);
    if !get && !head {
        let mut a = canned(405, false);
        a.headers.insert(ALLOW, HeaderValue::from_static("GET, HEAD"));
        return Served::Now(a);
    }
    let target = match mount.target(rest) {
        Ok(t) => t,
        Err(r) => return Served::Now(refused(r)),
    };
    // A small file kept in memory and unchanged on disk: no open, no read, no formatting.
    let hit = if target.dir || target.rel.is_empty() { None } else { mount.kept(&target.rel) };
    if let Some(hit) = &hit {
        return answer(mount, &target.rel, &hit.facts, Source::Memory(hit.body.clone()), Some(&hit.headers), &req, get, head);
    }
    let found = match open(mount, &target) {
        Opened::File(f) => f,
        Opened::Refused(r) => return Served::Now(refused(r)),
        Opened::Redirect => return Served::Now(redirect(&req)),
    };
    let facts = facts_of(&found.rel, &found.meta);
    let source = match keep(mount, &found, &facts) {
        Some(body) => Source::Memory(body),
        None => Source::File(found.file),
    };
    answer(mount, &found.rel, &facts, source, None, &req, get, head)
}

/// The rest of the answer once the file is known: its representation, the
/// preconditions, the range. Not inlined: its two callers would each carry a copy (the
/// library's size is guarded in CI).
#[allow(clippy::too_many_arguments)]
#[inline(never)]
fn answer(
    mount: &Mount,
    rel: &str,
    facts: &Facts,
    source: Source,
    prebuilt: Option<&[HeaderMap; 2]>,
    req: &StaticRequest<'_>,
    get: bool,
    head: bool,
) -> Served {
    let len = facts.len;
    let precompressed = mount.flags & PRECOMPRESSED != 0 && facts.compressible;
    let dynamic = if req.codings != 0 && facts.compressible && len >= req.min_bytes as u64 && get { req.codings } else { 0 };
    let vary = precompressed || dynamic != 0;
    let mut headers = match prebuilt {
        Some(h) => h[vary as usize].clone(),
        None => web::file_headers(facts, mount.cache_control.as_ref(), vary),
    };
    let asked = Asked::of(req.headers);
    let range = if get { asked.range } else { None };

    // Which representation: a sibling the client accepts, or compression on the fly, or
    // the file itself. A range asks for the file's own bytes.
    let mut chosen: Option<(Coding, Option<Found>)> = None;
    if range.is_none() && asked.accept.is_some() {
        let accepted = Accepted::parse(asked.accept);
        if precompressed {
            // Siblings need no encoder: every build serves them, whatever it compresses with.
            for coding in accepted.ranked(compress::ALL) {
                if let Some(s) = sibling(mount, rel, coding) {
                    chosen = Some((coding, Some(s)));
                    break;
                }
            }
        }
        if chosen.is_none() && dynamic != 0 {
            chosen = accepted.best(dynamic).map(|c| (c, None));
        }
    }
    let tag = match &chosen {
        None => facts.etag.clone(),
        Some((c, Some(s))) => web::tag_of(mtime(&s.meta), s.meta.len(), &format!("-{}", c.token())),
        Some((c, None)) => {
            let strong = web::tag_of(facts.mtime, len, &format!("-{}", c.token()));
            HeaderValue::from_str(&format!("W/{}", strong.to_str().unwrap_or(""))).unwrap_or(strong)
        }
    };
    match web::preconditions(&asked, &tag, facts.mtime) {
        Verdict::Send => {}
        Verdict::Failed => return Served::Now(canned(412, false)),
        Verdict::NotModified => {
            headers.remove(CONTENT_TYPE);
            headers.remove(ACCEPT_RANGES);
            headers.remove(CONTENT_LENGTH);
            headers.insert(ETAG, tag);
            return Served::Now(Answer::new(304, headers, Bytes::new()));
        }
    }

    let Some((coding, sib)) = chosen else {
        let ranged = range.filter(|_| web::if_range_holds(&asked, &tag, facts.mtime)).map(|r| web::parse_range(r, len));
        return Served::Now(match ranged {
            None | Some(Ranged::Whole) if head => head_answer(headers, len),
            // The headers state the file's length already.
            None | Some(Ranged::Whole) => part(headers, source, 0, len),
            Some(Ranged::Unsatisfiable) => {
                let mut a = canned(416, false);
                a.headers.insert(CONTENT_RANGE, HeaderValue::from_str(&format!("bytes */{len}")).expect("digits"));
                a
            }
            Some(Ranged::Part(start, end)) => {
                headers.insert(CONTENT_RANGE, HeaderValue::from_str(&format!("bytes {start}-{end}/{len}")).expect("digits"));
                headers.insert(CONTENT_LENGTH, HeaderValue::from(end - start + 1));
                let mut a = part(headers, source, start, end - start + 1);
                a.status = 206;
                a
            }
        });
    };
    // Another representation: other bytes, another tag, no ranges.
    headers.remove(ACCEPT_RANGES);
    headers.remove(CONTENT_LENGTH);
    headers.insert(ETAG, tag);
    compress::mark(&mut headers, coding);
    match sib {
        Some(sib) if head => Served::Now(head_answer(headers, sib.meta.len())),
        Some(sib) => {
            let n = sib.meta.len();
            headers.insert(CONTENT_LENGTH, HeaderValue::from(n));
            Served::Now(part(headers, Source::File(sib.file), 0, n))
        }
        None => on_the_fly(headers, source, len, coding),
    }
}

fn redirect(req: &StaticRequest<'_>) -> Answer {
    let mut a = canned(301, false);
    let to = match req.query {
        Some(q) => format!("{}/?{q}", req.path),
        None => format!("{}/", req.path),
    };
    if let Ok(v) = HeaderValue::from_str(&to) {
        a.headers.insert(LOCATION, v);
    }
    a
}

/// HEAD: the headers GET would send, with the length of its body.
fn head_answer(headers: HeaderMap, len: u64) -> Answer {
    let mut a = Answer::new(200, headers, Bytes::new());
    a.declared_len = Some(len);
    a
}

/// The file compressed with `coding` as it is sent: streamed for a large file on disk,
/// at once for a small body, on the blocking pool (later) for a large one in memory.
fn on_the_fly(headers: HeaderMap, source: Source, len: u64, coding: Coding) -> Served {
    let data = match source {
        Source::File(file) if len > SMALL_MAX => {
            let mut a = Answer::new(200, headers, Bytes::new());
            match Encoder::new(coding) {
                Ok(e) => a.file = Some(Box::new(FileBody::new(file, 0, len, Some(e)))),
                Err(_) => return Served::Now(canned(500, false)),
            }
            return Served::Now(a);
        }
        Source::File(file) => match read_small(&file, 0, len) {
            Ok(d) => d,
            Err(_) => return Served::Now(canned(500, false)),
        },
        Source::Memory(data) => data,
    };
    let a = Answer::new(200, headers, data);
    if a.body.len() > compress::INLINE_MAX {
        return Served::Compress(a, coding);
    }
    let packed = compress::compress_small(coding, &a.body);
    Served::Now(packed_or_plain(a, packed))
}

/// The compressed body, or when it came out no larger (or failed) the file as it is, with
/// the tag of the file itself.
pub(crate) fn packed_or_plain(mut a: Answer, packed: Option<Bytes>) -> Answer {
    if let Some(p) = packed {
        a.body = p;
        return a;
    }
    a.headers.remove(CONTENT_ENCODING);
    if let Some(t) = a.headers.get(ETAG).and_then(|t| t.to_str().ok()).map(|t| t.trim_start_matches("W/").to_owned()) {
        let plain = t.rsplit_once('-').map(|(a, _)| format!("{a}\"")).unwrap_or(t);
        if let Ok(v) = HeaderValue::from_str(&plain) {
            a.headers.insert(ETAG, v);
        }
    }
    a
}

/// `len` bytes of the file from `start`, as they are (`headers` state that length).
fn part(headers: HeaderMap, source: Source, start: u64, len: u64) -> Answer {
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
