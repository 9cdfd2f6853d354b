//! WebSocket (RFC 6455) over an HTTP/1.1 upgrade on the same port. Framing, masking,
//! reassembly of fragments, UTF-8 checks of text and control frames are tungstenite's;
//! this module integrates it: the upgrade, a handle per connection, sends from any
//! thread into a bounded queue, groups and broadcasts (a frame encoded once and shared),
//! pings on idle connections, and callbacks in order through each connection's mailbox.

//!
//! Built without the `ws` feature (the minimal library) the types and functions below
//! exist, so the C ABI is the same, but registering a WebSocket route fails saying so
//! (`Error::unsupported`): no upgrade is ever taken, and tungstenite (with the sha1,
//! base64 and rand it pulls in) is not linked.

#[cfg(feature = "ws")]
mod conn;
#[cfg(feature = "ws")]
mod frame;
#[cfg(feature = "ws")]
mod hub;
mod upgrade;

#[cfg(feature = "ws")]
pub(crate) use conn::{run, WsConn, WsLimits};
#[cfg(feature = "ws")]
pub(crate) use hub::Hub;
#[cfg(feature = "ws")]
pub(crate) use upgrade::{check_upgrade, switching_headers, UpgradeCheck};
pub(crate) use upgrade::wants_upgrade;

#[cfg(not(feature = "ws"))]
use crate::error::Error;
use crate::error::Result;
#[cfg(feature = "ws")]
use crate::error::{Error, ErrorKind};
use crate::handler::Request;
#[cfg(feature = "ws")]
use crate::handles::{Handles, Lookup};
#[cfg(feature = "ws")]
use bytes::Bytes;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// A message's kind as the host sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(i32)]
pub enum Kind {
    Text = 1,
    Binary = 2,
}

/// Called with the upgrade request: accept with `accept`, or answer the request to refuse.
pub type OnOpen = Arc<dyn Fn(u64, &Request) + Send + Sync>;
/// One whole (reassembled) message.
pub type OnMessage = Arc<dyn Fn(u64, Kind, &[u8]) + Send + Sync>;
/// Exactly once per accepted connection: the close code (1005 if the peer gave none,
/// 1006 if the connection dropped without a close frame) and reason.
pub type OnClose = Arc<dyn Fn(u64, u16, &str) + Send + Sync>;
/// A send refused for a full queue may now go through.
pub type OnWritable = Arc<dyn Fn(u64) + Send + Sync>;

/// A WebSocket endpoint: its callbacks and how many connections it has.
pub struct WsRoute {
    pub on_open: OnOpen,
    pub on_message: OnMessage,
    pub on_close: OnClose,
    pub on_writable: Option<OnWritable>,
    pub(crate) open: AtomicUsize,
    /// Set when the route is registered: the group every connection of it joins.
    pub(crate) pattern: once_cell::sync::OnceCell<String>,
}

impl WsRoute {
    pub fn new(on_open: OnOpen, on_message: OnMessage, on_close: OnClose, on_writable: Option<OnWritable>) -> WsRoute {
        WsRoute { on_open, on_message, on_close, on_writable, open: AtomicUsize::new(0), pattern: Default::default() }
    }

    pub fn connections(&self) -> usize {
        self.open.load(Ordering::Relaxed)
    }
}

/// What a broadcast did: queued to `sent` connections; `dropped` had full queues.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Broadcast {
    pub sent: usize,
    pub dropped: usize,
}

/// What the WebSocket functions say in a library built without the `ws` feature.
#[cfg(not(feature = "ws"))]
pub(crate) fn unsupported() -> Error {
    Error::unsupported("ws", "no WebSocket")
}

#[cfg(not(feature = "ws"))]
pub(crate) use off::*;

/// The functions of a build without WebSocket: no connection can exist, so each one
/// says why instead of looking for it.
#[cfg(not(feature = "ws"))]
mod off {
    use super::{unsupported, Kind, Result};

    pub fn send(_id: u64, _kind: Kind, _data: &[u8]) -> Result<()> {
        Err(unsupported())
    }
    pub fn close(_id: u64, _code: u16, _reason: &str) -> Result<()> {
        Err(unsupported())
    }
    pub fn accept(_id: u64, _headers: &[u8]) -> Result<()> {
        Err(unsupported())
    }
    pub fn join(_id: u64, _group: &str) -> Result<()> {
        Err(unsupported())
    }
    pub fn leave(_id: u64, _group: &str) -> Result<()> {
        Err(unsupported())
    }
    pub fn buffered(_id: u64) -> Result<usize> {
        Err(unsupported())
    }
    pub(crate) fn purge_server(_server_id: u64) {}
}

/// Every WebSocket connection of every server, by handle.
#[cfg(feature = "ws")]
pub(crate) static TABLE: once_cell::sync::Lazy<Handles<Arc<WsConn>>> = once_cell::sync::Lazy::new(Handles::new);

#[cfg(feature = "ws")]
pub(crate) fn lookup(id: u64) -> Result<Arc<WsConn>> {
    TABLE.get(id).map_err(|e| match e {
        Lookup::Gone => Error::new(ErrorKind::ClientGone, format!("WebSocket {id:#x} is closed")),
        Lookup::Invalid => Error::new(ErrorKind::InvalidHandle, format!("WebSocket handle {id:#x} is not one this library issued or is too old")),
    })
}

#[cfg(feature = "ws")]
/// Sends a message (copied once, into its frame). `Err(WouldBlock)` when the queue is
/// over its limit: nothing was taken; the route's `on_writable` follows.
pub fn send(id: u64, kind: Kind, data: &[u8]) -> Result<()> {
    lookup(id)?.send(frame::data(kind, data))
}

#[cfg(feature = "ws")]
/// Starts the closing handshake with `code` (1000..=4999, not 1004-1006, 1015) and a
/// reason of at most 123 bytes.
pub fn close(id: u64, code: u16, reason: &str) -> Result<()> {
    frame::check_close(code, reason)?;
    lookup(id)?.close(code, reason);
    Ok(())
}

#[cfg(feature = "ws")]
/// Accepts an upgrade the open callback was given; `headers` are extra response header
/// lines (e.g. "Sec-WebSocket-Protocol: chat").
pub fn accept(id: u64, headers: &[u8]) -> Result<()> {
    lookup(id)?.accept(headers)
}

#[cfg(feature = "ws")]
pub fn join(id: u64, group: &str) -> Result<()> {
    let conn = lookup(id)?;
    conn.hub().join(&conn, group);
    Ok(())
}

#[cfg(feature = "ws")]
pub fn leave(id: u64, group: &str) -> Result<()> {
    let conn = lookup(id)?;
    conn.hub().leave(&conn, group);
    Ok(())
}

#[cfg(feature = "ws")]
/// Bytes queued for the connection and not yet written.
pub fn buffered(id: u64) -> Result<usize> {
    Ok(lookup(id)?.queued())
}

#[cfg(feature = "ws")]
/// Ends what is left of a stopped server's connections: one still opening is dropped
/// quietly, an accepted one hears its close. Nothing then keeps the routes alive.
pub(crate) fn purge_server(server_id: u64) {
    for conn in TABLE.collect(|c| c.server_id == server_id) {
        conn.abandon();
        conn.finish(1006, "the server stopped".into());
    }
}

#[cfg(feature = "ws")]
pub(crate) fn encode(kind: Kind, data: &[u8]) -> Bytes {
    frame::data(kind, data)
}
