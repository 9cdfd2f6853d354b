//! CORS (`ember_server_cors`) and request filtering (`ember_server_filter_*`): answered by
//! the engine before any route, so the host never sees what they refuse. Before start
//! only; strings are copied.

use super::args::c_str;
use super::boundary::guard;
use super::server::{ember_server, get};
use super::types::ember_result;
use crate::cors::{self, CorsPolicy};
use std::os::raw::c_char;

/// `ember_server_cors` flag: credentials (cookies, HTTP authentication) are allowed:
/// `Access-Control-Allow-Credentials: true`, and the origin is named instead of "*".
pub const EMBER_CORS_CREDENTIALS: u32 = 1;

const _: () = assert!(EMBER_CORS_CREDENTIALS == cors::CREDENTIALS);

fn opt<'a>(p: *const c_char, what: &str) -> crate::error::Result<Option<&'a str>> {
    if p.is_null() { Ok(None) } else { c_str(p, what).map(Some) }
}

/// A CORS policy for the paths under `prefix` ("/api" covers "/api" and "/api/…"; the
/// longest matching prefix wins; a second policy for the same prefix replaces the first).
///
/// - `origins`: "*" or a comma-separated list ("https://app.example, http://localhost:3000").
/// - `methods`: comma-separated ("GET, POST, PUT"); NULL = "GET, HEAD, POST".
/// - `headers`: request headers a page may send ("Content-Type, X-Token"); NULL or "*" =
///   whatever the preflight asks for.
/// - `expose`: response headers a page may read (`Access-Control-Expose-Headers`); NULL = none.
/// - `max_age`: seconds a browser may reuse a preflight's answer (0 = no header).
/// - `flags`: `EMBER_CORS_CREDENTIALS` or 0.
///
/// A preflight (OPTIONS with `Origin` and `Access-Control-Request-Method`) is answered by
/// the engine: 204 with the `Access-Control-Allow-*` headers, or 403 when the origin,
/// method or a header is not allowed. The host is not called. Other answers (the host's,
/// static files, cache hits) to an allowed origin get `Access-Control-Allow-Origin`
/// (and `-Credentials`, `-Expose-Headers`); answers that depend on the origin carry
/// `Vary: Origin`. A malformed argument is `EMBER_ERR_INVALID_ARG`. Before start only.
#[no_mangle]
pub unsafe extern "C" fn ember_server_cors(
    server: *mut ember_server,
    prefix: *const c_char,
    origins: *const c_char,
    methods: *const c_char,
    headers: *const c_char,
    expose: *const c_char,
    max_age: u32,
    flags: u32,
) -> ember_result {
    guard(|| {
        let s = get(server)?;
        let policy = CorsPolicy::new(
            c_str(prefix, "prefix")?,
            c_str(origins, "origins")?,
            opt(methods, "methods")?,
            opt(headers, "headers")?,
            opt(expose, "expose")?,
            max_age,
            flags,
        )?;
        s.cors(policy)
    })
}

/// Adds a client address rule: `rule` is an address ("10.1.2.3", "::1") or a CIDR network
/// ("10.0.0.0/8", "fd00::/8"); `allow` true puts it on the allow list, false on the deny
/// list. A client on the deny list, or missing from a non-empty allow list, gets 403
/// (IPv4 clients on an IPv6 socket match IPv4 rules). The address is the TCP peer's.
#[no_mangle]
pub unsafe extern "C" fn ember_server_filter_ip(server: *mut ember_server, rule: *const c_char, allow: bool) -> ember_result {
    guard(|| {
        let rule = c_str(rule, "rule")?;
        get(server)?.filter(|f| f.add_ip(rule, allow))
    })
}

/// Serves only the methods in `methods` (comma-separated: "GET, HEAD, POST, OPTIONS");
/// any other gets 405 with `Allow` listing these, before routing. Replaces an earlier list.
#[no_mangle]
pub unsafe extern "C" fn ember_server_filter_methods(server: *mut ember_server, methods: *const c_char) -> ember_result {
    guard(|| {
        let methods = c_str(methods, "methods")?;
        get(server)?.filter(|f| f.set_methods(methods))
    })
}

/// Denies the paths matching `pattern` with 404: `*` matches any run of characters ('/'
/// included), `?` one character; the whole path must match, without regard to ASCII
/// case, after percent-decoding and resolving "." and ".." segments. Examples: "*.bak"
/// (any path ending in .bak), "/admin/" followed by "*" (everything under /admin), "*" +
/// "/.git/" + "*" (a .git folder anywhere). May be called several times.
#[no_mangle]
pub unsafe extern "C" fn ember_server_filter_path(server: *mut ember_server, pattern: *const c_char) -> ember_result {
    guard(|| {
        let pattern = c_str(pattern, "pattern")?;
        get(server)?.filter(|f| f.deny_path(pattern))
    })
}

/// Requests whose target (path and query as sent) is longer than `max_bytes` get 414
/// (0 = no limit, the default; the head size limit still applies, 431).
#[no_mangle]
pub unsafe extern "C" fn ember_server_filter_max_url(server: *mut ember_server, max_bytes: u64) -> ember_result {
    guard(|| {
        let n = usize::try_from(max_bytes).unwrap_or(usize::MAX);
        get(server)?.filter(|f| {
            f.max_url_bytes = n;
            Ok(())
        })
    })
}
