//! What a route calls, and the request object a Rust handler receives.

use crate::error::Result;
use crate::registry;
use crate::request::{Answer, RequestData};
use crate::response;
use bytes::Bytes;
use std::sync::Arc;

/// A route's callback. It answers through `Request::respond`, now or later from any thread.
pub type Handler = Arc<dyn Fn(&Request) + Send + Sync>;

/// A request handed to a handler. Cheap to clone; its data lives until it is answered
/// and every clone is gone.
#[derive(Clone)]
pub struct Request {
    pub(crate) data: Arc<RequestData>,
}

impl Request {
    /// The handle the C ABI uses for this request.
    pub fn id(&self) -> u64 {
        self.data.info().id
    }

    pub fn data(&self) -> &RequestData {
        &self.data
    }

    /// Answers with a status, "Name: value" header lines and a body.
    pub fn respond(&self, status: u16, header_block: &[u8], body: impl Into<Bytes>) -> Result<()> {
        respond(self.id(), response::answer(status, header_block, body.into())?)
    }
}

/// Answers by handle (the deferred path: any thread, any time).
pub fn respond(id: u64, answer: Answer) -> Result<()> {
    registry::answer(id, answer)
}

/// Runs a handler with the panic boundary; a panic answers 500 and is logged.
pub(crate) fn invoke(server_id: u64, handler: &Handler, request: &Request, log: &crate::log::Logger) {
    let outcome = crate::inside::within(server_id, || {
        std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| handler(request)))
    });
    if let Err(panic) = outcome {
        let what = crate::error::panic_message(&*panic);
        log.error(&format!("handler for {} {} panicked: {what}", request.data.method(), request.data.path()));
        respond(request.id(), response::canned(500, false)).ok();
    }
}
