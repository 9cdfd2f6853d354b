//! A file (or a range of it) as a response body, read from disk in chunks on tokio's
//! blocking pool, one chunk ahead of hyper, and compressed there too when asked. Memory
//! per transfer: two chunks, whatever the file's size or the client's speed.

use crate::compress::Encoder;
use crate::connstate::InFlight;
use crate::reply::BoxError;
use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};
use std::fs::File;
use std::future::Future;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::task::JoinHandle;

/// Bytes read per trip to the blocking pool.
pub(crate) const CHUNK: usize = 128 * 1024;

struct Chunk {
    data: Bytes,
    read: u64,
    encoder: Option<Encoder>,
}

pub(crate) struct FileBody {
    file: Arc<File>,
    offset: u64,
    remaining: u64,
    /// Present while compressing: travels to the blocking pool with each chunk.
    encoder: Option<Encoder>,
    compressed: bool,
    pending: Option<JoinHandle<io::Result<Chunk>>>,
    ended: bool,
    pub(crate) in_flight: Option<InFlight>,
}

impl FileBody {
    /// `len` bytes from `offset`; through `encoder` when given.
    pub fn new(file: File, offset: u64, len: u64, encoder: Option<Encoder>) -> FileBody {
        let compressed = encoder.is_some();
        FileBody { file: Arc::new(file), offset, remaining: len, encoder, compressed, pending: None, ended: false, in_flight: None }
    }

    fn start_read(&mut self) {
        let (file, offset, want) = (self.file.clone(), self.offset, self.remaining.min(CHUNK as u64) as usize);
        let last = want as u64 == self.remaining;
        let mut encoder = self.encoder.take();
        self.pending = Some(tokio::task::spawn_blocking(move || {
            let buf = read_new(&file, offset, want)?;
            let data = match encoder.as_mut() {
                None => Bytes::from(buf),
                Some(e) => {
                    let mut out = e.push(&buf)?.to_vec();
                    if last {
                        out.extend_from_slice(&encoder.take().expect("encoder present").finish()?);
                    }
                    Bytes::from(out)
                }
            };
            Ok(Chunk { data, read: want as u64, encoder })
        }));
    }
}

/// `len` bytes of `file` from `offset` in a new buffer. On Unix the buffer is not
/// zeroed first: pread fills it, and only what it filled is ever exposed.
pub(crate) fn read_new(file: &File, offset: u64, len: usize) -> io::Result<Vec<u8>> {
    #[cfg(unix)]
    {
        use std::os::fd::AsRawFd;
        let mut buf: Vec<u8> = Vec::with_capacity(len);
        while buf.len() < len {
            let at = offset + buf.len() as u64;
            // SAFETY: the pointer and count stay within the spare capacity; the kernel
            // writes at most `len - buf.len()` bytes there, and set_len covers only those.
            let n = unsafe {
                libc::pread(file.as_raw_fd(), buf.as_mut_ptr().add(buf.len()).cast(), len - buf.len(), at as libc::off_t)
            };
            if n < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            if n == 0 {
                return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "the file became shorter while it was sent"));
            }
            // SAFETY: the kernel initialised these n bytes.
            unsafe { buf.set_len(buf.len() + n as usize) };
        }
        Ok(buf)
    }
    #[cfg(not(unix))]
    {
        let mut buf = vec![0u8; len];
        read_exact_at(file, &mut buf, offset)?;
        Ok(buf)
    }
}

#[cfg_attr(unix, allow(dead_code))]
pub(crate) fn read_exact_at(file: &File, mut buf: &mut [u8], mut offset: u64) -> io::Result<()> {
    while !buf.is_empty() {
        #[cfg(unix)]
        let n = std::os::unix::fs::FileExt::read_at(file, buf, offset)?;
        #[cfg(windows)]
        let n = std::os::windows::fs::FileExt::seek_read(file, buf, offset)?;
        if n == 0 {
            // The file shrank under us: the promised length cannot be kept.
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "the file became shorter while it was sent"));
        }
        buf = &mut buf[n..];
        offset += n as u64;
    }
    Ok(())
}

impl Body for FileBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        loop {
            if this.ended {
                return Poll::Ready(None);
            }
            if this.pending.is_none() {
                if this.remaining == 0 && this.encoder.is_none() {
                    this.ended = true;
                    return Poll::Ready(None);
                }
                this.start_read();
            }
            let pending = this.pending.as_mut().expect("a read is pending");
            let chunk = match Pin::new(pending).poll(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Ok(Ok(chunk))) => chunk,
                Poll::Ready(Ok(Err(e))) => {
                    this.pending = None;
                    this.ended = true;
                    return Poll::Ready(Some(Err(Box::new(e))));
                }
                Poll::Ready(Err(e)) => {
                    this.pending = None;
                    this.ended = true;
                    return Poll::Ready(Some(Err(Box::new(e))));
                }
            };
            this.pending = None;
            this.offset += chunk.read;
            this.remaining -= chunk.read;
            this.encoder = chunk.encoder;
            if this.remaining > 0 || this.encoder.is_some() {
                // One chunk ahead: the next read runs while hyper writes this one.
                this.start_read();
            }
            if !chunk.data.is_empty() {
                return Poll::Ready(Some(Ok(Frame::data(chunk.data))));
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        self.ended || (self.remaining == 0 && self.encoder.is_none() && self.pending.is_none() && !self.compressed)
    }

    fn size_hint(&self) -> SizeHint {
        if self.compressed {
            SizeHint::default()
        } else {
            SizeHint::with_exact(self.remaining)
        }
    }
}
