//! Response compression: gzip (flate2) and brotli, chosen by the client's Accept-Encoding
//! (q-values honoured), only for types that are not compressed already, above a minimum
//! size. Bodies above `INLINE_MAX` are compressed on tokio's blocking pool, never on the
//! I/O thread.

use bytes::Bytes;
use http::header::{HeaderMap, HeaderValue, CACHE_CONTROL, CONTENT_ENCODING, CONTENT_TYPE, VARY};
#[cfg(any(feature = "gzip", feature = "brotli"))]
use std::io::Write;

/// A body up to this size is compressed where it is (microseconds); a larger one on the
/// blocking pool.
pub(crate) const INLINE_MAX: usize = 16 * 1024;

/// `EMBER_COMPRESS_GZIP`.
pub(crate) const GZIP: u32 = 1;
/// `EMBER_COMPRESS_BR`.
pub(crate) const BR: u32 = 2;
/// The codings this build can compress with (cargo features `gzip`, `brotli`).
pub(crate) const BUILT: u32 = if cfg!(feature = "gzip") { GZIP } else { 0 } | if cfg!(feature = "brotli") { BR } else { 0 };

#[cfg(feature = "gzip")]
const GZIP_LEVEL: u32 = 6;
/// Brotli's quality 5 costs about what gzip 6 does and compresses better; 11 is for
/// files compressed ahead of time (the `.br` siblings of static files).
#[cfg(feature = "brotli")]
const BR_QUALITY: u32 = 5;
#[cfg(feature = "brotli")]
const BR_WINDOW: u32 = 22;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Coding {
    Gzip,
    Brotli,
}

impl Coding {
    pub fn token(self) -> &'static str {
        match self {
            Coding::Gzip => "gzip",
            Coding::Brotli => "br",
        }
    }

    /// The file name suffix of a precompressed sibling.
    pub fn suffix(self) -> &'static str {
        match self {
            Coding::Gzip => ".gz",
            Coding::Brotli => ".br",
        }
    }

    pub fn bit(self) -> u32 {
        match self {
            Coding::Gzip => GZIP,
            Coding::Brotli => BR,
        }
    }
}

/// Compression settings: the codings offered server-wide (0 = off), the minimum body
/// size, and on/off by path prefix (the longest matching prefix decides).
#[derive(Debug, Clone)]
pub struct CompressConfig {
    pub codings: u32,
    pub min_bytes: usize,
    pub paths: Vec<(String, bool)>,
}

impl Default for CompressConfig {
    fn default() -> Self {
        CompressConfig { codings: 0, min_bytes: 1024, paths: Vec::new() }
    }
}

impl CompressConfig {
    /// The codings offered for answers on `path` (0 = none).
    pub fn codings_for(&self, path: &str) -> u32 {
        let rule = self.paths.iter().filter(|(p, _)| under(path, p)).max_by_key(|(p, _)| p.len());
        match rule {
            Some((_, false)) => 0,
            _ => self.codings,
        }
    }
}

/// `path` lies under `prefix` at a segment boundary: "/api" covers "/api" and "/api/x",
/// not "/apix"; "/api/" covers "/api/x".
pub(crate) fn under(path: &str, prefix: &str) -> bool {
    match path.strip_prefix(prefix) {
        Some(rest) => rest.is_empty() || prefix.ends_with('/') || rest.starts_with('/'),
        None => false,
    }
}

/// The coding the client likes best among `offered` (a bit set), from its Accept-Encoding;
/// None when it accepts neither (or sent no Accept-Encoding: then only identity is safe).
pub fn negotiate(accept: Option<&HeaderValue>, offered: u32) -> Option<Coding> {
    Accepted::parse(accept).best(offered)
}

/// What an Accept-Encoding says of gzip and brotli: their weights in thousandths (0: not
/// acceptable), `*` applied. Parsed once per request however many choices it decides.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Accepted {
    gzip: u16,
    br: u16,
}

impl Accepted {
    pub fn parse(accept: Option<&HeaderValue>) -> Accepted {
        let Some(accept) = accept else { return Accepted::default() };
        // A value naming neither coding nor `*` (the usual "identity") has none of these
        // letters: no parsing.
        if !accept.as_bytes().iter().any(|&c| matches!(c | 0x20, b'g' | b'b' | b'*')) {
            return Accepted::default();
        }
        let Ok(accept) = accept.to_str() else { return Accepted::default() };
        let (mut gzip, mut br, mut star) = (None::<u16>, None::<u16>, None::<u16>);
        for item in accept.split(',') {
            let mut parts = item.split(';');
            let token = parts.next().unwrap_or("").trim();
            let mut q = Some(1000);
            for p in parts {
                let p = p.trim();
                if let Some(v) = p.strip_prefix("q=").or_else(|| p.strip_prefix("Q=")) {
                    q = qvalue(v.trim());
                }
            }
            // A malformed weight: the item says nothing reliable.
            let Some(q) = q else { continue };
            let slot = if token.eq_ignore_ascii_case("gzip") || token.eq_ignore_ascii_case("x-gzip") {
                &mut gzip
            } else if token.eq_ignore_ascii_case("br") {
                &mut br
            } else if token == "*" {
                &mut star
            } else {
                continue;
            };
            // The first mention counts (duplicates are malformed; be predictable).
            slot.get_or_insert(q);
        }
        Accepted { gzip: gzip.or(star).unwrap_or(0), br: br.or(star).unwrap_or(0) }
    }

