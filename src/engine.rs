//! What every connection of one started server shares. Dropping the last `Run` drops
//! the router, which runs each registration's release callback.

use crate::config::Limits;
use crate::dispatch::Dispatcher;
use crate::log::Logger;
use crate::router::Router;
use crate::stats::Counters;
use std::sync::Arc;

pub(crate) struct Run {
    pub server_id: u64,
    pub router: Router,
    pub limits: Limits,
    /// Where host callbacks run. Only `Run` holds it strongly, so dropping the last
    /// `Run` at stop closes the pool's queues.
    pub dispatcher: Arc<Dispatcher>,
    pub counters: Arc<Counters>,
    pub log: Logger,
    pub http1: hyper::server::conn::http1::Builder,
    #[cfg(feature = "http2")]
    pub http2: hyper::server::conn::http2::Builder<hyper_util::rt::TokioExecutor>,
    /// Turns true when the server stops (WebSocket tasks close with 1001).
    #[cfg_attr(not(feature = "ws"), allow(dead_code))]
    pub shutdown: tokio::sync::watch::Receiver<bool>,
    #[cfg(feature = "ws")]
    pub hub: Arc<crate::ws::Hub>,
    pub health: crate::health::Health,
    pub trusted: crate::proxy::Trusted,
    /// The access log and the metrics; None when both are off.
    pub observe: Option<Arc<crate::observe::Observe>>,
    /// Static files, compression, output cache, CORS, filters (None: none configured).
    pub front: Option<Arc<crate::front::Front>>,
}

impl Run {
    pub fn new(
        server_id: u64,
        router: Router,
        limits: Limits,
        dispatcher: Arc<Dispatcher>,
        counters: Arc<Counters>,
        log: Logger,
        shutdown: tokio::sync::watch::Receiver<bool>,
        health_path: Option<String>,
        trusted: crate::proxy::Trusted,
    ) -> Run {
        let mut http1 = hyper::server::conn::http1::Builder::new();
        // pipeline_flush stays off: with it hyper 1.12 drops its automatic 400/431 answers.
        http1
            .keep_alive(true)
            .header_read_timeout(None)
            .max_buf_size(limits.max_header_bytes.max(8192) * 2)
            .max_header_size(limits.max_header_bytes)
            .max_headers(limits.max_headers);
        #[cfg(feature = "http2")]
        let http2 = {
            let mut http2 = hyper::server::conn::http2::Builder::new(hyper_util::rt::TokioExecutor::new());
            // The header list limit is a u32 in HTTP/2; a larger limit means "as large as it goes".
            http2.max_header_list_size(u32::try_from(limits.max_header_bytes).unwrap_or(u32::MAX));
            http2
        };
        Run {
            server_id,
            router,
            limits,
            dispatcher,
            counters,
            log,
            http1,
            #[cfg(feature = "http2")]
            http2,
            shutdown,
            #[cfg(feature = "ws")]
            hub: Arc::default(),
            health: crate::health::Health::new(health_path),
            trusted,
            observe: None,
            front: None,
        }
    }
}
