//! TLS listeners through real TLS clients (rustls, reqwest) against a throwaway CA.

mod common;
#[path = "common/pki.rs"]
mod pki;

use common::*;
use ember::{Dispatch, ErrorKind, Request, Server, TlsConfig};
use pki::{connect, connect_after, https_get, peer_der, Ca};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A server with a plain listener (index 0) and a TLS one (index 1).
fn tls_server(tls: &TlsConfig, setup: impl FnOnce(&Server)) -> (Arc<Server>, u16, u16) {
    let (s, plain) = server(Dispatch::Inline, |s| {
        s.listen_tls("127.0.0.1:0", false, tls).unwrap();
        s.route(Some(http::Method::GET), "/flags", Arc::new(|r: &Request| {
            r.respond(200, b"", r.data().info().flags.to_string()).unwrap();
        }))
        .unwrap();
        setup(s);
    });
    let secure = s.port(1).unwrap();
    (s, plain, secure)
}

fn one_cert(ca: &Ca) -> (TlsConfig, pki::Leaf) {
    let leaf = ca.leaf(&["localhost"]);
    let mut t = TlsConfig::new();
    t.add_cert_pem(None, leaf.cert_pem.as_bytes(), leaf.key_pem.as_bytes()).unwrap();
    (t, leaf)
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap()
}

fn client(ca: &Ca, http1_only: bool) -> reqwest::Client {
    let mut b = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(ca.pem().as_bytes()).unwrap())
        .use_rustls_tls();
    if http1_only {
        b = b.http1_only();
    }
    b.build().unwrap()
}

#[test]
fn https_answers_http1_and_http2_by_alpn_and_the_plain_listener_stays_plain() {
    let ca = Ca::new("Ember test CA");
    let (tls, _) = one_cert(&ca);
    let (_s, plain, secure) = tls_server(&tls, |_| {});
    rt().block_on(async {
        for (http1_only, version) in [(true, reqwest::Version::HTTP_11), (false, reqwest::Version::HTTP_2)] {
            let r = client(&ca, http1_only).get(format!("https://localhost:{secure}/")).send().await.unwrap();
            assert_eq!(r.version(), version);
            assert_eq!(r.status(), 200);
            assert_eq!(r.text().await.unwrap(), "hello");
        }
        let flags = client(&ca, false).get(format!("https://localhost:{secure}/flags")).send().await.unwrap().text().await.unwrap();
        assert_eq!(flags, "4", "EMBER_REQUEST_TLS");
    });
    assert!(get(plain, "/").ends_with("hello"));
    assert!(get(plain, "/flags").ends_with("\r\n\r\n0"), "a plain request has no TLS flag");
    // The plain listener does not speak TLS, and the TLS one not plain HTTP.
    assert!(connect(&ca, plain, "localhost", &[]).is_err());
    let resp = exchange(secure, b"GET / HTTP/1.1\r\nHost: t\r\n\r\n", Duration::from_secs(5));
    assert!(!resp.contains("hello"), "plain HTTP on a TLS port got {resp:?}");
}

#[test]
fn sni_picks_exact_then_wildcard_then_the_default() {
    let ca = Ca::new("Ember test CA");
    let (default, a, w) = (ca.leaf(&["localhost"]), ca.leaf(&["a.test"]), ca.leaf(&["*.w.test"]));
    let mut tls = TlsConfig::new();
    tls.add_cert_pem(Some("A.Test"), a.cert_pem.as_bytes(), a.key_pem.as_bytes()).unwrap();
    tls.add_cert_pem(None, default.cert_pem.as_bytes(), default.key_pem.as_bytes()).unwrap();
    tls.add_cert_pem(Some("*.w.test"), w.cert_pem.as_bytes(), w.key_pem.as_bytes()).unwrap();
    let (_s, _, port) = tls_server(&tls, |_| {});
    let served = |name: &str| {
        let mut c = connect(&ca, port, name, &[]).unwrap();
        let der = peer_der(&c);
        assert!(https_get(&mut c, "/").ends_with("hello"));
        der
    };
    assert_eq!(served("a.test"), a.der);
    assert_eq!(served("x.w.test"), w.der);
    assert_eq!(served("localhost"), default.der, "a name no certificate has gets the default");
    // An IP address is sent without SNI.
    assert_eq!(served("127.0.0.1"), default.der);
    // Without a default the first certificate added is used.
    let mut only_a = TlsConfig::new();
    only_a.add_cert_pem(Some("a.test"), a.cert_pem.as_bytes(), a.key_pem.as_bytes()).unwrap();
    let (_s2, _, port2) = tls_server(&only_a, |_| {});
    assert_eq!(peer_der(&connect(&ca, port2, "127.0.0.1", &[]).unwrap()), a.der);
}

