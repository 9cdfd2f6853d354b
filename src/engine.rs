//! What every connection of one started server shares. Dropping the last `Run` drops
//! the router, which runs each registration's release callback.

use crate::config::Limits;
use crate::dispatch::Job;
use crate::log::Logger;
use crate::router::Router;
use crate::stats::Counters;
use std::sync::Arc;

/// Where a request's callback runs.
pub(crate) enum Target {
    Inline,
    Pool(crossbeam_channel::Sender<Job>),
}

pub(crate) struct Run {
    pub server_id: u64,
    pub router: Router,
    pub limits: Limits,
    pub target: Target,
    pub counters: Arc<Counters>,
    pub log: Logger,
    pub http1: hyper::server::conn::http1::Builder,
    pub http2: hyper::server::conn::http2::Builder<hyper_util::rt::TokioExecutor>,
}

impl Run {
    pub fn new(server_id: u64, router: Router, limits: Limits, target: Target, counters: Arc<Counters>, log: Logger) -> Run {
        let mut http1 = hyper::server::conn::http1::Builder::new();
        // pipeline_flush stays off: with it hyper 1.12 drops its automatic 400/431 answers.
        http1
            .keep_alive(true)
            .header_read_timeout(None)
            .max_buf_size(limits.max_header_bytes.max(8192) * 2)
            .max_header_size(limits.max_header_bytes)
            .max_headers(limits.max_headers);
        let mut http2 = hyper::server::conn::http2::Builder::new(hyper_util::rt::TokioExecutor::new());
        // The header list limit is a u32 in HTTP/2; a larger limit means "as large as it goes".
        http2.max_header_list_size(u32::try_from(limits.max_header_bytes).unwrap_or(u32::MAX));
        Run { server_id, router, limits, target, counters, log, http1, http2 }
    }
}