    /// The best of `offered` (a bit set) for this client.
    pub fn best(self, offered: u32) -> Option<Coding> {
        let wb = if offered & BR == 0 { 0 } else { self.br };
        let wg = if offered & GZIP == 0 { 0 } else { self.gzip };
        // Brotli wins a tie: smaller for the same cost.
        if wb > 0 && wb >= wg {
            Some(Coding::Brotli)
        } else if wg > 0 {
            Some(Coding::Gzip)
        } else {
            None
        }
    }
}

/// An RFC 9110 weight ("0", "0.5", "1.000") in thousandths; None when malformed. By hand:
/// float parsing would pull tens of KB of tables into the library for three digits.
fn qvalue(v: &str) -> Option<u16> {
    let (int, frac) = v.split_once('.').unwrap_or((v, ""));
    if frac.len() > 3 || !frac.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let mut thousandths = 0u16;
    for (i, b) in frac.bytes().chain(std::iter::repeat(b'0')).take(3).enumerate() {
        thousandths += u16::from(b - b'0') * [100, 10, 1][i];
    }
    match int {
        "0" => Some(thousandths),
        "1" if thousandths == 0 => Some(1000),
        _ => None,
    }
}

/// Types worth compressing: text and the structured text formats. Everything else
/// (images, video, archives, fonts in woff/woff2, octet streams) is either compressed
/// already or unknown, and is sent as it is.
pub fn compressible(content_type: &[u8]) -> bool {
    let Ok(ct) = std::str::from_utf8(content_type) else { return false };
    let essence = ct.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
    let Some((top, sub)) = essence.split_once('/') else { return false };
    match top {
        "text" => true,
        "application" => {
            sub.ends_with("+json")
                || sub.ends_with("+xml")
                || matches!(
                    sub,
                    "json" | "javascript" | "x-javascript" | "ecmascript" | "xml" | "wasm" | "x-sh" | "graphql"
                        | "vnd.ms-fontobject" | "x-font-ttf" | "rtf" | "x-www-form-urlencoded" | "sql" | "toml" | "yaml"
                )
        }
        "image" => matches!(sub, "svg+xml" | "x-icon" | "vnd.microsoft.icon" | "bmp"),
        "font" => matches!(sub, "ttf" | "otf" | "collection"),
        _ => false,
    }
}

/// Whether an answer with these headers may be compressed at all: not encoded already,
/// not `no-transform`, of a compressible type.
pub(crate) fn eligible(headers: &HeaderMap) -> bool {
    if headers.contains_key(CONTENT_ENCODING) {
        return false;
    }
    let no_transform = headers
        .get_all(CACHE_CONTROL)
        .iter()
        .any(|v| v.to_str().is_ok_and(|s| s.split(',').any(|d| d.trim().eq_ignore_ascii_case("no-transform"))));
    !no_transform && headers.get(CONTENT_TYPE).is_some_and(|ct| compressible(ct.as_bytes()))
}

/// Adds `Accept-Encoding` to the answer's Vary unless it is there (or Vary is `*`).
pub(crate) fn add_vary(headers: &mut HeaderMap) {
    let listed = headers.get_all(VARY).iter().any(|v| {
        v.to_str().is_ok_and(|s| s.split(',').any(|t| t.trim() == "*" || t.trim().eq_ignore_ascii_case("accept-encoding")))
    });
    if !listed {
        headers.append(VARY, HeaderValue::from_static("Accept-Encoding"));
    }
}

/// Marks the answer as encoded with `coding`.
pub(crate) fn mark(headers: &mut HeaderMap, coding: Coding) {
    headers.insert(CONTENT_ENCODING, HeaderValue::from_static(coding.token()));
}

/// A streaming encoder: feed chunks, take what came out, finish.
pub(crate) enum Encoder {
    #[cfg(feature = "gzip")]
    Gzip(flate2::write::GzEncoder<Vec<u8>>),
    #[cfg(feature = "brotli")]
    Brotli(Box<brotli::CompressorWriter<Vec<u8>>>),
    /// Never made: a build with some coding left out still matches exhaustively.
    #[cfg(not(all(feature = "gzip", feature = "brotli")))]
    #[allow(dead_code)]
    Unbuilt(std::convert::Infallible),
}

