//! One TLS connection: the handshake, then the protocol ALPN chose, over the decrypted
//! stream. The connection's watchdog bounds the handshake: until the first decrypted
//! byte arrives the connection counts as one that has sent nothing, so the header
//! timeout ends a handshake that never completes, and starts again when it completes.

use super::TlsSite;
use crate::conn;
use crate::connstate::ConnState;
use crate::engine::Run;
use std::io;
use std::pin::Pin;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio::sync::{watch, Notify};

pub(crate) async fn drive_tls(stream: TcpStream, site: Arc<TlsSite>, state: Arc<ConnState>, run: Arc<Run>, shutdown: watch::Receiver<bool>, polite: Arc<Notify>) {
    let acceptor = tokio_rustls::TlsAcceptor::from(site.current());
    let mut stopping = shutdown.clone();
    let accepted = tokio::select! {
        r = acceptor.accept(stream) => r,
        // A server stopping does not wait for handshakes.
        _ = stopping.wait_for(|s| *s) => return,
    };
    let tls = match accepted {
        Ok(tls) => tls,
        Err(e) => {
            // Scanners and old clients do this all day: not worth more than a debug line.
            run.counters.tls_failures.fetch_add(1, Relaxed);
            run.log.debug(&format!("TLS handshake with {} failed: {e}", state.remote));
            return;
        }
    };
    run.counters.tls_handshakes.fetch_add(1, Relaxed);
    // The handshake counts as activity: the first request head gets a header timeout of
    // its own, as on a plain connection, instead of what a slow handshake left of it.
    state.events.fetch_add(1, Relaxed);
    let is_h2 = cfg!(feature = "http2") && tls.get_ref().1.alpn_protocol() == Some(b"h2");
    let io = FlushWatch { inner: tls, state: state.clone() };
    conn::drive(conn::stream::Stream::Tls(Box::new(io)), is_h2, state, run, shutdown, polite).await
}

/// Tells the watchdog when a flush cannot finish. rustls takes what hyper writes into its
/// own buffer and only finds the socket full when hyper flushes, so without this a peer
/// that stops reading a TLS answer would look like a busy connection, never a stuck one.
struct FlushWatch<S> {
    inner: S,
    state: Arc<ConnState>,
}

impl<S: AsyncRead + Unpin> AsyncRead for FlushWatch<S> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for FlushWatch<S> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(self: Pin<&mut Self>, cx: &mut Context<'_>, bufs: &[io::IoSlice<'_>]) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let res = Pin::new(&mut this.inner).poll_flush(cx);
        match res {
            Poll::Pending => this.state.on_write(false),
            // Only a flush that had been stuck counts as progress here; the writes
            // themselves count the rest.
            Poll::Ready(Ok(())) if this.state.write_blocked.load(Relaxed) => this.state.on_write(true),
            _ => {}
        }
        res
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}
