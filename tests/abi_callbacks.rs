//! What a host may call from inside the engine's callbacks through the C ABI.

use ember::ffi::constants::*;
use ember::ffi::server::*;
use std::ffi::{c_char, c_void};
use std::sync::Mutex;

static SEEN: Mutex<Vec<(String, i32)>> = Mutex::new(Vec::new());

/// Calls `ember_server_wait(server, 0)` from every log line and notes what it returned.
unsafe extern "C" fn log_and_wait(ud: *mut c_void, _level: i32, msg: *const c_char, len: usize) {
    let text = String::from_utf8_lossy(std::slice::from_raw_parts(msg.cast::<u8>(), len)).into_owned();
    let rc = ember_server_wait(ud.cast(), 0);
    SEEN.lock().unwrap().push((text, rc));
}

#[test]
#[ignore = "fails until src/server.rs logs \"server N started\" inside inside::within (reported to the lead; found by the abi fuzz target)"]
fn wait_from_a_log_callback_is_refused_for_every_line_including_start() {
    // README, Lifecycle 5: from a log callback, wait and free refuse with EMBER_ERR_STATE
    // instead of blocking on their own thread. The start line is logged on the host's
    // thread outside that marking: wait there timed out (with EMBER_WAIT_FOREVER it would
    // block for good), and free there would free the server under start's feet.
    let mut s: *mut ember_server = std::ptr::null_mut();
    unsafe {
        assert_eq!(ember_server_new(&mut s), EMBER_OK);
        assert_eq!(ember_server_listen(s, c"127.0.0.1:0".as_ptr()), EMBER_OK);
        assert_eq!(ember_server_set_workers(s, 1), EMBER_OK);
        assert_eq!(ember_server_set_log(s, Some(log_and_wait), s.cast(), EMBER_LOG_DEBUG), EMBER_OK);
        assert_eq!(ember_server_start(s), EMBER_OK);
        assert_eq!(ember_server_stop(s, 0), EMBER_OK);
        assert_eq!(ember_server_free(s), EMBER_OK);
    }
    let seen = SEEN.lock().unwrap();
    assert!(seen.iter().any(|(t, _)| t.ends_with(" started")), "no start line was logged: {seen:?}");
    for (text, rc) in seen.iter() {
        assert_eq!(*rc, EMBER_ERR_STATE, "wait from the log line {text:?}");
    }
}