fn not_built(coding: Coding) -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::Unsupported, format!("this build cannot compress with {}", coding.token()))
}

impl Encoder {
    /// An encoder for `coding`, if this build has one (negotiation offers only those).
    pub fn new(coding: Coding) -> std::io::Result<Encoder> {
        match coding {
            #[cfg(feature = "gzip")]
            Coding::Gzip => Ok(Encoder::Gzip(flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::new(GZIP_LEVEL)))),
            #[cfg(feature = "brotli")]
            Coding::Brotli => Ok(Encoder::Brotli(Box::new(brotli::CompressorWriter::new(Vec::new(), 16 * 1024, BR_QUALITY, BR_WINDOW)))),
            #[allow(unreachable_patterns)]
            other => Err(not_built(other)),
        }
    }

    /// Compresses `data`; returns the bytes the encoder produced so far (maybe none).
    #[allow(unused_variables, unreachable_code)]
    pub fn push(&mut self, data: &[u8]) -> std::io::Result<Bytes> {
        let out: &mut Vec<u8> = match self {
            #[cfg(feature = "gzip")]
            Encoder::Gzip(e) => {
                e.write_all(data)?;
                e.get_mut()
            }
            #[cfg(feature = "brotli")]
            Encoder::Brotli(e) => {
                e.write_all(data)?;
                e.get_mut()
            }
            #[cfg(not(all(feature = "gzip", feature = "brotli")))]
            Encoder::Unbuilt(never) => match *never {},
        };
        Ok(Bytes::from(std::mem::take(out)))
    }

    /// The rest of the output, the trailer included.
    pub fn finish(self) -> std::io::Result<Bytes> {
        match self {
            #[cfg(feature = "gzip")]
            Encoder::Gzip(e) => e.finish().map(Bytes::from),
            #[cfg(feature = "brotli")]
            Encoder::Brotli(e) => Ok(Bytes::from(e.into_inner())),
            #[cfg(not(all(feature = "gzip", feature = "brotli")))]
            Encoder::Unbuilt(never) => match never {},
        }
    }
}

/// Compresses a whole body at once.
pub(crate) fn compress_now(coding: Coding, data: &[u8]) -> std::io::Result<Bytes> {
    let mut e = Encoder::new(coding)?;
    let head = e.push(data)?;
    let tail = e.finish()?;
    if head.is_empty() {
        return Ok(tail);
    }
    let mut all = Vec::with_capacity(head.len() + tail.len());
    all.extend_from_slice(&head);
    all.extend_from_slice(&tail);
    Ok(Bytes::from(all))
}

/// Compresses a whole body: small ones here, large ones on the blocking pool. None if
/// it failed or came out no smaller (then the original is sent).
pub(crate) async fn compress(coding: Coding, body: Bytes) -> Option<Bytes> {
    let len = body.len();
    if len <= INLINE_MAX {
        return compress_small(coding, &body);
    }
    let out = tokio::task::spawn_blocking(move || compress_now(coding, &body)).await.ok()?.ok()?;
    (out.len() < len).then_some(out)
}

