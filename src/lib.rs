//! Ember: an in-process HTTP engine. The Rust API lives here; the C ABI in `ffi`.

pub mod config;
mod conn;
mod dispatch;
pub mod error;
pub mod ffi;
pub mod handler;
pub mod log;
mod registry;
pub mod request;
pub mod response;
pub mod router;
pub mod server;
mod service;
mod signals;
pub mod stats;

pub use config::{Dispatch, Limits};
pub use dispatch::Hooks;
pub use error::{Error, ErrorKind, Result};
pub use handler::{respond, Handler, Request};
pub use server::Server;
pub use stats::Stats;

/// The crate version, also returned by `ember_version()`.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
