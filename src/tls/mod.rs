//! TLS listeners. A `TlsConfig` lists certificates (PEM, from files or memory), each for
//! one server name or as the default; a TLS listener picks one per handshake by SNI,
//! offers HTTP/2 and HTTP/1.1 by ALPN, and can be given new certificates while it runs
//! (connections already open keep the ones they started with).
//!
//! Certificates are read and checked when they are added, so a wrong path or a key that
//! does not belong to its certificate fails there, with the file named. A reload reads
//! the same files again.
//!
//! Built without the `tls` feature the types exist (the C ABI is the same) and adding a
//! certificate fails saying so.

#[cfg(feature = "tls")]
pub(crate) mod accept;
#[cfg(feature = "tls")]
mod certs;
#[cfg(feature = "tls")]
mod site;

use crate::error::{Error, ErrorKind, Result};
use std::path::{Path, PathBuf};
use std::sync::Arc;

#[cfg(feature = "tls")]
pub(crate) use site::TlsSite;

/// Where a PEM block comes from: a file is read again on reload, memory is kept.
#[derive(Clone)]
#[cfg_attr(not(feature = "tls"), allow(dead_code))]
pub(crate) enum Pem {
    File(PathBuf),
    Memory(Arc<[u8]>),
}

/// One certificate chain with its key, for one server name (None: the default).
#[derive(Clone)]
#[cfg_attr(not(feature = "tls"), allow(dead_code))]
pub(crate) struct Entry {
    pub name: Option<String>,
    pub cert: Pem,
    pub key: Pem,
    #[cfg(feature = "tls")]
    pub loaded: Arc<rustls::sign::CertifiedKey>,
}

/// The certificates of a TLS listener. Build it, hand it to `Server::listen_tls` (which
/// copies it), and drop or reuse it.
#[derive(Clone, Default)]
pub struct TlsConfig {
    pub(crate) entries: Vec<Entry>,
}

impl TlsConfig {
    pub fn new() -> TlsConfig {
        TlsConfig::default()
    }

    /// Adds a certificate chain and its private key from PEM files. `server_name` is the
    /// SNI name it answers ("example.com", or "*.example.com" for one level of
    /// subdomains); None makes it the default, used for clients that send no name or one
    /// no certificate has. Without a default, the first certificate added is used then.
    pub fn add_cert_files(&mut self, server_name: Option<&str>, cert: &Path, key: &Path) -> Result<()> {
        self.add(server_name, Pem::File(cert.to_owned()), Pem::File(key.to_owned()))
    }

    /// As `add_cert_files`, with the PEM text itself.
    pub fn add_cert_pem(&mut self, server_name: Option<&str>, cert: &[u8], key: &[u8]) -> Result<()> {
        self.add(server_name, Pem::Memory(cert.into()), Pem::Memory(key.into()))
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn add(&mut self, server_name: Option<&str>, cert: Pem, key: Pem) -> Result<()> {
        let name = server_name.map(normalize_name).transpose()?;
        let entry = Entry::load(name, cert, key)?;
        self.entries.push(entry);
        Ok(())
    }

    /// The same sources read again (files re-read; memory kept).
    #[cfg(feature = "tls")]
    pub(crate) fn reloaded(&self) -> Result<TlsConfig> {
        let entries = self.entries.iter().map(|e| Entry::load(e.name.clone(), e.cert.clone(), e.key.clone())).collect::<Result<_>>()?;
        Ok(TlsConfig { entries })
    }
}

impl Entry {
    #[cfg(feature = "tls")]
    fn load(name: Option<String>, cert: Pem, key: Pem) -> Result<Entry> {
        let loaded = certs::load(&cert, &key)?;
        Ok(Entry { name, cert, key, loaded })
    }

    #[cfg(not(feature = "tls"))]
    fn load(_name: Option<String>, _cert: Pem, _key: Pem) -> Result<Entry> {
        Err(unsupported())
    }
}

impl crate::server::Server {
    /// Adds a TLS listener: like `listen_with`, with these certificates (copied; later
    /// changes to `tls` do not reach it). HTTP/2 is offered by ALPN. Before start only.
    pub fn listen_tls(&self, address: &str, reuse_port: bool, tls: &TlsConfig) -> Result<()> {
        self.listen_tls_spec(address, reuse_port, false, tls)
    }

