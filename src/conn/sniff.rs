//! Tells HTTP/2 prior knowledge from HTTP/1 by the first bytes, without consuming them.

use crate::connstate::ConnState;
use std::io;
use std::time::Duration;
use tokio::net::TcpStream;

const H2_PREFACE: &[u8] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Waits for enough bytes to decide. Some(true) = HTTP/2, None = closed before a byte.
/// The watchdog bounds the wait (the header timeout applies).
pub(crate) async fn is_h2(stream: &TcpStream, state: &ConnState) -> io::Result<Option<bool>> {
    let mut buf = [0u8; 24];
    loop {
        let n = stream.peek(&mut buf).await?;
        if n == 0 {
            return Ok(None);
        }
        state.on_read(n);
        if buf[..n] != H2_PREFACE[..n] {
            return Ok(Some(false));
        }
        if n == H2_PREFACE.len() {
            return Ok(Some(true));
        }
        // Only a client that sent part of the preface gets here; peek would spin.
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}
