//! Response compression: gzip (flate2), brotli and zstd, chosen by the client's Accept-Encoding
//! (q-values honoured), only for types that are not compressed already, above a minimum
//! size. Bodies above `INLINE_MAX` are compressed on tokio's blocking pool, never on the
//! I/O thread.

mod accept;
mod encoder;

pub use accept::negotiate;
// Static files are their only users outside this module.
#[cfg_attr(not(feature = "static"), allow(unused_imports))]
pub(crate) use accept::Accepted;
pub use encoder::compress_now;
#[cfg_attr(not(feature = "static"), allow(unused_imports))]
pub(crate) use encoder::Encoder;

/// The zstd level of compression on the fly (`benches/compress.rs` labels its rows with it).
/// A function, not a `pub const`: cbindgen would put a public constant in include/ember.h.
#[cfg(feature = "zstd")]
pub fn zstd_level() -> i32 {
    encoder::ZSTD_LEVEL
}

use bytes::Bytes;
use http::header::{HeaderMap, HeaderValue, CACHE_CONTROL, CONTENT_ENCODING, CONTENT_TYPE, VARY};

/// A body up to this size is compressed where it is (microseconds); a larger one on the
/// blocking pool.
pub(crate) const INLINE_MAX: usize = 16 * 1024;

/// `EMBER_COMPRESS_GZIP`.
pub(crate) const GZIP: u32 = 1;
/// `EMBER_COMPRESS_BR`.
pub(crate) const BR: u32 = 2;
/// `EMBER_COMPRESS_ZSTD`.
pub(crate) const ZSTD: u32 = 4;
/// Every coding the engine knows (the bits `set_compression` accepts).
pub(crate) const ALL: u32 = GZIP | BR | ZSTD;
/// The codings this build can compress with (cargo features `gzip`, `brotli`, `zstd`).
pub(crate) const BUILT: u32 = if cfg!(feature = "gzip") { GZIP } else { 0 }
    | if cfg!(feature = "brotli") { BR } else { 0 }
    | if cfg!(feature = "zstd") { ZSTD } else { 0 };

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Coding {
    Gzip,
    Brotli,
    Zstd,
}

impl Coding {
    pub fn token(self) -> &'static str {
        match self {
            Coding::Gzip => "gzip",
            Coding::Brotli => "br",
            Coding::Zstd => "zstd",
        }
    }

    /// The file name suffix of a precompressed sibling.
    pub fn suffix(self) -> &'static str {
        match self {
            Coding::Gzip => ".gz",
            Coding::Brotli => ".br",
            Coding::Zstd => ".zst",
        }
    }

    pub fn bit(self) -> u32 {
        match self {
            Coding::Gzip => GZIP,
            Coding::Brotli => BR,
            Coding::Zstd => ZSTD,
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

    /// zstd, whole and streamed (the encoder of large static files): both decode to the
    /// input, and the whole-body frame states its length.
    #[cfg(feature = "zstd")]
    #[test]
    fn zstd_round_trips_whole_and_streamed() {
        let data: Vec<u8> = (0..100_000u32).flat_map(|i| format!("line {i}\n").into_bytes()).collect();
        let whole = compress_now(Coding::Zstd, &data).unwrap();
        assert_eq!(zstd::zstd_safe::get_frame_content_size(&whole).ok(), Some(Some(data.len() as u64)));
        assert_eq!(zstd::stream::decode_all(&whole[..]).unwrap(), data);
        assert!(whole.len() < data.len() / 4);
        let mut e = Encoder::new(Coding::Zstd).unwrap();
        let mut streamed = Vec::new();
        for chunk in data.chunks(128 * 1024) {
            streamed.extend_from_slice(&e.push(chunk).unwrap());
        }
        streamed.extend_from_slice(&e.finish().unwrap());
        assert_eq!(zstd::stream::decode_all(&streamed[..]).unwrap(), data);
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
