//! What a host calls on a request beyond the one-shot answer: answer with a stream,
//! read a streamed body, listen for events. Every call takes the request's handle and
//! may come from any thread.

use crate::error::{Error, ErrorKind, Result};
use crate::exchange::{Event, EventSink};
use crate::inbox::{InError, Read};
use crate::registry;
use crate::request::Answer;
use crate::response;
use crate::stream::{Outbox, WriteError};
use bytes::Bytes;
use std::time::Duration;

fn write_error(id: u64, e: WriteError) -> Error {
    match e {
        WriteError::WouldBlock => Error::new(ErrorKind::WouldBlock, format!("request {id:#x}: the stream's queue is full; wait for it to drain")),
        WriteError::Ended => Error::new(ErrorKind::AlreadyAnswered, format!("request {id:#x}: the streamed answer was already ended")),
        WriteError::Closed => Error::new(ErrorKind::ClientGone, format!("request {id:#x}: the client disconnected or the server stopped")),
    }
}

fn refuse_on_io_thread(what: &str) -> Result<()> {
    if crate::inside::on_io_thread() {
        return Err(Error::new(
            ErrorKind::State,
            format!("{what}: a blocking wait on an I/O thread would stall it (inline dispatch); wait from another thread or use the events"),
        ));
    }
    Ok(())
}

/// Starts a streamed answer: status and headers now, the body in `write` calls. A
/// Content-Length among the headers is kept (the body is then sent length-delimited, and
/// an answer that ends short or runs over is cut); without one, HTTP/1.1 uses chunks.
pub fn begin(id: u64, status: u16, header_block: &[u8]) -> Result<()> {
    let head = response::answer(status, header_block, Bytes::new())?;
    let (claim, ex) = registry::claim_stream(id)?;
    let _ = ex.outbox.set(Outbox::new(ex.queue_limit));
    claim.send(Answer { streamed: true, ..head })
}

/// Queues a chunk. `WouldBlock` when the queue is full: nothing was taken.
pub fn write(id: u64, data: Bytes) -> Result<()> {
    let ex = registry::streaming(id)?;
    let out = ex.outbox.get().ok_or_else(|| Error::new(ErrorKind::State, format!("request {id:#x} has no stream")))?;
    out.write(data).map_err(|e| write_error(id, e))
}

/// Ends the streamed answer; the request's views are released.
pub fn end(id: u64) -> Result<()> {
    let ex = registry::end_stream(id)?;
    let out = ex.outbox.get().ok_or_else(|| Error::new(ErrorKind::State, format!("request {id:#x} has no stream")))?;
    match out.end() {
        // An answer to HEAD sends nothing more: it is complete now.
        Ok(true) => {
            ex.fire(Event::Completed);
            Ok(())
        }
        Ok(false) => Ok(()),
        Err(e) => Err(write_error(id, e)),
    }
}

/// Ends a streamed answer as failed: what is queued is dropped and the client sees the
/// answer cut (HTTP/1.1: the connection closes before the last chunk; HTTP/2: the stream
/// is reset), never a complete-looking body. The host hears `Aborted`.
pub fn abort(id: u64) -> Result<()> {
    let ex = registry::end_stream(id)?;
    if let Some(out) = ex.outbox.get() {
        out.close();
    }
    ex.fire(Event::Aborted);
    Ok(())
}

/// Blocks until a write would be taken (true), or `timeout` passes (false). Not on an
/// I/O thread.
pub fn wait_writable(id: u64, timeout: Option<Duration>) -> Result<bool> {
    refuse_on_io_thread("ember_response_wait_writable")?;
    let ex = registry::streaming(id)?;
    let out = ex.outbox.get().ok_or_else(|| Error::new(ErrorKind::State, format!("request {id:#x} has no stream")))?.clone();
    drop(ex);
    out.wait_writable(timeout).map_err(|e| write_error(id, e))
}

/// Reads a streamed body: Ok(n > 0) bytes, Ok(0) at the end. `timeout` Some(0) never
/// blocks (`WouldBlock` when nothing is there yet; `Readable` follows).
pub fn read(id: u64, buf: &mut [u8], timeout: Option<Duration>) -> Result<usize> {
    if timeout != Some(Duration::ZERO) {
        refuse_on_io_thread("ember_request_read with a timeout")?;
    }
    let ex = registry::exchange(id)?;
    let inbox = ex
        .inbox
        .get()
        .ok_or_else(|| Error::new(ErrorKind::State, format!("request {id:#x}: its route does not stream the body (it is in info->body)")))?
        .clone();
    drop(ex);
    match inbox.read(buf, timeout) {
        Read::Data(n) => Ok(n),
        Read::End => Ok(0),
        Read::Empty => Err(Error::new(ErrorKind::WouldBlock, format!("request {id:#x}: no body bytes yet"))),
        Read::Failed(InError::TooLarge) => {
            Err(Error::new(ErrorKind::TooLarge, format!("request {id:#x}: the body passed the limit; the engine answered 413")))
        }
        Read::Failed(InError::TooSlow) => {
            Err(Error::new(ErrorKind::TimedOut, format!("request {id:#x}: the body arrived too slowly; the engine answered 408")))
        }
        Read::Failed(InError::Gone) => Err(Error::new(ErrorKind::ClientGone, format!("request {id:#x}: the client disconnected"))),
    }
}

/// Tells `sink` about the request: `Writable`, `Readable`, and one final `Aborted` or
/// `Completed`. On a request that already ended, the error says how.
pub fn on_event(id: u64, sink: EventSink) -> Result<()> {
    let ex = registry::exchange(id)?;
    if ex.listen(sink) {
        Ok(())
    } else {
        Err(Error::new(ErrorKind::ClientGone, format!("request {id:#x} already ended")))
    }
}
