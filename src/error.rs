//! Error kinds shared by the engine and the C surface. Their numbers are the ABI's
//! business and live in one place only: `ffi/constants.rs`.

use std::fmt;

/// Why an engine operation failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorKind {
    Null,
    InvalidArg,
    State,
    Bind,
    Route,
    AlreadyAnswered,
    TimedOut,
    ClientGone,
    InvalidHandle,
    NotFound,
    BufferTooSmall,
    Panic,
    Runtime,
    /// A queue is full (a write) or empty (a read): nothing was taken or given; an event
    /// says when to try again.
    WouldBlock,
    /// A streamed request body passed the body limit; the engine answered 413.
    TooLarge,
    /// The library was built without the cargo feature this needs (`Error::unsupported`).
    Unsupported,
}

/// An error kind with a message written for the person reading the log.
#[derive(Debug, Clone)]
pub struct Error {
    pub kind: ErrorKind,
    pub message: String,
}

impl Error {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Error { kind, message: message.into() }
    }
}

impl Error {
    /// What a function of a feature left out of this build says (the minimal library
    /// has no `ws`, `static`, `tls`, `http2` …): the C function exists in every build, so
    /// the header is one header, and fails with this.
    pub fn unsupported(feature: &str, what: &str) -> Self {
        Error::new(ErrorKind::Unsupported, format!("this library was built without the `{feature}` feature ({what}); rebuild with `--features {feature}`"))
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Error {}

pub type Result<T> = std::result::Result<T, Error>;

/// The text a panic carried, for the log line or error message that reports it.
pub(crate) fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| panic.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into())
}
