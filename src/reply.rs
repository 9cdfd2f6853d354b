//! The body hyper sends for every answer. It carries the request's in-flight marker, so
//! the connection counts as busy until hyper has taken the last byte of the answer, not
//! merely until the handler returned.

use crate::connstate::InFlight;
use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};
use std::pin::Pin;
use std::task::{Context, Poll};

pub(crate) type BoxError = Box<dyn std::error::Error + Send + Sync>;

pub(crate) struct Reply {
    data: Option<Bytes>,
    _in_flight: Option<InFlight>,
}

impl Reply {
    pub fn full(body: Bytes, in_flight: Option<InFlight>) -> Reply {
        Reply { data: (!body.is_empty()).then_some(body), _in_flight: in_flight }
    }
}

impl Body for Reply {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        Poll::Ready(self.get_mut().data.take().map(|d| Ok(Frame::data(d))))
    }

    fn is_end_stream(&self) -> bool {
        self.data.is_none()
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::with_exact(self.data.as_ref().map_or(0, |d| d.len() as u64))
    }
}
