//! `ember_tls_config_*` and the TLS functions of a server.
//!
//! Lifecycle of a TLS configuration: 1. `ember_tls_config_new` 2. one or more
//! `ember_tls_config_add_cert_files` / `ember_tls_config_add_cert_pem` 3.
//! `ember_server_listen_tls` (or `ember_server_tls_set`), which copy it 4.
//! `ember_tls_config_free`, any time after.

use super::args::{self, c_str, non_null};
use super::boundary::guard;
use super::constants::{EMBER_LISTEN_PROXY_PROTOCOL, EMBER_LISTEN_REUSE_PORT};
use super::server::{ember_server, get};
use super::types::ember_result;
use crate::error::{Error, ErrorKind, Result};
use crate::tls::TlsConfig;
use parking_lot::Mutex;
use std::os::raw::{c_char, c_void};
use std::path::Path;

/// A list of certificates for a TLS listener (opaque). Create with
/// `ember_tls_config_new`, free with `ember_tls_config_free`. Safe to use from any
/// thread; the functions that take it copy what they need.
pub struct ember_tls_config {
    inner: Mutex<TlsConfig>,
}

fn config<'a>(p: *const ember_tls_config) -> Result<&'a Mutex<TlsConfig>> {
    non_null(p, "tls_config").map(|c| &c.inner)
}

/// NULL means "the default certificate".
fn server_name<'a>(p: *const c_char) -> Result<Option<&'a str>> {
    if p.is_null() {
        return Ok(None);
    }
    c_str(p, "server_name").map(Some)
}

/// Creates an empty TLS configuration. `*out_config` receives it.
///
/// Ownership: the caller owns it and frees it with `ember_tls_config_free`.
#[no_mangle]
pub unsafe extern "C" fn ember_tls_config_new(out_config: *mut *mut ember_tls_config) -> ember_result {
    guard(|| {
        if out_config.is_null() {
            return Err(args::null("out_config"));
        }
        let boxed = Box::new(ember_tls_config { inner: Mutex::new(TlsConfig::new()) });
        args::write(out_config, "out_config", Box::into_raw(boxed))
    })
}

/// Frees a TLS configuration. NULL is fine (no-op). Listeners made from it keep their
/// own copy.
///
/// Ownership: `tls_config` is consumed and must not be used afterwards.
#[no_mangle]
pub unsafe extern "C" fn ember_tls_config_free(tls_config: *mut ember_tls_config) -> ember_result {
    guard(|| {
        if !tls_config.is_null() {
            // SAFETY: it came from Box::into_raw in ember_tls_config_new; the host gives it up here.
            drop(unsafe { Box::from_raw(tls_config) });
        }
        Ok(())
    })
}

/// Adds a certificate chain (PEM, leaf first, then intermediates) and its private key
/// (PEM: PKCS#8, PKCS#1 RSA or SEC1 EC) read from files now. `server_name` is the SNI
/// name it answers ("example.com", "*.example.com" for one level of subdomains; case does
/// not matter), or NULL for the default: the certificate for clients that send no name
/// (an IP address) or a name no certificate has. Without a default the first certificate
/// added is used then. The first certificate added for a name wins.
///
/// Errors: `EMBER_ERR_INVALID_ARG` with the file named when a file cannot be read, holds
/// no certificate or key, or the key does not belong to the certificate;
/// `EMBER_ERR_UNSUPPORTED` in a library built without TLS. Paths are UTF-8 and copied;
/// `ember_server_tls_reload` reads the same files again.
#[no_mangle]
pub unsafe extern "C" fn ember_tls_config_add_cert_files(
    tls_config: *mut ember_tls_config,
    server_name: *const c_char,
    cert_path: *const c_char,
    key_path: *const c_char,
) -> ember_result {
    guard(|| {
        let c = config(tls_config)?;
        let name = self::server_name(server_name)?;
        let cert = c_str(cert_path, "cert_path")?;
        let key = c_str(key_path, "key_path")?;
        c.lock().add_cert_files(name, Path::new(cert), Path::new(key))
    })
}

/// Like `ember_tls_config_add_cert_files`, with the PEM text itself (`cert_len` and
/// `key_len` bytes, no NUL needed). Both are copied.
#[no_mangle]
pub unsafe extern "C" fn ember_tls_config_add_cert_pem(
    tls_config: *mut ember_tls_config,
    server_name: *const c_char,
    cert_pem: *const c_void,
    cert_len: usize,
    key_pem: *const c_void,
    key_len: usize,
) -> ember_result {
    guard(|| {
        let c = config(tls_config)?;
        let name = self::server_name(server_name)?;
        let cert = args::bytes(cert_pem.cast(), cert_len, "cert_pem")?;
        let key = args::bytes(key_pem.cast(), key_len, "key_pem")?;
        c.lock().add_cert_pem(name, cert, key)
    })
}

/// Adds a TLS listener: like `ember_server_listen_flags` (same flags; with
/// `EMBER_LISTEN_PROXY_PROTOCOL` the PROXY header comes before the handshake), serving HTTPS
/// with the certificates of `tls_config`, which is copied (free it when you like).
/// HTTP/2 is offered by ALPN next to HTTP/1.1; HTTP/2 prior knowledge stays a plain
/// listener's. TLS 1.2 and 1.3 only; clients of older versions, and anything that is not
/// TLS, are dropped in the handshake without touching other connections. The header
/// timeout also bounds the handshake. Before start only.
///
/// Errors: `EMBER_ERR_INVALID_ARG` for a bad address, unknown flags or a configuration
/// without certificates; `EMBER_ERR_STATE` after start; `EMBER_ERR_UNSUPPORTED` in a library built without TLS.
#[no_mangle]
pub unsafe extern "C" fn ember_server_listen_tls(
    server: *mut ember_server,
    address: *const c_char,
    flags: u32,
    tls_config: *const ember_tls_config,
) -> ember_result {
    guard(|| {
        let s = get(server)?;
        let address = c_str(address, "address")?;
        let tls = config(tls_config)?.lock().clone();
        if flags & !(EMBER_LISTEN_REUSE_PORT | EMBER_LISTEN_PROXY_PROTOCOL) != 0 {
            return Err(Error::new(ErrorKind::InvalidArg, format!("listen flags {flags:#x} include unknown bits")));
        }
        s.listen_tls_spec(address, flags & EMBER_LISTEN_REUSE_PORT != 0, flags & EMBER_LISTEN_PROXY_PROTOCOL != 0, &tls)
    })
}

/// Reads the certificate and key files of every TLS listener again (certificates given
/// as PEM text are kept) and uses them for new handshakes; connections already open keep
/// theirs. All or nothing: when a file fails, no listener changes and the error
/// (`EMBER_ERR_INVALID_ARG`) names the file. Any time, any thread (e.g. on SIGHUP).
#[no_mangle]
pub unsafe extern "C" fn ember_server_tls_reload(server: *mut ember_server) -> ember_result {
    guard(|| get(server)?.reload_tls())
}

/// Gives the `index`-th listener (0-based, in listen order, as for `ember_server_port`)
/// the certificates of `tls_config` (copied) for new handshakes. Any time, any thread.
/// Errors: `EMBER_ERR_INVALID_ARG` when that listener is not a TLS listener, the index is
/// out of range or the configuration has no certificate.
#[no_mangle]
pub unsafe extern "C" fn ember_server_tls_set(server: *mut ember_server, index: usize, tls_config: *const ember_tls_config) -> ember_result {
    guard(|| {
        let s = get(server)?;
        let tls = config(tls_config)?.lock().clone();
        s.set_tls(index, &tls)
    })
}
