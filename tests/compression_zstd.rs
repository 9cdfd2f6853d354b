//! zstd as a response coding, through reqwest against a listening engine: negotiated by
//! Accept-Encoding with q-values against gzip and br, skipped for small bodies, compressed
//! types and paths turned off, large static files compressed as they stream, `.zst`
//! siblings of static files. Run in every build: without the cargo feature `zstd` the
//! same requests must never get zstd from compression on the fly.
#![cfg(feature = "static")]

mod common;
use common::*;
use ember::compress::compressible;
use ember::ffi::static_files::{ember_compression_codings, EMBER_COMPRESS_BR, EMBER_COMPRESS_GZIP, EMBER_COMPRESS_ZSTD, EMBER_STATIC_DEFAULT};
use ember::{Dispatch, Request, Server};
use std::io::Read;
use std::path::PathBuf;
use std::sync::Arc;

const BUILT: bool = cfg!(feature = "zstd");

/// A JSON body of about 100 KB: answered whole, compressed on the blocking pool.
fn json() -> String {
    let items: Vec<String> = (0..1200).map(|i| format!("{{\"id\":{i},\"name\":\"item {i}\",\"ok\":{}}}", i % 3 == 0)).collect();
    format!("[{}]", items.join(","))
}

struct Site(PathBuf);
impl Drop for Site {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A static folder: a 600 KB text file (streamed, past the 64 KiB read at once), and a
/// script with `.zst` and `.gz` siblings whose contents say which one was sent.
fn site() -> Site {
    let dir = std::env::temp_dir().join(format!("ember-zstd-{}-{:?}", std::process::id(), std::thread::current().id()));
    std::fs::create_dir_all(&dir).unwrap();
    let big: String = (0..60_000).map(|i| format!("row {i}\n")).collect();
    std::fs::write(dir.join("big.txt"), big).unwrap();
    std::fs::write(dir.join("app.js"), "console.log('plain');\n".repeat(100)).unwrap();
    std::fs::write(dir.join("app.js.zst"), zstd::bulk::compress(b"console.log('from the .zst sibling');", 19).unwrap()).unwrap();
    std::fs::write(dir.join("app.js.gz"), stored_gzip(b"console.log('from the .gz sibling');")).unwrap();
    Site(dir)
}

/// A gzip member holding `data` stored uncompressed (RFC 1952 + RFC 1951 stored block):
/// the test's `.gz` sibling, without a gzip crate among the dev-dependencies.
fn stored_gzip(data: &[u8]) -> Vec<u8> {
    let mut out = vec![0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 255, 1];
    let n = data.len() as u16;
    out.extend_from_slice(&n.to_le_bytes());
    out.extend_from_slice(&(!n).to_le_bytes());
    out.extend_from_slice(data);
    out.extend_from_slice(&crc32(data).to_le_bytes());
    out.extend_from_slice(&(data.len() as u32).to_le_bytes());
    out
}

fn crc32(data: &[u8]) -> u32 {
    let mut c = !0u32;
    for &b in data {
        c ^= u32::from(b);
        for _ in 0..8 {
            c = if c & 1 != 0 { 0xEDB8_8320 ^ (c >> 1) } else { c >> 1 };
        }
    }
    !c
}

fn start(site: &Site) -> (Arc<Server>, u16) {
    let text = |ctype: &'static str, body: String| {
        let head = format!("Content-Type: {ctype}\r\n");
        Arc::new(move |r: &Request| r.respond(200, head.as_bytes(), body.clone()).unwrap())
    };
    server(Dispatch::Pool, |s| {
        s.set_compression(EMBER_COMPRESS_GZIP | EMBER_COMPRESS_BR | EMBER_COMPRESS_ZSTD, 1024).unwrap();
        s.compression_path("/raw", false).unwrap();
        s.route(Some(http::Method::GET), "/json", text("application/json", json())).unwrap();
        s.route(Some(http::Method::GET), "/mid", text("text/plain", "medium text ".repeat(400))).unwrap();
        s.route(Some(http::Method::GET), "/small", text("text/plain", "tiny ".repeat(100))).unwrap();
        s.route(Some(http::Method::GET), "/png", text("image/png", "not really a png ".repeat(500))).unwrap();
        s.route(Some(http::Method::GET), "/raw/json", text("application/json", json())).unwrap();
        s.mount_static("/static", site.0.to_str().unwrap(), EMBER_STATIC_DEFAULT, None).unwrap();
    })
}

struct Got {
    encoding: Option<String>,
    vary: Option<String>,
    body: Vec<u8>,
}

fn fetch(port: u16, path: &str, accept: &str) -> Got {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let r = reqwest::Client::new()
            .get(format!("http://127.0.0.1:{port}{path}"))
            .header("Accept-Encoding", accept)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "{path}");
        let h = |n: &str| r.headers().get(n).map(|v| v.to_str().unwrap().to_owned());
        let (encoding, vary) = (h("content-encoding"), h("vary"));
        Got { encoding, vary, body: r.bytes().await.unwrap().to_vec() }
    })
}

