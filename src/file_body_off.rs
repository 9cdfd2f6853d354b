//! `file_body` of a build without the `static` feature: no answer is ever (part of) a
//! file, so the type has no values; the answer and the reply keep one shape in every build.

use crate::connstate::InFlight;
use bytes::Bytes;
use hyper::body::{Body, Frame, SizeHint};
use std::pin::Pin;
use std::task::{Context, Poll};

pub(crate) enum FileBody {}

impl FileBody {
    pub(crate) fn set_in_flight(&mut self, _in_flight: InFlight) {
        match *self {}
    }
}

impl Body for FileBody {
    type Data = Bytes;
    type Error = crate::reply::BoxError;

    fn poll_frame(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        match *self {}
    }

    fn is_end_stream(&self) -> bool {
        match *self {}
    }

    fn size_hint(&self) -> SizeHint {
        match *self {}
    }
}
