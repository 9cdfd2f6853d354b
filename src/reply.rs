//! The body hyper sends for every answer. It carries the request's in-flight marker, so
//! the connection counts as busy until hyper has taken the last byte of the answer, not
//! merely until the handler returned; and it tells the host (when it listens) whether the
//! answer went out whole.

use crate::connstate::InFlight;
use crate::exchange::{Event, Exchange};
use crate::stream::StreamBody;
use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

pub(crate) type BoxError = Box<dyn std::error::Error + Send + Sync>;

pub(crate) enum Reply {
    Full(Full),
    Stream(StreamBody),
    /// Boxed, for the same reason as `Answer::file`: hyper moves its body around.
    File(Box<crate::file_body::FileBody>),
}

pub(crate) struct Full {
    data: Option<Bytes>,
    taken: bool,
    ex: Option<Arc<Exchange>>,
    _in_flight: Option<InFlight>,
}

impl Reply {
    pub fn full(body: Bytes, in_flight: Option<InFlight>, ex: Option<Arc<Exchange>>) -> Reply {
        Reply::Full(Full { data: (!body.is_empty()).then_some(body), taken: false, ex, _in_flight: in_flight })
    }
}

impl Drop for Full {
    fn drop(&mut self) {
        if let Some(ex) = &self.ex {
            ex.answer_done();
            ex.fire(if self.taken || self.data.is_none() { Event::Completed } else { Event::Aborted });
        }
    }
}

impl Body for Reply {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        match self.get_mut() {
            Reply::Full(f) => Poll::Ready(f.data.take().map(|d| {
                f.taken = true;
                if let Some(i) = &mut f._in_flight {
                    i.sent(d.len());
                }
                Ok(Frame::data(d))
            })),
            Reply::Stream(s) => Pin::new(s).poll_frame(cx),
            Reply::File(f) => Pin::new(&mut **f).poll_frame(cx),
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            Reply::Full(f) => f.data.is_none(),
            Reply::Stream(s) => s.is_end_stream(),
            Reply::File(f) => f.is_end_stream(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match self {
            Reply::Full(f) => SizeHint::with_exact(f.data.as_ref().map_or(0, |d| d.len() as u64)),
            Reply::Stream(s) => s.size_hint(),
            Reply::File(f) => f.size_hint(),
        }
    }
}