fn unzstd(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    zstd::stream::read::Decoder::new(data).unwrap().read_to_end(&mut out).unwrap();
    out
}

#[test]
fn the_build_reports_zstd_exactly_when_it_has_the_feature() {
    assert_eq!(ember_compression_codings() & EMBER_COMPRESS_ZSTD != 0, BUILT);
}

#[test]
fn zstd_is_chosen_by_accept_encoding_with_q_values() {
    let site = site();
    let (_s, port) = start(&site);
    let json = json();
    for path in ["/json", "/mid"] {
        let g = fetch(port, path, "zstd");
        assert!(g.vary.as_deref().unwrap_or("").contains("Accept-Encoding"), "{path}");
        if BUILT {
            assert_eq!(g.encoding.as_deref(), Some("zstd"), "{path}");
            let plain = unzstd(&g.body);
            assert!(g.body.len() * 4 < plain.len(), "{path}: {} → {}", plain.len(), g.body.len());
            if path == "/json" {
                assert_eq!(plain, json.as_bytes());
            }
        } else {
            // Asked for zstd alone, a build without it answers as it is.
            assert_eq!(g.encoding, None, "{path}");
        }
    }
    // Browsers list every coding at weight 1: the tie goes to zstd when it is built.
    let g = fetch(port, "/json", "gzip, deflate, br, zstd");
    assert_eq!(g.encoding.as_deref(), Some(if BUILT { "zstd" } else { "gzip" }));
    // A lower weight loses; q=0 refuses.
    assert_eq!(fetch(port, "/json", "zstd;q=0.5, gzip").encoding.as_deref(), Some("gzip"));
    assert_eq!(fetch(port, "/json", "zstd;q=0").encoding, None);
    assert_eq!(fetch(port, "/json", "zstd;q=0, gzip;q=0.1").encoding.as_deref(), Some("gzip"));
    let next = if cfg!(feature = "brotli") { "br" } else { "gzip" };
    assert_eq!(fetch(port, "/json", "*, zstd;q=0").encoding.as_deref(), Some(next));
    let g = fetch(port, "/json", "gzip;q=0.2, zstd;q=0.9");
    assert_eq!(g.encoding.as_deref(), Some(if BUILT { "zstd" } else { "gzip" }));
}

#[test]
fn small_bodies_compressed_types_and_paths_turned_off_are_sent_as_they_are() {
    let site = site();
    let (_s, port) = start(&site);
    assert!(!compressible(b"image/png"));
    for path in ["/small", "/png", "/raw/json"] {
        let g = fetch(port, path, "zstd, gzip");
        assert_eq!(g.encoding, None, "{path}");
    }
    assert_eq!(fetch(port, "/small", "zstd").body, "tiny ".repeat(100).as_bytes());
}

#[test]
fn a_large_static_file_is_compressed_with_zstd_as_it_streams() {
    let site = site();
    let (_s, port) = start(&site);
    let plain = std::fs::read(site.0.join("big.txt")).unwrap();
    assert!(plain.len() > 64 * 1024);
    let g = fetch(port, "/static/big.txt", "zstd");
    if BUILT {
        assert_eq!(g.encoding.as_deref(), Some("zstd"));
        assert!(g.body.len() * 4 < plain.len());
        assert_eq!(unzstd(&g.body), plain);
    } else {
        assert_eq!(g.encoding, None);
        assert_eq!(g.body, plain);
    }
}

#[test]
fn a_zst_sibling_is_sent_to_clients_that_accept_zstd() {
    let site = site();
    let (_s, port) = start(&site);
    // A sibling needs no encoder: every build with static files sends it, as it sends
    // `.br` and `.gz` ones.
    let g = fetch(port, "/static/app.js", "gzip, zstd");
    assert_eq!(g.encoding.as_deref(), Some("zstd"));
    assert_eq!(unzstd(&g.body), b"console.log('from the .zst sibling');");
    let g = fetch(port, "/static/app.js", "identity");
    assert_eq!((g.encoding, g.body.len()), (None, 2200));
    // A higher weight for gzip picks the .gz sibling; zstd;q=0 never gets the .zst one.
    for accept in ["gzip, zstd;q=0.5", "zstd;q=0, gzip"] {
        let g = fetch(port, "/static/app.js", accept);
        assert_eq!(g.encoding.as_deref(), Some("gzip"), "{accept}");
    }
    // A sibling of any accepted coding comes before compression on the fly (it was
    // compressed harder, ahead of time): brotli is preferred here but has none.
    let g = fetch(port, "/static/app.js", "br, zstd;q=0.9");
    assert_eq!(g.encoding.as_deref(), Some("zstd"));
}
