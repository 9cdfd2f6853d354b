//! The socket as hyper sees it: counts bytes and tells the connection's state about
//! reads, writes and a peer that stopped reading.

use crate::connstate::ConnState;
use crate::stats::Counters;
use std::io;
use std::pin::Pin;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

pub(crate) struct Watched<S> {
    pub stream: S,
    pub state: Arc<ConnState>,
    pub counters: Arc<Counters>,
    /// HTTP/1: the last four bytes read, across reads.
    tail: [u8; 4],
    /// HTTP/2: where the byte stream is in its frames.
    frames: Option<H2Frames>,
}

impl<S> Watched<S> {
    pub fn new(stream: S, is_h2: bool, state: Arc<ConnState>, counters: Arc<Counters>) -> Self {
        Watched { stream, state, counters, tail: [0; 4], frames: is_h2.then(H2Frames::new) }
    }

    fn wrote(&self, res: &Poll<io::Result<usize>>) {
        match res {
            Poll::Ready(Ok(n)) => {
                self.counters.bytes_written.fetch_add(*n as u64, Relaxed);
                self.state.on_write(true);
            }
            Poll::Pending => self.state.on_write(false),
            Poll::Ready(Err(_)) => {}
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Watched<S> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let res = Pin::new(&mut this.stream).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = res {
            let n = buf.filled().len() - before;
            if let Some(frames) = &mut this.frames {
                frames.feed(&buf.filled()[before..]);
                this.state.h2_read(n, frames.head_pending());
                this.counters.bytes_read.fetch_add(n as u64, Relaxed);
                return res;
            }
            if n > 0 {
                let fresh = &buf.filled()[before..];
                let keep = 4usize.saturating_sub(fresh.len());
                let mut tail = [0u8; 4];
                tail[..keep].copy_from_slice(&this.tail[4 - keep..]);
                tail[keep..].copy_from_slice(&fresh[fresh.len() - (4 - keep)..]);
                this.tail = tail;
                this.state.at_boundary.store(&tail == b"\r\n\r\n" || tail[2..] == *b"\n\n", Relaxed);
            }
            this.state.on_read(n);
            this.counters.bytes_read.fetch_add(n as u64, Relaxed);
        }
        res
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Watched<S> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let res = Pin::new(&mut this.stream).poll_write(cx, buf);
        this.wrote(&res);
        res
    }

    fn poll_write_vectored(self: Pin<&mut Self>, cx: &mut Context<'_>, bufs: &[io::IoSlice<'_>]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let res = Pin::new(&mut this.stream).poll_write_vectored(cx, bufs);
        this.wrote(&res);
        res
    }

    fn is_write_vectored(&self) -> bool {
        self.stream.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().stream).poll_shutdown(cx)
    }
}

/// Follows the HTTP/2 frame boundaries in the bytes read, to tell the watchdog when a
/// request head is under way: a header block (HEADERS, then CONTINUATION until
/// END_HEADERS) is open, or a frame other than DATA has only partly arrived. A client
/// that merely sent WINDOW_UPDATE or SETTINGS ACK is idle, not slow. A few compares per
/// frame; payloads are skipped, not read.
struct H2Frames {
    /// Preface bytes still to skip.
    preface: usize,
    head: [u8; 9],
    head_len: usize,
    payload_left: u32,
    kind: u8,
    block_open: bool,
}

const DATA: u8 = 0;
const HEADERS: u8 = 1;
const PUSH_PROMISE: u8 = 5;
const CONTINUATION: u8 = 9;
const END_HEADERS: u8 = 0x4;

impl H2Frames {
    fn new() -> H2Frames {
        H2Frames { preface: 24, head: [0; 9], head_len: 0, payload_left: 0, kind: DATA, block_open: false }
    }

    fn feed(&mut self, mut bytes: &[u8]) {
        let skip = self.preface.min(bytes.len());
        self.preface -= skip;
        bytes = &bytes[skip..];
        while !bytes.is_empty() {
            if self.payload_left > 0 {
                let take = (self.payload_left as usize).min(bytes.len());
                self.payload_left -= take as u32;
                bytes = &bytes[take..];
                continue;
            }
            let take = (9 - self.head_len).min(bytes.len());
            self.head[self.head_len..self.head_len + take].copy_from_slice(&bytes[..take]);
            self.head_len += take;
            bytes = &bytes[take..];
            if self.head_len == 9 {
                self.head_len = 0;
                let h = &self.head;
                self.payload_left = u32::from_be_bytes([0, h[0], h[1], h[2]]);
                self.kind = h[3];
                if matches!(self.kind, HEADERS | PUSH_PROMISE | CONTINUATION) {
                    self.block_open = h[4] & END_HEADERS == 0;
                }
            }
        }
    }

    fn head_pending(&self) -> bool {
        let mid_frame = self.head_len > 0 || self.payload_left > 0;
        self.preface > 0 || self.block_open || (mid_frame && self.kind != DATA)
    }
}

#[cfg(test)]
mod tests {
    use super::H2Frames;

    fn frame(kind: u8, flags: u8, len: usize) -> Vec<u8> {
        let mut f = vec![(len >> 16) as u8, (len >> 8) as u8, len as u8, kind, flags, 0, 0, 0, 1];
        f.resize(9 + len, 0xab);
        f
    }

    #[test]
    fn an_open_header_block_or_a_partial_control_frame_is_a_pending_head() {
        let mut t = H2Frames::new();
        t.feed(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n");
        assert!(!t.head_pending(), "after the preface");
        t.feed(&frame(4, 0, 6)); // SETTINGS
        assert!(!t.head_pending());
        let headers = frame(1, 0, 10); // HEADERS without END_HEADERS
        t.feed(&headers[..5]);
        assert!(t.head_pending(), "partial frame head");
        t.feed(&headers[5..]);
        assert!(t.head_pending(), "header block still open");
        t.feed(&frame(9, 0x4, 3)); // CONTINUATION with END_HEADERS
        assert!(!t.head_pending());
        let data = frame(0, 0, 100);
        t.feed(&data[..50]);
        assert!(!t.head_pending(), "a DATA frame under way is a body, not a head");
        t.feed(&data[50..]);
        t.feed(&frame(8, 0, 4)); // WINDOW_UPDATE
        assert!(!t.head_pending(), "an idle client");
    }
}
