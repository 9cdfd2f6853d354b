//! `ember_server_static` (folders served at a URL prefix) and the compression settings
//! (`ember_server_set_compression`, `ember_server_compression_path`). Before start only,
//! like routes.

use super::args::c_str;
use super::boundary::guard;
use super::server::{ember_server, get};
use super::types::ember_result;
use crate::compress;
use std::os::raw::c_char;

/// `ember_server_static` flag: a request for a folder ("/static/docs/") gets its
/// `index.html`; one without the final '/' is redirected (301) to it.
pub const EMBER_STATIC_INDEX: u32 = 1;
/// `ember_server_static` flag: `name.zst` / `name.br` / `name.gz` beside a file of a compressible type
/// are sent instead of it to clients that accept that encoding.
pub const EMBER_STATIC_PRECOMPRESSED: u32 = 2;
/// `ember_server_static` flag: a path under the mount that names no file gets the
/// mount's `index.html` with 200 (single-page applications that route in the browser).
pub const EMBER_STATIC_SPA: u32 = 4;
/// `ember_server_static` flag: names starting with '.' are served (404 by default).
pub const EMBER_STATIC_DOTFILES: u32 = 8;
/// The recommended flags: `EMBER_STATIC_INDEX | EMBER_STATIC_PRECOMPRESSED`.
pub const EMBER_STATIC_DEFAULT: u32 = EMBER_STATIC_INDEX | EMBER_STATIC_PRECOMPRESSED;

/// `ember_server_set_compression`: gzip.
pub const EMBER_COMPRESS_GZIP: u32 = 1;
/// `ember_server_set_compression`: brotli (`br`).
pub const EMBER_COMPRESS_BR: u32 = 2;
/// `ember_server_set_compression`: Zstandard (`zstd`).
pub const EMBER_COMPRESS_ZSTD: u32 = 4;

#[cfg(feature = "static")]
const _: () = assert!(
    EMBER_STATIC_INDEX == crate::static_files::INDEX
        && EMBER_STATIC_PRECOMPRESSED == crate::static_files::PRECOMPRESSED
        && EMBER_STATIC_SPA == crate::static_files::SPA
        && EMBER_STATIC_DOTFILES == crate::static_files::DOTFILES
);
const _: () = assert!(EMBER_COMPRESS_GZIP == compress::GZIP && EMBER_COMPRESS_BR == compress::BR && EMBER_COMPRESS_ZSTD == compress::ZSTD);

fn opt_str<'a>(p: *const c_char, what: &str) -> crate::error::Result<Option<&'a str>> {
    if p.is_null() { Ok(None) } else { c_str(p, what).map(Some) }
}

/// Serves the files under `folder` at the URL prefix `prefix` ("/static": `/static/a.css`
/// is `folder/a.css`; "/" serves the folder at the root). Several mounts may exist; the
/// longest matching prefix wins, and mounts are looked at before routes.
///
/// - GET and HEAD (others: 405 with `Allow: GET, HEAD`). Types from the file name's
///   extension (text with `charset=utf-8`). `ETag` and `Last-Modified` with 304
///   (`If-None-Match`, `If-Modified-Since`) and 412 (`If-Match`, `If-Unmodified-Since`).
///   One byte range (`Range: bytes=…`, `If-Range`) gets 206; a malformed or unsatisfiable
///   one 416 with `Content-Range: bytes *` + `/size`; several ranges get the whole file.
/// - Refused with 403: "." and ".." segments in any spelling (`%2e%2e`, double encoding
///   such as `%252e`), encoded slashes and backslashes, NUL, ':' (drive letters, streams),
///   symlinks that lead out of `folder` (a link inside it is followed). Dotfiles get 404
///   unless `EMBER_STATIC_DOTFILES`; folder listings are never made.
/// - Files up to 64 KiB are read at once; larger ones are streamed from disk in 128 KiB
///   chunks read on a blocking pool, never held whole in memory.
/// - With compression on (`ember_server_set_compression`), files of compressible types
///   without a precompressed sibling are compressed as they are sent.
///
/// `flags`: `EMBER_STATIC_*` (`EMBER_STATIC_DEFAULT` is a good start; 0 = none of them).
/// `cache_control`: the `Cache-Control` of every answer from this mount ("max-age=3600",
/// "no-cache"); NULL for none. `folder` must exist (`EMBER_ERR_INVALID_ARG` names it
/// otherwise); a second mount at the same prefix is `EMBER_ERR_ROUTE`;
/// `EMBER_ERR_UNSUPPORTED` in a library built without the `static` feature (the minimal
/// one). Before start only. Strings are copied.
#[no_mangle]
pub unsafe extern "C" fn ember_server_static(
    server: *mut ember_server,
    prefix: *const c_char,
    folder: *const c_char,
    flags: u32,
    cache_control: *const c_char,
) -> ember_result {
    guard(|| {
        let s = get(server)?;
        let prefix = c_str(prefix, "prefix")?;
        let folder = c_str(folder, "folder")?;
        let cc = opt_str(cache_control, "cache_control")?;
        s.mount_static(prefix, folder, flags, cc)
    })
}

/// Compresses answers (the host's and static files) with the encodings in `codings`
/// (`EMBER_COMPRESS_GZIP | EMBER_COMPRESS_BR | EMBER_COMPRESS_ZSTD`; 0 = off, the
/// default; codings this build lacks, see `ember_compression_codings`, are left out) for
/// clients whose `Accept-Encoding` takes one (q-values honoured; a tie goes to zstd, then
/// brotli, then gzip). Only bodies of
/// `min_bytes` or more (default 1024), of text-like types (all text types, JSON, JavaScript, XML,
/// SVG, wasm …), not encoded already and without `Cache-Control: no-transform`;
/// compressible answers carry `Vary: Accept-Encoding`. Bodies over 16 KiB are compressed
/// on a blocking pool, never on an I/O thread. Streamed answers (`ember_response_begin`)
/// are sent as written. A strong `ETag` of a compressed answer becomes weak. Before start
/// only.
#[no_mangle]
pub unsafe extern "C" fn ember_server_set_compression(server: *mut ember_server, codings: u32, min_bytes: u64) -> ember_result {
    guard(|| get(server)?.set_compression(codings, usize::try_from(min_bytes).unwrap_or(usize::MAX)))
}

/// The codings this build of the library compresses with on the fly: `EMBER_COMPRESS_GZIP`
/// in the default build, plus `EMBER_COMPRESS_BR` with the cargo feature `brotli` and
/// `EMBER_COMPRESS_ZSTD` with `zstd`; none in the minimal one. Every build with static files
/// serves precompressed `.zst` / `.br` / `.gz` siblings.
#[no_mangle]
pub extern "C" fn ember_compression_codings() -> u32 {
    compress::BUILT
}

/// Turns compression off (`enabled` false) or back on for the paths under `prefix`
/// ("/downloads" covers "/downloads" and "/downloads/…"); the longest matching prefix
/// decides. Per route: give the route's literal prefix. Before start only.
#[no_mangle]
pub unsafe extern "C" fn ember_server_compression_path(server: *mut ember_server, prefix: *const c_char, enabled: bool) -> ember_result {
    guard(|| get(server)?.compression_path(c_str(prefix, "prefix")?, enabled))
}