/// `compress` for a body of at most `INLINE_MAX` bytes, done here and now: the engine's
/// own answers (static files, cache hits) that need no waiting are finished within
/// hyper's call.
pub(crate) fn compress_small(coding: Coding, body: &[u8]) -> Option<Bytes> {
    debug_assert!(body.len() <= INLINE_MAX);
    let out = compress_now(coding, body).ok()?;
    (out.len() < body.len()).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    #[allow(unused_imports)]
    use std::io::Read;

    fn hv(s: &'static str) -> HeaderValue {
        HeaderValue::from_static(s)
    }

    #[test]
    fn negotiation_honours_q_values_and_prefers_brotli_on_a_tie() {
        let both = GZIP | BR;
        assert_eq!(negotiate(Some(&hv("gzip, deflate, br")), both), Some(Coding::Brotli));
        assert_eq!(negotiate(Some(&hv("gzip;q=1.0, br;q=0.5")), both), Some(Coding::Gzip));
        assert_eq!(negotiate(Some(&hv("br;q=0, gzip;q=0.1")), both), Some(Coding::Gzip));
        assert_eq!(negotiate(Some(&hv("br;q=0, gzip;q=0")), both), None);
        assert_eq!(negotiate(Some(&hv("*")), both), Some(Coding::Brotli));
        assert_eq!(negotiate(Some(&hv("*;q=0.5, br;q=0")), both), Some(Coding::Gzip));
        assert_eq!(negotiate(Some(&hv("identity")), both), None);
        assert_eq!(negotiate(Some(&hv("gzip, br")), GZIP), Some(Coding::Gzip));
        assert_eq!(negotiate(Some(&hv("X-GZIP")), both), Some(Coding::Gzip));
        assert_eq!(negotiate(Some(&hv("BR;Q=0.9, GZIP;Q=0.8")), both), Some(Coding::Brotli));
        assert_eq!(negotiate(Some(&hv("identity, deflate")), both), None);
        assert_eq!(negotiate(None, both), None);
        assert_eq!(negotiate(Some(&hv("br")), GZIP), None);
        assert_eq!(negotiate(Some(&hv("br;q=abc, gzip")), both), Some(Coding::Gzip));
        assert_eq!(negotiate(Some(&hv("x-gzip")), both), Some(Coding::Gzip));
        assert_eq!(negotiate(Some(&hv("br;q=0.001, gzip;q=0.0009")), both), Some(Coding::Brotli));
        assert_eq!(negotiate(Some(&hv("br;q=1.5, gzip;q=0.2")), both), Some(Coding::Gzip));
        assert_eq!(qvalue("0.5"), Some(500));
        assert_eq!(qvalue("1.000"), Some(1000));
        assert_eq!(qvalue("1.001"), None);
        assert_eq!(qvalue("0."), Some(0));
        assert_eq!(qvalue(".5"), None);
        assert_eq!(negotiate(None, both), None);
    }

    #[test]
    fn only_text_like_types_are_compressible() {
        for t in ["text/html; charset=utf-8", "application/json", "application/ld+json", "image/svg+xml", "application/javascript"] {
            assert!(compressible(t.as_bytes()), "{t}");
        }
        for t in ["image/png", "video/mp4", "application/zip", "application/octet-stream", "font/woff2", "application/gzip", "nonsense"] {
            assert!(!compressible(t.as_bytes()), "{t}");
        }
    }

    #[cfg(all(feature = "gzip", feature = "brotli"))]
    #[test]
    fn both_codings_round_trip() {
        let data: Vec<u8> = (0..100_000u32).flat_map(|i| format!("line {i}\n").into_bytes()).collect();
        let gz = compress_now(Coding::Gzip, &data).unwrap();
        let mut back = Vec::new();
        flate2::read::GzDecoder::new(&gz[..]).read_to_end(&mut back).unwrap();
        assert_eq!(back, data);
        let br = compress_now(Coding::Brotli, &data).unwrap();
        let mut back = Vec::new();
        brotli::Decompressor::new(&br[..], 4096).read_to_end(&mut back).unwrap();
        assert_eq!(back, data);
        assert!(br.len() < data.len() / 4 && gz.len() < data.len() / 4);
    }

    /// A large body is compressed on the blocking pool: on a one-thread runtime, a task
    /// spawned before the call gets to run while the call waits. Compressed right there,
    /// the call would never yield and the task would still be waiting afterwards.
    #[cfg(feature = "gzip")]
    #[test]
    fn large_bodies_are_compressed_off_the_io_thread() {
        let rt = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let body: Bytes = (0..400_000u32).flat_map(|i| format!("line {i}\n").into_bytes()).collect::<Vec<u8>>().into();
        assert!(body.len() > INLINE_MAX);
        rt.block_on(async {
            let ran = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
            let flag = ran.clone();
            tokio::spawn(async move { flag.store(true, std::sync::atomic::Ordering::SeqCst) });
            let packed = compress(Coding::Gzip, body.clone()).await.expect("text compresses");
            assert!(packed.len() < body.len() / 4);
            assert!(ran.load(std::sync::atomic::Ordering::SeqCst), "the I/O thread was held while compressing");
            // A small body is compressed where it is (no yield): the counter-check that
            // this test can tell the two apart.
            let ran = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
            let flag = ran.clone();
            tokio::spawn(async move { flag.store(true, std::sync::atomic::Ordering::SeqCst) });
            let small = body.slice(..INLINE_MAX);
            compress(Coding::Gzip, small).await.expect("text compresses");
            assert!(!ran.load(std::sync::atomic::Ordering::SeqCst));
        });
    }

    #[test]
    fn prefixes_match_at_segment_boundaries() {
        assert!(under("/api", "/api") && under("/api/x", "/api") && under("/api/x", "/api/"));
        assert!(!under("/apix", "/api") && !under("/ap", "/api"));
        let c = CompressConfig { codings: 3, min_bytes: 0, paths: vec![("/raw".into(), false), ("/raw/text".into(), true)] };
        assert_eq!(c.codings_for("/x"), 3);
        assert_eq!(c.codings_for("/raw/a"), 0);
        assert_eq!(c.codings_for("/raw/text/a"), 3);
    }
}