#[test]
fn reload_reads_the_files_again_and_open_connections_keep_their_certificate() {
    let ca = Ca::new("Ember test CA");
    let dir = tempdir("reload");
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    let write = |leaf: &pki::Leaf| {
        std::fs::write(&cert, &leaf.cert_pem).unwrap();
        std::fs::write(&key, &leaf.key_pem).unwrap();
    };
    let (one, two, three) = (ca.leaf(&["localhost"]), ca.leaf(&["localhost"]), ca.leaf(&["localhost"]));
    write(&one);
    let mut tls = TlsConfig::new();
    tls.add_cert_files(None, &cert, &key).unwrap();
    let (s, _, port) = tls_server(&tls, |_| {});

    let mut open = connect(&ca, port, "localhost", &[]).unwrap();
    assert_eq!(peer_der(&open), one.der);
    write(&two);
    s.reload_tls().unwrap();
    assert_eq!(peer_der(&connect(&ca, port, "localhost", &[]).unwrap()), two.der);
    // The connection made before the reload still works, with its first certificate.
    assert!(https_get(&mut open, "/").ends_with("hello"));

    // A reload that fails changes nothing and names the file.
    std::fs::write(&key, "not a key").unwrap();
    let e = s.reload_tls().unwrap_err();
    assert_eq!(e.kind, ErrorKind::InvalidArg);
    assert!(e.message.contains(&key.display().to_string()), "{}", e.message);
    assert_eq!(peer_der(&connect(&ca, port, "localhost", &[]).unwrap()), two.der);

    // Other certificates for listener 1, from memory; listener 0 is plain.
    let mut mem = TlsConfig::new();
    mem.add_cert_pem(None, three.cert_pem.as_bytes(), three.key_pem.as_bytes()).unwrap();
    s.set_tls(1, &mem).unwrap();
    assert_eq!(peer_der(&connect(&ca, port, "localhost", &[]).unwrap()), three.der);
    assert_eq!(s.set_tls(0, &mem).unwrap_err().kind, ErrorKind::InvalidArg);
    assert_eq!(s.set_tls(7, &mem).unwrap_err().kind, ErrorKind::InvalidArg);
    assert_eq!(s.set_tls(1, &TlsConfig::new()).unwrap_err().kind, ErrorKind::InvalidArg);
    let _ = std::fs::remove_dir_all(dir);
}

#[test]
fn bad_files_fail_when_added_with_the_file_named() {
    let ca = Ca::new("Ember test CA");
    let dir = tempdir("badfiles");
    let leaf = ca.leaf(&["localhost"]);
    let other = ca.leaf(&["localhost"]);
    let (cert, key, other_key, junk) = (dir.join("c.pem"), dir.join("k.pem"), dir.join("o.pem"), dir.join("junk.pem"));
    std::fs::write(&cert, &leaf.cert_pem).unwrap();
    std::fs::write(&key, &leaf.key_pem).unwrap();
    std::fs::write(&other_key, &other.key_pem).unwrap();
    std::fs::write(&junk, "hello").unwrap();
    let missing = dir.join("missing.pem");
    let mut t = TlsConfig::new();
    for (c, k, says) in [
        (&missing, &key, missing.display().to_string()),
        (&cert, &missing, missing.display().to_string()),
        (&junk, &key, format!("{} holds no certificate", junk.display())),
        (&cert, &junk, format!("{} holds no private key", junk.display())),
        (&cert, &other_key, format!("{} does not belong to the certificate", other_key.display())),
    ] {
        let e = t.add_cert_files(None, c, k).unwrap_err();
        assert_eq!(e.kind, ErrorKind::InvalidArg);
        assert!(e.message.contains(&says), "{:?} should contain {says:?}", e.message);
    }
    assert!(t.is_empty(), "a failed add adds nothing");
    assert!(t.add_cert_files(Some("bad name"), &cert, &key).is_err());
    let s = Server::new();
    assert_eq!(s.listen_tls("127.0.0.1:0", false, &t).unwrap_err().kind, ErrorKind::InvalidArg);
    t.add_cert_files(None, &cert, &key).unwrap();
    s.listen_tls("127.0.0.1:0", false, &t).unwrap();
    let _ = std::fs::remove_dir_all(dir);
}

