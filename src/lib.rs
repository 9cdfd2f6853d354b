//! Ember: an in-process HTTP engine. The Rust API lives here; the C ABI in `ffi`.

//!
//! The request path runs one way: `server` (lifecycle) → `listener` (accept) → `conn`
//! (protocol detection, hyper, watchdog) → `service` (one request) → `body`, `router`,
//! `registry`, `dispatch`, `reply`. `engine` and `connstate` hold what those share.

pub mod accesslog;
mod body;
pub mod cache;
pub mod compress;
pub mod cors;
// Static files (cargo feature `static`). Without it no answer is a file; `file_body_off`
// keeps the answer's shape with a type nothing can build.
#[cfg(feature = "static")]
mod file_body;
#[cfg(not(feature = "static"))]
#[path = "file_body_off.rs"]
mod file_body;
#[cfg(feature = "static")]
mod mime_types;
pub mod filter;
pub mod front;
// The front's configuration calls on Server (front.rs is the per-request part).
mod front_config;
#[cfg(feature = "static")]
pub mod static_files;
#[cfg(feature = "static")]
mod static_cache;
#[cfg(feature = "static")]
mod static_serve;
#[cfg(feature = "static")]
mod static_http;
pub mod config;
mod conn;
mod connstate;
mod dispatch;
mod engine;
pub mod exchange;
pub mod error;
pub mod ffi;
pub mod handler;
#[cfg(feature = "ws")]
mod handles;
mod health;
pub mod proxy;
mod inbox;
mod inside;
mod listener;
pub mod log;
mod metrics;
mod observe;
mod queue;
pub mod prepared;
mod registry;
mod reply;
pub mod request;
pub mod response;
pub mod router;
pub mod server;
mod service;
mod signals;
pub mod stats;
mod stream;
mod sysmon;
mod trim;
pub mod streaming;
pub mod tls;
pub mod ws;

pub use config::{Dispatch, Limits};
pub use dispatch::Hooks;
pub use error::{Error, ErrorKind, Result};
pub use handler::{respond, Handler, Request};
pub use server::Server;
pub use exchange::{Event, EventSink};
pub use stats::Stats;
pub use tls::TlsConfig;
pub use accesslog::{AccessFormat, AccessLogConfig, AccessTarget};

/// The crate version, also returned by `ember_version()`.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
