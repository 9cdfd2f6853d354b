//! Reading PEM certificate chains and private keys, with errors that name the file.

use super::Pem;
use crate::error::{Error, ErrorKind, Result};
use once_cell::sync::Lazy;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::sign::CertifiedKey;
use std::sync::Arc;

/// ring: it builds with a C compiler alone, also for the mingw cross build.
pub(crate) static PROVIDER: Lazy<Arc<CryptoProvider>> = Lazy::new(|| Arc::new(rustls::crypto::ring::default_provider()));

fn invalid(message: String) -> Error {
    Error::new(ErrorKind::InvalidArg, message)
}

/// How the message names a source: the path, or "the … given in memory".
fn describe(pem: &Pem, what: &str) -> String {
    match pem {
        Pem::File(p) => format!("{what} file {}", p.display()),
        Pem::Memory(_) => format!("{what} given in memory"),
    }
}

fn read(pem: &Pem, what: &str) -> Result<Arc<[u8]>> {
    match pem {
        Pem::Memory(bytes) => Ok(bytes.clone()),
        Pem::File(path) => std::fs::read(path)
            .map(Arc::from)
            .map_err(|e| invalid(format!("cannot read the TLS {what} file {}: {e}", path.display()))),
    }
}

/// Loads a chain (leaf first) and its key, and checks that they belong together.
pub(crate) fn load(cert: &Pem, key: &Pem) -> Result<Arc<CertifiedKey>> {
    let cert_name = describe(cert, "certificate");
    let key_name = describe(key, "private key");
    let cert_bytes = read(cert, "certificate")?;
    let chain = CertificateDer::pem_slice_iter(&cert_bytes)
        .collect::<std::result::Result<Vec<_>, _>>()
        .map_err(|e| invalid(format!("the TLS {cert_name} is not valid PEM: {e}")))?;
    if chain.is_empty() {
        return Err(invalid(format!("the TLS {cert_name} holds no certificate (no \"-----BEGIN CERTIFICATE-----\" block)")));
    }
    let key_bytes = read(key, "private key")?;
    let key_der = match PrivateKeyDer::from_pem_slice(&key_bytes) {
        Ok(k) => k,
        Err(rustls::pki_types::pem::Error::NoItemsFound) => {
            return Err(invalid(format!(
                "the TLS {key_name} holds no private key (no \"-----BEGIN PRIVATE KEY-----\", RSA PRIVATE KEY or EC PRIVATE KEY block)"
            )))
        }
        Err(e) => return Err(invalid(format!("the TLS {key_name} is not valid PEM: {e}"))),
    };
    match CertifiedKey::from_der(chain, key_der, &PROVIDER) {
        Ok(ck) => Ok(Arc::new(ck)),
        Err(rustls::Error::InconsistentKeys(_)) => {
            Err(invalid(format!("the TLS {key_name} does not belong to the certificate in the {cert_name}")))
        }
        Err(e) => Err(invalid(format!("cannot use the TLS {key_name} with the {cert_name}: {e}"))),
    }
}
