//! A TLS listener's live state: the rustls configuration new handshakes use, swapped
//! whole on reload. A handshake takes the configuration current when it starts and keeps
//! it, so connections already open are not touched by a reload.

use super::certs::PROVIDER;
use super::TlsConfig;
use crate::error::{Error, ErrorKind, Result};
use parking_lot::{Mutex, RwLock};
use rustls::server::{ClientHello, ProducesTickets, ResolvesServerCert, ServerSessionMemoryCache, StoresServerSessions};
use rustls::sign::CertifiedKey;
use rustls::ServerConfig;
use std::collections::HashMap;
use std::sync::Arc;

/// Resumed sessions kept per listener (TLS 1.2 session IDs); TLS 1.3 uses tickets.
const SESSION_CACHE: usize = 4096;

pub(crate) struct TlsSite {
    /// What a reload reads again.
    sources: Mutex<TlsConfig>,
    current: RwLock<Arc<ServerConfig>>,
    /// Kept across reloads, so that sessions resume over a certificate change.
    tickets: Arc<dyn ProducesTickets>,
    sessions: Arc<dyn StoresServerSessions + Send + Sync>,
}

impl std::fmt::Debug for TlsSite {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TlsSite")
    }
}

/// A configuration built and checked, ready to swap in.
pub(crate) struct Prepared(TlsConfig, Arc<ServerConfig>);

impl TlsSite {
    pub fn new(config: &TlsConfig) -> Result<Arc<TlsSite>> {
        let tickets = rustls::crypto::ring::Ticketer::new()
            .map_err(|e| Error::new(ErrorKind::Runtime, format!("TLS: cannot create the session ticket key: {e}")))?;
        let sessions: Arc<dyn StoresServerSessions + Send + Sync> = ServerSessionMemoryCache::new(SESSION_CACHE);
        let server_config = build(config, &tickets, &sessions)?;
        Ok(Arc::new(TlsSite { sources: Mutex::new(config.clone()), current: RwLock::new(server_config), tickets, sessions }))
    }

    /// The configuration for a handshake starting now.
    pub fn current(&self) -> Arc<ServerConfig> {
        self.current.read().clone()
    }

    /// Reads every file again and builds the new configuration, without using it yet.
    pub fn prepare_reload(&self) -> Result<Prepared> {
        let fresh = self.sources.lock().reloaded()?;
        self.prepare(fresh)
    }

    /// Builds a configuration from other certificates, without using it yet.
    pub fn prepare(&self, config: TlsConfig) -> Result<Prepared> {
        let built = build(&config, &self.tickets, &self.sessions)?;
        Ok(Prepared(config, built))
    }

    pub fn install(&self, prepared: Prepared) {
        let Prepared(sources, built) = prepared;
        *self.sources.lock() = sources;
        *self.current.write() = built;
    }
}

fn build(config: &TlsConfig, tickets: &Arc<dyn ProducesTickets>, sessions: &Arc<dyn StoresServerSessions + Send + Sync>) -> Result<Arc<ServerConfig>> {
    if config.is_empty() {
        return Err(Error::new(ErrorKind::InvalidArg, "the TLS configuration has no certificate; add one first"));
    }
    let mut c = ServerConfig::builder_with_provider(PROVIDER.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::new(ErrorKind::Runtime, format!("TLS: {e}")))?
        .with_no_client_auth()
        .with_cert_resolver(Arc::new(Resolver::new(config)));
    c.alpn_protocols = if cfg!(feature = "http2") { vec![b"h2".to_vec(), b"http/1.1".to_vec()] } else { vec![b"http/1.1".to_vec()] };
    c.ticketer = tickets.clone();
    c.session_storage = sessions.clone();
    Ok(Arc::new(c))
}

/// Picks the certificate by the name the client asks for (SNI): an exact name, then a
/// wildcard one level up, then the default.
#[derive(Debug)]
struct Resolver {
    exact: HashMap<String, Arc<CertifiedKey>>,
    /// Keyed by what follows "*.".
    wildcard: HashMap<String, Arc<CertifiedKey>>,
    default: Arc<CertifiedKey>,
}

impl Resolver {
    fn new(config: &TlsConfig) -> Resolver {
        let mut exact = HashMap::new();
        let mut wildcard = HashMap::new();
        let mut default = None;
        for e in &config.entries {
            match e.name.as_deref() {
                None => {
                    default.get_or_insert_with(|| e.loaded.clone());
                }
                Some(n) => {
                    let map = if n.starts_with("*.") { &mut wildcard } else { &mut exact };
                    // The first certificate added for a name wins, as the first default does.
                    map.entry(n.trim_start_matches("*.").to_owned()).or_insert_with(|| e.loaded.clone());
                }
            }
        }
        // build() refused an empty configuration.
        let default = default.unwrap_or_else(|| config.entries[0].loaded.clone());
        Resolver { exact, wildcard, default }
    }

    fn pick(&self, name: Option<&str>) -> Arc<CertifiedKey> {
        let Some(name) = name else { return self.default.clone() };
        // rustls hands the name over lower-cased and without a trailing dot.
        if let Some(k) = self.exact.get(name) {
            return k.clone();
        }
        if let Some((_, parent)) = name.split_once('.') {
            if let Some(k) = self.wildcard.get(parent) {
                return k.clone();
            }
        }
        self.default.clone()
    }
}

impl ResolvesServerCert for Resolver {
    fn resolve(&self, hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.pick(hello.server_name()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustls::pki_types::CertificateDer;

    fn key(tag: u8) -> Arc<CertifiedKey> {
        // Only identity matters here: a stand-in signing key is never used.
        let signer = PROVIDER
            .key_provider
            .load_private_key(rustls::pki_types::PrivateKeyDer::Pkcs8(TEST_KEY.to_vec().into()))
            .expect("test key");
        Arc::new(CertifiedKey::new(vec![CertificateDer::from(vec![tag])], signer))
    }

    // An Ed25519 PKCS#8 key (RFC 8410's example).
    const TEST_KEY: &[u8] = &[
        0x30, 0x2e, 0x02, 0x01, 0x00, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x04, 0x22, 0x04, 0x20, 0xd4, 0xee, 0x72, 0xdb, 0xf9, 0x13, 0x58,
        0x4a, 0xd5, 0xb6, 0xd8, 0xf1, 0xf7, 0x69, 0xf8, 0xad, 0x3a, 0xfe, 0x7c, 0x28, 0xcb, 0xf1, 0xd4, 0xfb, 0xe0, 0x97, 0xa8, 0x8f, 0x44, 0x75,
        0x58, 0x42,
    ];

    fn tag(k: &Arc<CertifiedKey>) -> u8 {
        k.cert[0].as_ref()[0]
    }

    #[test]
    fn sni_picks_exact_then_wildcard_then_default() {
        let mut r = Resolver { exact: HashMap::new(), wildcard: HashMap::new(), default: key(0) };
        r.exact.insert("a.example.com".into(), key(1));
        r.wildcard.insert("example.com".into(), key(2));
        assert_eq!(tag(&r.pick(Some("a.example.com"))), 1);
        assert_eq!(tag(&r.pick(Some("b.example.com"))), 2);
        assert_eq!(tag(&r.pick(Some("x.b.example.com"))), 0, "a wildcard covers one label");
        assert_eq!(tag(&r.pick(Some("example.com"))), 0);
        assert_eq!(tag(&r.pick(None)), 0);
    }
}
