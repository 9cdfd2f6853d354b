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

/// An answer written this long after its request's bytes arrived is held for the
/// others (`Watched::hold_first_write`): about 7 µs (20,000 TSC ticks at 3 GHz), about
/// three times what the C reference app takes from read to write, a fraction of what
/// a Python or .NET handler does.
#[cfg(target_arch = "x86_64")]
const HOLD_AFTER: u64 = 20_000;
#[cfg(not(target_arch = "x86_64"))]
const HOLD_AFTER: u64 = 7_000;

/// A cheap clock for `HOLD_AFTER`: the time-stamp counter where there is one (a few
/// cycles, where a clock_gettime is some 50 instructions), nanoseconds elsewhere.
#[inline]
fn ticks() -> u64 {
    #[cfg(target_arch = "x86_64")]
    {
        // SAFETY: RDTSC exists on every x86_64 CPU and has no preconditions.
        unsafe { std::arch::x86_64::_rdtsc() }
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
        START.get_or_init(std::time::Instant::now).elapsed().as_nanos() as u64
    }
}

pub(crate) struct Watched<S> {
    pub stream: S,
    pub state: Arc<ConnState>,
    pub counters: Arc<Counters>,
    /// HTTP/1: the last four bytes read, across reads.
    tail: [u8; 4],
    /// HTTP/2: where the byte stream is in its frames, each way.
    frames: Option<H2Frames>,
    sent: Option<Sending>,
    /// Bytes arrived since the last write: the next write is likely a request's answer.
    fresh: bool,
    /// `ticks()` when `fresh` was set.
    fresh_at: u64,
    /// The answer's write, held back for one pass of the I/O thread's other ready
    /// connections (see `hold_first_write`).
    pause: Option<Pin<Box<dyn std::future::Future<Output = ()> + Send>>>,
}

impl<S> Watched<S> {
    pub fn new(stream: S, is_h2: bool, state: Arc<ConnState>, counters: Arc<Counters>) -> Self {
        Watched { stream, state, counters, tail: [0; 4], frames: is_h2.then(H2Frames::new), sent: is_h2.then(Sending::default), fresh: false, fresh_at: 0, pause: None }
    }

    fn wrote(&mut self, res: &Poll<io::Result<usize>>, bufs: &[&[u8]]) {
        match res {
            Poll::Ready(Ok(n)) => {
                if let Some(sent) = &mut self.sent {
                    let mut left = *n;
                    for b in bufs {
                        let take = left.min(b.len());
                        sent.feed(&b[..take], &self.state);
                        left -= take;
                        if left == 0 {
                            break;
                        }
                    }
                }
                self.counters.bytes_written.fetch_add(*n as u64, Relaxed);
                self.state.on_write(true);
            }
            Poll::Pending => self.state.on_write(false),
            Poll::Ready(Err(_)) => {}
        }
    }

    /// Holds an answer's first write back until the I/O thread has run the other
    /// connections that are ready now (tokio's `yield_now` waits for that), so that
    /// their answers leave together. Answered one by one, a slow handler's answers each
    /// find the client asleep and pay the kernel's cross-CPU wake-up; in a burst the
    /// client is still busy with the first ones. Only for answers that took a while
    /// (`HOLD_AFTER`) since their request's bytes arrived: a fast handler's client never
    /// got to sleep, and the hold would only cost one more poll of the connection (C
    /// reference app on loopback: 10-20 % fewer req/s at 50 connections when every
    /// answer was held; the Python ASGI server: 1.2× the req/s at 50 connections, its
    /// client's sleeps per answer from 0.40-0.50 to 0.13-0.20 and a fifth less kernel
    /// time per request). Not done on the only
    /// connection (nothing to gather), nor for a WebSocket's frames; HTTP/2 reads
    /// never set `fresh`.
    fn hold_first_write(&mut self, cx: &mut Context<'_>) -> Poll<()> {
        if !self.fresh {
            return Poll::Ready(());
        }
        if self.pause.is_none()
            && (self.state.upgraded.load(Relaxed)
                || self.counters.active_connections.load(Relaxed) < 2
                || ticks().wrapping_sub(self.fresh_at) < HOLD_AFTER)
        {
            self.fresh = false;
            return Poll::Ready(());
        }
        let pause = self.pause.get_or_insert_with(|| Box::pin(tokio::task::yield_now()));
        if pause.as_mut().poll(cx).is_pending() {
            return Poll::Pending;
        }
        self.pause = None;
        self.fresh = false;
        Poll::Ready(())
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
                let resets = frames.feed(&buf.filled()[before..]);
                if frames.control > 0 {
                    this.state.h2_control_frames.fetch_add(std::mem::take(&mut frames.control), Relaxed);
                }
                if resets > 0 {
                    if let Some(sent) = &mut this.sent {
                        sent.peer_reset(frames, &this.state);
                    }
                }
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
            if n > 0 && !this.fresh {
                this.fresh = true;
                this.fresh_at = ticks();
            }
            this.counters.bytes_read.fetch_add(n as u64, Relaxed);
        }
        res
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Watched<S> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if this.hold_first_write(cx).is_pending() {
            return Poll::Pending;
        }
        let res = Pin::new(&mut this.stream).poll_write(cx, buf);
        this.wrote(&res, &[buf]);
        res
    }

    fn poll_write_vectored(self: Pin<&mut Self>, cx: &mut Context<'_>, bufs: &[io::IoSlice<'_>]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        if this.hold_first_write(cx).is_pending() {
            return Poll::Pending;
        }
        let res = Pin::new(&mut this.stream).poll_write_vectored(cx, bufs);
        if this.sent.is_some() {
            let slices: Vec<&[u8]> = bufs.iter().map(|b| &**b).collect();
            this.wrote(&res, &slices);
        } else {
            this.wrote(&res, &[]);
        }
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
    split: Splitter,
    kind: u8,
    block_open: bool,
    /// Streams the peer reset (RST_STREAM), since `Sending` last took them.
    resets: Vec<u32>,
    /// PING, SETTINGS (not acks), PRIORITY and WINDOW_UPDATE frames since last taken.
    control: u64,
}

