//! The one byte-stream type every connection is served over: a plain TCP stream, or (a TLS
//! listener's) the decrypted stream over it. One type, so that hyper's connection code is
//! compiled once; a second instantiation for TLS changed how the compiler inlined the plain
//! path and cost every plain request about 1 % more instructions (bench/hotpath.sh).

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

pub(crate) enum Stream {
    Plain(TcpStream),
    /// Boxed: a TLS session is large, and plain connections should not carry its size.
    #[cfg(feature = "tls")]
    Tls(Box<dyn Io>),
}

/// What a TLS stream is to the connection.
#[cfg(feature = "tls")]
pub(crate) trait Io: AsyncRead + AsyncWrite + Unpin + Send {}
#[cfg(feature = "tls")]
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Io for T {}

macro_rules! each {
    ($self:ident, $s:ident => $e:expr) => {
        match $self.get_mut() {
            Stream::Plain($s) => $e,
            #[cfg(feature = "tls")]
            Stream::Tls($s) => $e,
        }
    };
}

impl AsyncRead for Stream {
    #[inline]
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        each!(self, s => Pin::new(s).poll_read(cx, buf))
    }
}

impl AsyncWrite for Stream {
    #[inline]
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        each!(self, s => Pin::new(s).poll_write(cx, buf))
    }

    #[inline]
    fn poll_write_vectored(self: Pin<&mut Self>, cx: &mut Context<'_>, bufs: &[io::IoSlice<'_>]) -> Poll<io::Result<usize>> {
        each!(self, s => Pin::new(s).poll_write_vectored(cx, bufs))
    }

    #[inline]
    fn is_write_vectored(&self) -> bool {
        match self {
            Stream::Plain(s) => s.is_write_vectored(),
            #[cfg(feature = "tls")]
            Stream::Tls(s) => s.is_write_vectored(),
        }
    }

    #[inline]
    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        each!(self, s => Pin::new(s).poll_flush(cx))
    }

    #[inline]
    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        each!(self, s => Pin::new(s).poll_shutdown(cx))
    }
}
