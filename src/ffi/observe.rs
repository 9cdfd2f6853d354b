//! The access log and the metrics of a server.

use super::args::{self, c_str};
use super::boundary::guard;
use super::constants::*;
use super::server::{ember_server, get};
use super::types::ember_result;
use crate::accesslog::{AccessFormat, AccessLogConfig, AccessTarget};
use crate::error::{Error, ErrorKind};
use std::os::raw::c_char;
use std::path::PathBuf;

/// Turns the access log on or off (off by default): one line per answered request,
/// `EMBER_ACCESS_LOG_COMBINED` (Apache's Combined Log Format, times in UTC) or
/// `EMBER_ACCESS_LOG_JSON` (one JSON object per line: time, remote, method, target,
/// version, status, bytes, duration_ms, tls, referer, user_agent); `EMBER_ACCESS_LOG_OFF`
/// turns it off. `path` (UTF-8, copied) names a file the lines are appended to, opened at
/// start (`ember_server_start` fails with the file named if it cannot be); NULL sends
/// each line (without newline) to the log callback with level `EMBER_LOG_ACCESS`,
/// whatever level the callback was set up with.
///
/// Lines are written by a thread of their own, buffered, so requests never wait for
/// them; when it falls behind, lines are dropped and counted (a warning says how many,
/// metrics show `ember_access_log_dropped_total`). A line is written when the answer's
/// last byte was handed to the connection; `bytes` counts the body bytes sent. Requests
/// the parser refuses before they start (a malformed head: 400, 431) have no line.
/// Before start only.
#[no_mangle]
pub unsafe extern "C" fn ember_server_set_access_log(server: *mut ember_server, format: i32, path: *const c_char) -> ember_result {
    guard(|| {
        let s = get(server)?;
        let format = match format {
            EMBER_ACCESS_LOG_OFF => return s.set_access_log(None),
            EMBER_ACCESS_LOG_COMBINED => AccessFormat::Combined,
            EMBER_ACCESS_LOG_JSON => AccessFormat::Json,
            _ => return Err(Error::new(ErrorKind::InvalidArg, format!("access log format {format} is unknown"))),
        };
        let target = if path.is_null() {
            AccessTarget::Log
        } else {
            let p = c_str(path, "path")?;
            if p.is_empty() {
                return Err(Error::new(ErrorKind::InvalidArg, "the access log path is empty (NULL sends the lines to the log callback)"));
            }
            AccessTarget::File(PathBuf::from(p))
        };
        s.set_access_log(Some(AccessLogConfig { format, target }))
    })
}

/// Closes the access log file and opens it again by its path, creating it (for
/// logrotate: move the file, then call this; or use `copytruncate`). Every line of a
/// request answered before the call goes to the old file. Any thread, while running.
/// Returns `EMBER_OK` and does nothing when the lines go to the log callback;
/// `EMBER_ERR_STATE` when the access log is off or the server is not running;
/// `EMBER_ERR_INVALID_ARG` naming the file when it cannot be opened (the old one stays
/// in use).
#[no_mangle]
pub unsafe extern "C" fn ember_server_reopen_access_log(server: *mut ember_server) -> ember_result {
    guard(|| get(server)?.reopen_access_log())
}

/// Turns metrics on: a path ("/metrics", copied) is answered by the engine itself
/// (before any route, GET and HEAD; other methods 405) with the Prometheus text format
/// 0.0.4; "" keeps the metrics without a path, for `ember_server_metrics`. NULL turns
/// them off (the default). The metrics: the counters of `ember_stats`, answers by status
/// code, a histogram of request durations (from the complete request head to the last
/// byte of the answer), TLS handshakes and failures. Before start only.
///
/// The path answers every client on every listener; to restrict who reads the metrics,
/// use "" and serve `ember_server_metrics` from your own route behind your own check.
#[no_mangle]
pub unsafe extern "C" fn ember_server_set_metrics(server: *mut ember_server, path: *const c_char) -> ember_result {
    guard(|| {
        let s = get(server)?;
        let path = if path.is_null() { None } else { Some(c_str(path, "path")?) };
        s.set_metrics(path)
    })
}

/// Copies the metrics text (as the metrics path answers it) into `buf`, NUL-terminated.
/// `*out_len` (NULL is fine) receives its length without the NUL. When it does not fit
/// in `cap` bytes, nothing is copied and `EMBER_ERR_BUFFER_TOO_SMALL` is returned: call
/// again with more room (the text grows as new status codes appear; `buf` may be NULL
/// when `cap` is 0). `EMBER_ERR_STATE` when metrics are off or the server is not running.
#[no_mangle]
pub unsafe extern "C" fn ember_server_metrics(server: *const ember_server, buf: *mut c_char, cap: usize, out_len: *mut usize) -> ember_result {
    guard(|| {
        let text = get(server)?.metrics_text()?;
        if !out_len.is_null() {
            args::write(out_len, "out_len", text.len())?;
        }
        if text.len() >= cap {
            return Err(Error::new(ErrorKind::BufferTooSmall, format!("the metrics text needs {} bytes with its NUL, the buffer has {cap}", text.len() + 1)));
        }
        if buf.is_null() {
            return Err(args::null("buf"));
        }
        // SAFETY: the host promises `cap` writable bytes at `buf`, and len + 1 <= cap.
        unsafe {
            std::ptr::copy_nonoverlapping(text.as_ptr(), buf.cast::<u8>(), text.len());
            *buf.add(text.len()) = 0;
        }
        Ok(())
    })
}