    /// As `listen_tls`; `proxy_protocol`: each connection starts with a PROXY header (from a
    /// load balancer passing TLS through), read before the handshake.
    pub fn listen_tls_spec(&self, address: &str, reuse_port: bool, proxy_protocol: bool, tls: &TlsConfig) -> Result<()> {
        #[cfg(feature = "tls")]
        return self.add_listener(address, reuse_port, proxy_protocol, Some(TlsSite::new(tls)?));
        #[cfg(not(feature = "tls"))]
        {
            let _ = (address, reuse_port, proxy_protocol, tls);
            Err(unsupported())
        }
    }

    /// Reads the certificate and key files of every TLS listener again and uses them for
    /// new connections (open ones keep theirs). All or nothing: when one file fails, no
    /// listener changes and the error names the file. Before start it only checks them.
    pub fn reload_tls(&self) -> Result<()> {
        #[cfg(feature = "tls")]
        {
            let sites: Vec<_> = self.tls_sites().into_iter().flatten().collect();
            let prepared = sites.iter().map(|s| s.prepare_reload()).collect::<Result<Vec<_>>>()?;
            for (site, p) in sites.iter().zip(prepared) {
                site.install(p);
            }
            Ok(())
        }
        #[cfg(not(feature = "tls"))]
        Err(unsupported())
    }

    /// Gives the `index`-th listener (in listen order, as `port`) other certificates, for
    /// new connections. Any time.
    pub fn set_tls(&self, index: usize, tls: &TlsConfig) -> Result<()> {
        #[cfg(feature = "tls")]
        {
            let sites = self.tls_sites();
            let site = match sites.get(index) {
                Some(Some(site)) => site,
                Some(None) => return Err(Error::new(ErrorKind::InvalidArg, format!("listener {index} is not a TLS listener"))),
                None => return Err(Error::new(ErrorKind::InvalidArg, format!("listener index {index} is out of range (the server has {})", sites.len()))),
            };
            let prepared = site.prepare(tls.clone())?;
            site.install(prepared);
            Ok(())
        }
        #[cfg(not(feature = "tls"))]
        {
            let _ = (index, tls);
            Err(unsupported())
        }
    }
}

/// Server names compare case-insensitively; a wildcard covers one label ("*.a.b").
fn normalize_name(name: &str) -> Result<String> {
    let lower = name.trim().to_ascii_lowercase();
    let bare = lower.strip_prefix("*.").unwrap_or(&lower);
    let valid = !bare.is_empty()
        && bare.len() <= 253
        && bare.split('.').all(|l| !l.is_empty() && l.len() <= 63 && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-'));
    if !valid {
        return Err(Error::new(ErrorKind::InvalidArg, format!("{name:?} is not a server name like \"example.com\" or \"*.example.com\"")));
    }
    Ok(lower)
}

/// What the TLS functions say in a library built without the `tls` feature.
#[cfg(not(feature = "tls"))]
pub(crate) fn unsupported() -> Error {
    Error::unsupported("tls", "no TLS listeners")
}

/// A TLS listener's live certificates; never exists without the `tls` feature.
#[cfg(not(feature = "tls"))]
#[derive(Debug)]
pub(crate) enum TlsSite {}

#[cfg(test)]
mod tests {
    use super::normalize_name;

    #[test]
    fn server_names_are_lower_cased_and_checked() {
        assert_eq!(normalize_name("Example.COM").unwrap(), "example.com");
        assert_eq!(normalize_name("*.example.com").unwrap(), "*.example.com");
        for bad in ["", "*.", "a..b", "exa mple.com", "*", "a.*.b", "ex_ample.com"] {
            assert!(normalize_name(bad).is_err(), "{bad:?} should be refused");
        }
    }
}