/// A TLS 1.0 ClientHello: rustls speaks 1.2 and 1.3 only.
const TLS10_HELLO: &[u8] = &[
    0x16, 0x03, 0x01, 0x00, 0x2d, // record: handshake, TLS 1.0, 45 bytes
    0x01, 0x00, 0x00, 0x29, 0x03, 0x01, // ClientHello, 41 bytes, version TLS 1.0
    0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 30, 31, // random
    0x00, // no session id
    0x00, 0x02, 0x00, 0x2f, // one suite: TLS_RSA_WITH_AES_128_CBC_SHA
    0x01, 0x00, // no compression
];

/// Reads until the server closes; what it sent.
fn until_closed(mut c: TcpStream, within: Duration) -> Vec<u8> {
    c.set_read_timeout(Some(within)).unwrap();
    let start = Instant::now();
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match c.read(&mut buf) {
            Ok(0) => return out,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return out,
            Err(e) => panic!("the server kept the connection open for {:?}: {e}", start.elapsed()),
        }
    }
}

#[test]
fn garbage_and_old_protocols_are_dropped_without_disturbing_others() {
    let ca = Ca::new("Ember test CA");
    let (tls, _) = one_cert(&ca);
    let (s, _, port) = tls_server(&tls, |s| s.set_metrics(Some("")).unwrap());
    let mut busy = connect(&ca, port, "localhost", &[]).unwrap();

    let mut old = TcpStream::connect(("127.0.0.1", port)).unwrap();
    old.write_all(TLS10_HELLO).unwrap();
    let alert = until_closed(old, Duration::from_secs(5));
    // A fatal alert (handshake_failure: nothing in it that TLS 1.2+ allows), then the close.
    assert_eq!(alert, [0x15, 3, 3, 0, 2, 2, 40]);

    let mut junk = TcpStream::connect(("127.0.0.1", port)).unwrap();
    junk.write_all(&[0xffu8; 3000]).unwrap();
    until_closed(junk, Duration::from_secs(5));

    assert!(https_get(&mut busy, "/").ends_with("hello"), "a connection open meanwhile is untouched");
    assert!(https_get(&mut connect(&ca, port, "localhost", &[]).unwrap(), "/").ends_with("hello"));
    let m = s.metrics_text().unwrap();
    assert!(m.contains("ember_tls_handshake_failures_total 2\n"), "{m}");
    assert!(m.contains("ember_tls_handshakes_total 2\n"), "{m}");
}

#[test]
fn a_handshake_that_never_completes_ends_at_the_header_timeout() {
    let ca = Ca::new("Ember test CA");
    let (tls, _) = one_cert(&ca);
    let (s, _, port) = tls_server(&tls, |s| {
        s.set_limits(|l| {
            l.header_timeout = Duration::from_millis(300);
            l.idle_timeout = Duration::from_secs(60);
            Ok(())
        })
        .unwrap()
    });
    let silent = TcpStream::connect(("127.0.0.1", port)).unwrap();
    let mut partial = TcpStream::connect(("127.0.0.1", port)).unwrap();
    partial.write_all(&TLS10_HELLO[..9]).unwrap();
    let start = Instant::now();
    assert!(until_closed(silent, Duration::from_secs(10)).is_empty());
    assert!(until_closed(partial, Duration::from_secs(10)).is_empty(), "closed, not answered");
    assert!(start.elapsed() < Duration::from_secs(10));
    // A TLS client that completes the handshake and then says nothing: closed, no 408
    // (a plaintext 408 cannot go on a TLS socket).
    let mut quiet = connect(&ca, port, "localhost", &[]).unwrap();
    quiet.write_all(b"GET / HTT").unwrap();
    let mut buf = Vec::new();
    let _ = quiet.read_to_end(&mut buf);
    assert!(buf.is_empty(), "got {:?}", String::from_utf8_lossy(&buf));
    let deadline = Instant::now() + Duration::from_secs(5);
    while s.stats().active_connections > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(s.stats().active_connections, 0);
}

#[test]
fn the_first_request_gets_the_whole_header_timeout_after_a_slow_handshake() {
    // A slow client (Wine's emulated sockets, a starved machine) may use most of the
    // header timeout on the handshake; its request head then gets a header timeout of its
    // own, as on a plain connection, where the clock starts at the accept.
    let ca = Ca::new("Ember test CA");
    let (tls, _) = one_cert(&ca);
    let (_s, _, port) = tls_server(&tls, |s| {
        s.set_limits(|l| {
            l.header_timeout = Duration::from_millis(800);
            l.idle_timeout = Duration::from_secs(60);
            Ok(())
        })
        .unwrap()
    });
    let mut c = connect_after(&ca, port, "localhost", &[], Duration::from_millis(500)).unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let answer = https_get(&mut c, "/");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer:?}");
}