const DATA: u8 = 0;
const HEADERS: u8 = 1;
const PRIORITY: u8 = 2;
const RST_STREAM: u8 = 3;
const SETTINGS: u8 = 4;
const PING: u8 = 6;
const WINDOW_UPDATE: u8 = 8;
const ACK: u8 = 0x1;
const PUSH_PROMISE: u8 = 5;
const CONTINUATION: u8 = 9;
const END_STREAM: u8 = 0x1;
const END_HEADERS: u8 = 0x4;

fn stream_id(head: &[u8; 9]) -> u32 {
    u32::from_be_bytes([head[5], head[6], head[7], head[8]]) & 0x7FFF_FFFF
}

/// Cuts a byte stream, however it arrives, into HTTP/2 frame heads; payloads are skipped,
/// not read. Both directions use it.
#[derive(Default)]
struct Splitter {
    head: [u8; 9],
    head_len: usize,
    payload_left: u32,
}

impl Splitter {
    /// The next frame head completed by `bytes` (consuming them up to its end), or
    /// `None` once they are used up.
    fn next(&mut self, bytes: &mut &[u8]) -> Option<[u8; 9]> {
        while !bytes.is_empty() {
            if self.payload_left > 0 {
                let take = (self.payload_left as usize).min(bytes.len());
                self.payload_left -= take as u32;
                *bytes = &bytes[take..];
                continue;
            }
            let take = (9 - self.head_len).min(bytes.len());
            self.head[self.head_len..self.head_len + take].copy_from_slice(&bytes[..take]);
            self.head_len += take;
            *bytes = &bytes[take..];
            if self.head_len == 9 {
                self.head_len = 0;
                let h = self.head;
                self.payload_left = u32::from_be_bytes([0, h[0], h[1], h[2]]);
                return Some(h);
            }
        }
        None
    }

    fn mid_frame(&self) -> bool {
        self.head_len > 0 || self.payload_left > 0
    }
}

impl H2Frames {
    fn new() -> H2Frames {
        H2Frames { preface: 24, split: Splitter::default(), kind: DATA, block_open: false, resets: Vec::new(), control: 0 }
    }

    /// Follows `bytes`; returns how many RST_STREAM frames began in them.
    fn feed(&mut self, mut bytes: &[u8]) -> usize {
        let mut resets = 0;
        let skip = self.preface.min(bytes.len());
        self.preface -= skip;
        bytes = &bytes[skip..];
        while let Some(h) = self.split.next(&mut bytes) {
            self.kind = h[3];
            if matches!(self.kind, HEADERS | PUSH_PROMISE | CONTINUATION) {
                self.block_open = h[4] & END_HEADERS == 0;
            }
            match self.kind {
                PING | SETTINGS if h[4] & ACK == 0 => self.control += 1,
                PRIORITY | WINDOW_UPDATE => self.control += 1,
                _ => {}
            }
            if self.kind == RST_STREAM {
                resets += 1;
                // Bounded: `Sending` takes them after every read.
                self.resets.push(stream_id(&h));
            }
        }
        resets
    }

    fn head_pending(&self) -> bool {
        self.preface > 0 || self.block_open || (self.split.mid_frame() && self.kind != DATA)
    }
}

/// Follows the frames the server writes: which streams have begun an answer (a HEADERS
/// frame without END_STREAM) and not ended it (END_STREAM, or a reset either way), and
/// the DATA frames that went out. Published to `ConnState` for the watchdog.
#[derive(Default)]
struct Sending {
    split: Splitter,
    /// At most the peer's concurrent streams (hyper allows 200).
    open: Vec<u32>,
}

impl Sending {
    fn feed(&mut self, mut bytes: &[u8], state: &ConnState) {
        let before = self.open.len();
        let mut data_frames = 0u64;
        while let Some(h) = self.split.next(&mut bytes) {
            let (kind, flags, id) = (h[3], h[4], stream_id(&h));
            if kind == DATA {
                data_frames += 1;
            }
            if ((kind == HEADERS || kind == DATA) && flags & END_STREAM != 0) || kind == RST_STREAM {
                self.open.retain(|&s| s != id);
            } else if kind == HEADERS && !self.open.contains(&id) {
                self.open.push(id);
            }
        }
        if data_frames > 0 {
            state.h2_data_frames.fetch_add(data_frames, Relaxed);
        }
        if self.open.len() != before {
            state.h2_sending.store(self.open.len() as u32, Relaxed);
        }
    }

    fn peer_reset(&mut self, frames: &mut H2Frames, state: &ConnState) {
        let before = self.open.len();
        for id in frames.resets.drain(..) {
            self.open.retain(|&s| s != id);
        }
        if self.open.len() != before {
            state.h2_sending.store(self.open.len() as u32, Relaxed);
        }
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
