//! A file (or a range of it) as a response body, read in chunks: straight from the page
//! cache on the I/O thread when the pages are there (Linux, RWF_NOWAIT), otherwise from
//! disk on tokio's blocking pool, one chunk ahead of hyper. Compression always runs on the
//! blocking pool. Memory per transfer: two chunks, whatever the file's size or the
//! client's speed.

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
    /// Reads of pages already in memory may happen right here (`read_cached`); off once
    /// the kernel says it cannot do that.
    nowait: bool,
    pub(crate) in_flight: Option<InFlight>,
}

impl FileBody {
    /// The answer's in-flight marker rides with the body until hyper took its last byte.
    pub(crate) fn set_in_flight(&mut self, in_flight: InFlight) {
        self.in_flight = Some(in_flight);
    }

    /// `len` bytes from `offset`; through `encoder` when given.
    pub fn new(file: File, offset: u64, len: u64, encoder: Option<Encoder>) -> FileBody {
        let compressed = encoder.is_some();
        FileBody {
            file: Arc::new(file),
            offset,
            remaining: len,
            encoder,
            compressed,
            pending: None,
            ended: false,
            nowait: cfg!(target_os = "linux"),
            in_flight: None,
        }
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

/// What `read_cached` found (elsewhere than Linux, always `Unsupported`).
#[cfg_attr(not(target_os = "linux"), allow(dead_code))]
enum Cached {
    /// Bytes that were in the page cache (maybe fewer than asked).
    Data(Vec<u8>),
    /// Not (all) in memory, or the file ended early: the blocking pool reads it.
    Miss,
    /// The kernel or file system cannot read without blocking: never ask again.
    Unsupported,
}

/// Reads what of `len` bytes at `offset` is already in the page cache, without ever
/// blocking the I/O thread (preadv2 with RWF_NOWAIT): a page-cache read is a memory copy,
/// cheaper than the two thread switches of a trip to the blocking pool.
#[cfg(target_os = "linux")]
fn read_cached(file: &File, offset: u64, len: usize) -> Cached {
    use std::os::fd::AsRawFd;
    let mut buf: Vec<u8> = Vec::with_capacity(len);
    let iov = libc::iovec { iov_base: buf.as_mut_ptr().cast(), iov_len: len };
    // SAFETY: the iovec covers the vector's spare capacity, which the kernel fills with
    // at most `len` bytes; set_len covers only what it reports.
    let n = unsafe { libc::preadv2(file.as_raw_fd(), &iov, 1, offset as libc::off_t, libc::RWF_NOWAIT) };
    if n > 0 {
        // SAFETY: the kernel initialised these n bytes.
        unsafe { buf.set_len(n as usize) };
        return Cached::Data(buf);
    }
    match io::Error::last_os_error().raw_os_error() {
        _ if n == 0 => Cached::Miss,
        Some(libc::EAGAIN) | Some(libc::EINTR) => Cached::Miss,
        _ => Cached::Unsupported,
    }
}

#[cfg(not(target_os = "linux"))]
fn read_cached(_file: &File, _offset: u64, _len: usize) -> Cached {
    Cached::Unsupported
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
                // Compression never runs here; plain bytes in memory are copied right away.
                if this.nowait && !this.compressed {
                    match read_cached(&this.file, this.offset, this.remaining.min(CHUNK as u64) as usize) {
                        Cached::Data(data) => {
                            this.offset += data.len() as u64;
                            this.remaining -= data.len() as u64;
                            return Poll::Ready(Some(Ok(Frame::data(Bytes::from(data)))));
                        }
                        Cached::Miss => {}
                        Cached::Unsupported => this.nowait = false,
                    }
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
            if this.encoder.is_some() || (this.remaining > 0 && (this.compressed || !this.nowait)) {
                // One chunk ahead: the next read runs while hyper writes this one. (Plain
                // bytes try the page cache first, at the next poll.)
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
