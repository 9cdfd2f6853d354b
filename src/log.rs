//! Leveled logging to a host callback (stderr for warnings and errors until one is set).

use std::sync::Arc;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    Error = 1,
    Warn = 2,
    Info = 3,
    Debug = 4,
    /// An access log line (when the access log goes to the log callback). Never a
    /// threshold: these lines reach the callback whatever level it was set up with.
    Access = 5,
}

pub type LogSink = Arc<dyn Fn(Level, &str) + Send + Sync>;

#[derive(Clone)]
pub struct Logger {
    sink: Option<LogSink>,
    max: Level,
}

impl Default for Logger {
    fn default() -> Self {
        Logger { sink: None, max: Level::Warn }
    }
}

impl Logger {
    pub fn new(sink: Option<LogSink>, max: Level) -> Self {
        Logger { sink, max }
    }

    pub fn enabled(&self, level: Level) -> bool {
        level <= self.max
    }

    pub fn log(&self, level: Level, msg: &str) {
        if !self.enabled(level) {
            return;
        }
        match &self.sink {
            // A panicking host logger must not take the engine thread down with it.
            Some(sink) => drop(std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| sink(level, msg)))),
            None => eprintln!("ember [{level:?}] {msg}"),
        }
    }

    /// An access log line: to the callback whatever its level, else to stderr.
    pub(crate) fn access(&self, line: &str) {
        match &self.sink {
            Some(sink) => drop(std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| sink(Level::Access, line)))),
            None => eprintln!("{line}"),
        }
    }

    pub fn error(&self, msg: &str) {
        self.log(Level::Error, msg)
    }

    pub fn warn(&self, msg: &str) {
        self.log(Level::Warn, msg)
    }

    pub fn info(&self, msg: &str) {
        self.log(Level::Info, msg)
    }

    pub fn debug(&self, msg: &str) {
        self.log(Level::Debug, msg)
    }
}