#[test]
fn a_tls_peer_that_stops_reading_is_cut_at_the_idle_timeout() {
    let ca = Ca::new("Ember test CA");
    let (tls, _) = one_cert(&ca);
    let (s, _, port) = tls_server(&tls, |s| {
        s.set_limits(|l| Ok(l.idle_timeout = Duration::from_millis(500))).unwrap();
        s.route(Some(http::Method::GET), "/big", Arc::new(|r: &Request| {
            r.respond(200, b"", vec![b'x'; 64 << 20]).unwrap();
        }))
        .unwrap();
    });
    let mut c = connect(&ca, port, "localhost", &[]).unwrap();
    c.write_all(b"GET /big HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
    c.flush().unwrap();
    let deadline = Instant::now() + Duration::from_secs(15);
    while s.stats().active_connections > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(s.stats().active_connections, 0, "the stuck reader was not cut");
    assert!(s.stats().bytes_written < 64 << 20);
}

#[test]
fn websocket_over_tls() {
    let ca = Ca::new("Ember test CA");
    let (tls, _) = one_cert(&ca);
    let (_s, _, port) = tls_server(&tls, |s| {
        let route = ember::ws::WsRoute::new(
            Arc::new(|ws_id, r: &Request| {
                let flags = r.data().info().flags;
                ember::ws::accept(ws_id, format!("X-Flags: {flags}").as_bytes()).unwrap();
            }),
            Arc::new(|ws_id, kind, data: &[u8]| {
                let _ = ember::ws::send(ws_id, kind, data);
            }),
            Arc::new(|_, _, _: &str| {}),
            None,
        );
        s.websocket("/ws", Arc::new(route)).unwrap();
    });
    let stream = connect(&ca, port, "localhost", &[b"http/1.1"]).unwrap();
    let (mut ws, resp) = tungstenite::client("wss://localhost/ws", stream).unwrap();
    assert_eq!(resp.headers()["x-flags"], "6", "EMBER_REQUEST_WEBSOCKET | EMBER_REQUEST_TLS");
    ws.send(tungstenite::Message::text("über TLS")).unwrap();
    assert_eq!(ws.read().unwrap(), tungstenite::Message::text("über TLS"));
    let big = vec![7u8; 300_000];
    ws.send(tungstenite::Message::binary(big.clone())).unwrap();
    assert_eq!(ws.read().unwrap(), tungstenite::Message::binary(big));
    ws.close(None).unwrap();
    while ws.read().is_ok() {}
}

fn tempdir(tag: &str) -> std::path::PathBuf {
    let nanos = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos();
    let d = std::env::temp_dir().join(format!("ember-tls-{tag}-{}-{nanos}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

#[test]
fn a_proxy_header_comes_before_the_handshake_and_tls_requests_have_the_https_scheme() {
    let ca = Ca::new("Ember test CA");
    let (tls, _) = one_cert(&ca);
    let s = Arc::new(Server::new());
    s.listen_tls_spec("127.0.0.1:0", false, true, &tls).unwrap();
    s.set_workers(1).unwrap();
    s.route(Some(http::Method::GET), "/who", Arc::new(|r: &Request| {
        let d = r.data();
        let scheme = d.info().scheme;
        // SAFETY: the view points into the request's own data, alive for this call.
        let scheme = unsafe { std::slice::from_raw_parts(scheme.ptr.cast::<u8>(), scheme.len) };
        let body = format!("{} {} {}", d.remote_addr(), String::from_utf8_lossy(scheme), d.info().flags);
        r.respond(200, b"", body).unwrap();
    }))
    .unwrap();
    s.start().unwrap();
    let port = s.port(0).unwrap();
    let mut tcp = TcpStream::connect(("127.0.0.1", port)).unwrap();
    tcp.write_all(b"PROXY TCP4 203.0.113.9 127.0.0.1 4444 443\r\n").unwrap();
    tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let name = tokio_rustls::rustls::pki_types::ServerName::try_from("localhost").unwrap();
    let conn = tokio_rustls::rustls::ClientConnection::new(pki::client_config(&ca, &[]), name).unwrap();
    let mut c = tokio_rustls::rustls::StreamOwned::new(conn, tcp);
    assert!(https_get(&mut c, "/who").ends_with("\r\n\r\n203.0.113.9:4444 https 4"));
}
