//! A throwaway certificate authority for the TLS tests, and a blocking TLS client.

#![allow(dead_code)]

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, KeyPair, KeyUsagePurpose, SanType};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::Arc;
use std::time::Duration;
use tokio_rustls::rustls;

pub struct Ca {
    cert: rcgen::Certificate,
    key: KeyPair,
}

/// A certificate chain and key, as PEM text.
pub struct Leaf {
    pub cert_pem: String,
    pub key_pem: String,
    pub der: Vec<u8>,
}

impl Ca {
    pub fn new(name: &str) -> Ca {
        let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
        p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        p.distinguished_name.push(DnType::CommonName, name);
        p.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign, KeyUsagePurpose::DigitalSignature];
        let key = KeyPair::generate().unwrap();
        let cert = p.self_signed(&key).unwrap();
        Ca { cert, key }
    }

    pub fn pem(&self) -> String {
        self.cert.pem()
    }

    pub fn der(&self) -> Vec<u8> {
        self.cert.der().to_vec()
    }

    /// A leaf for these DNS names, plus 127.0.0.1.
    pub fn leaf(&self, names: &[&str]) -> Leaf {
        let mut p = CertificateParams::new(names.iter().map(|n| n.to_string()).collect::<Vec<_>>()).unwrap();
        p.subject_alt_names.push(SanType::IpAddress("127.0.0.1".parse().unwrap()));
        p.distinguished_name.push(DnType::CommonName, names.first().copied().unwrap_or("localhost"));
        let key = KeyPair::generate().unwrap();
        let cert = p.signed_by(&key, &self.cert, &self.key).unwrap();
        Leaf { cert_pem: cert.pem(), key_pem: key.serialize_pem(), der: cert.der().to_vec() }
    }
}

pub fn client_config(ca: &Ca, alpn: &[&[u8]]) -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca.der().into()).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut c = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    c.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Arc::new(c)
}

pub type Tls = rustls::StreamOwned<rustls::ClientConnection, TcpStream>;

/// A blocking TLS connection to 127.0.0.1:port, asking for `name` (SNI), handshake done.
pub fn connect(ca: &Ca, port: u16, name: &str, alpn: &[&[u8]]) -> std::io::Result<Tls> {
    connect_after(ca, port, name, alpn, Duration::ZERO)
}

/// As `connect`, waiting `pause` between the TCP connect and the handshake (a slow client).
pub fn connect_after(ca: &Ca, port: u16, name: &str, alpn: &[&[u8]], pause: Duration) -> std::io::Result<Tls> {
    let tcp = TcpStream::connect(("127.0.0.1", port))?;
    std::thread::sleep(pause);
    tcp.set_read_timeout(Some(Duration::from_secs(10)))?;
    let server_name = rustls::pki_types::ServerName::try_from(name.to_owned()).unwrap();
    let conn = rustls::ClientConnection::new(client_config(ca, alpn), server_name).unwrap();
    let mut tls = rustls::StreamOwned::new(conn, tcp);
    while tls.conn.is_handshaking() {
        tls.conn.complete_io(&mut tls.sock)?;
    }
    Ok(tls)
}

/// The certificate the server presented.
pub fn peer_der(tls: &Tls) -> Vec<u8> {
    tls.conn.peer_certificates().unwrap()[0].as_ref().to_vec()
}

/// One HTTP/1.1 request with Connection: close; the whole answer as text.
pub fn https_get(tls: &mut Tls, path: &str) -> String {
    let req = format!("GET {path} HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n");
    tls.write_all(req.as_bytes()).unwrap();
    let mut out = Vec::new();
    let mut buf = [0u8; 16384];
    loop {
        match tls.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}
