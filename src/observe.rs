//! Where the request path meets the access log and the metrics. With both off the
//! request path only tests `Run::observe` for None; with either on, a request is timed
//! from its complete head until hyper has taken the last byte of its answer (or dropped
//! it): its record rides in the request's in-flight guard, which the answer's body holds,
//! and is written when that guard goes.

use crate::accesslog::{AccessLog, AccessLogConfig, Record};
use crate::config::Config;
use crate::connstate::ConnState;
use crate::dispatch::Hooks;
use crate::error::Result;
use crate::log::Logger;
use crate::metrics::{Metrics, StatusCodes};
use crate::request::Answer;
use crate::stats::Counters;
use bytes::Bytes;
use http::header::{HeaderValue, ALLOW, CACHE_CONTROL, CONTENT_TYPE, REFERER, USER_AGENT};
use http::{Method, Version};
use std::sync::Arc;
use std::time::{Instant, SystemTime};

/// What the access log and the metrics need.
#[derive(Debug, Clone, Default)]
pub(crate) struct ObserveConfig {
    pub access_log: Option<AccessLogConfig>,
    /// Some: metrics are on; the string is the path that answers them ("" = none).
    pub metrics_path: Option<String>,
}

pub(crate) struct Observe {
    metrics: Option<Metrics>,
    access: Option<AccessLog>,
}

impl Observe {
    /// None when both are off. Opens the access log file (an error names it).
    pub fn start(config: &Config, counters: &Counters, log: &Logger, hooks: &Hooks, server_id: u64) -> Result<Option<Arc<Observe>>> {
        let c = &config.observe;
        if c.access_log.is_none() && c.metrics_path.is_none() {
            return Ok(None);
        }
        let access = c.access_log.as_ref().map(|a| AccessLog::start(a, log.clone(), hooks.clone(), server_id)).transpose()?;
        let metrics = c.metrics_path.as_ref().map(|p| Metrics::new((!p.is_empty()).then(|| p.clone())));
        if metrics.is_some() {
            let _ = counters.by_code.set(StatusCodes::new());
        }
        Ok(Some(Arc::new(Observe { metrics, access })))
    }

    /// Takes what the line needs from the request before the request path consumes it.
    pub fn begin(&self, req: &http::request::Parts, conn: &ConnState) -> Begun {
        let line = self.access.as_ref().map(|_| {
            let h = &req.headers;
            Box::new(Line {
                when: SystemTime::now(),
                remote: conn.remote.clone(),
                method: req.method.clone(),
                target: req.uri.path_and_query().map_or_else(|| req.uri.path().to_owned(), |pq| pq.as_str().to_owned()),
                version: req.version,
                referer: h.get(REFERER).cloned(),
                user_agent: h.get(USER_AGENT).cloned(),
                tls: conn.secure,
            })
        });
        Begun { start: Instant::now(), line }
    }

    /// The record that goes with the answer (in its in-flight guard).
    pub fn observed(self: &Arc<Self>, begun: Begun, status: u16) -> Observed {
        Observed { begun, status, bytes: 0, observe: self.clone() }
    }

    /// The exposition, when `path` is the metrics path.
    pub fn metrics_answer(&self, method: &Method, path: &str, counters: &Counters) -> Option<Answer> {
        let m = self.metrics.as_ref()?;
        if m.path.as_deref() != Some(path) {
            return None;
        }
        let mut a = if method == Method::GET || method == Method::HEAD {
            let mut a = Answer::new(200, Default::default(), Bytes::from(self.metrics_text(counters)?));
            a.headers.insert(CONTENT_TYPE, HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"));
            a
        } else {
            let mut a = crate::response::canned(405, false);
            a.headers.insert(ALLOW, HeaderValue::from_static("GET, HEAD"));
            a
        };
        a.headers.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
        Some(a)
    }

    /// None when metrics are off.
    pub fn metrics_text(&self, counters: &Counters) -> Option<String> {
        let m = self.metrics.as_ref()?;
        Some(m.render(counters, self.access.as_ref().map(|a| a.dropped())))
    }

    pub fn reopen_access_log(&self) -> Option<Result<()>> {
        self.access.as_ref().map(|a| a.reopen())
    }

    /// Writes out the access log and ends its thread (at stop).
    pub fn finish(&self) {
        if let Some(a) = &self.access {
            a.finish();
        }
    }
}

impl crate::server::Server {
    /// Turns the access log on (Some) or off (None, the default). Before start only; a
    /// file is opened at start, and a file that cannot be opened fails the start.
    pub fn set_access_log(&self, config: Option<AccessLogConfig>) -> Result<()> {
        self.configure(|c, _, _| Ok(c.observe.access_log = config))
    }

    /// Turns metrics on: `Some("/metrics")` also answers GET and HEAD on that path with
    /// the exposition (before any route), `Some("")` keeps them for `metrics_text` only.
    /// None (the default) turns them off. Before start only.
    pub fn set_metrics(&self, path: Option<&str>) -> Result<()> {
        if let Some(p) = path {
            if !p.is_empty() && (!p.starts_with('/') || p.contains(['?', '#']) || p.bytes().any(|b| b <= b' ' || b == 0x7f)) {
                return Err(crate::error::Error::new(
                    crate::error::ErrorKind::InvalidArg,
                    format!("metrics path {p:?} must start with '/' and hold no query, fragment, space or control character"),
                ));
            }
        }
        self.configure(|c, _, _| Ok(c.observe.metrics_path = path.map(str::to_owned)))
    }

    /// Closes the access log file and opens it again by its path (after logrotate moved
    /// it). Every line of a request answered before the call is in the old file. Does
    /// nothing when the access log goes to the log callback.
    pub fn reopen_access_log(&self) -> Result<()> {
        let off = || crate::error::Error::new(crate::error::ErrorKind::State, "reopen: the access log is off");
        self.observer()?.and_then(|o| o.reopen_access_log()).unwrap_or_else(|| Err(off()))
    }

    /// The metrics in the Prometheus text format, as the metrics path answers them.
    pub fn metrics_text(&self) -> Result<String> {
        let off = || crate::error::Error::new(crate::error::ErrorKind::State, "metrics are off (set_metrics before start)");
        let o = self.observer()?.ok_or_else(off)?;
        o.metrics_text(self.counters()).ok_or_else(off)
    }
}

struct Line {
    when: SystemTime,
    remote: String,
    method: Method,
    target: String,
    version: Version,
    referer: Option<HeaderValue>,
    user_agent: Option<HeaderValue>,
    tls: bool,
}

/// A request being timed.
pub(crate) struct Begun {
    start: Instant,
    line: Option<Box<Line>>,
}

impl Begun {
    /// When the request began (its head complete).
    pub fn start(&self) -> Instant {
        self.start
    }
}

/// A request whose answer is under way; dropped (with the request's in-flight guard) when
/// hyper has taken the answer's last byte or given up on it.
pub(crate) struct Observed {
    begun: Begun,
    status: u16,
    pub bytes: u64,
    observe: Arc<Observe>,
}

impl Drop for Observed {
    fn drop(&mut self) {
        let took = self.begun.start.elapsed();
        if let Some(m) = &self.observe.metrics {
            m.observe(took);
        }
        if let (Some(access), Some(line)) = (&self.observe.access, self.begun.line.take()) {
            let Line { when, remote, method, target, version, referer, user_agent, tls } = *line;
            access.send(Record { when, remote, method, target, version, status: self.status, bytes: self.bytes, took, referer, user_agent, tls });
        }
    }
}
