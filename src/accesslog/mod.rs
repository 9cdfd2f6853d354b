//! The access log: one line per answered request, in the Combined Log Format or as JSON
//! lines, to a file or to the host's log callback. The I/O threads only hand a record to
//! a bounded queue; a writer thread formats and writes, buffered, flushing whenever the
//! queue runs empty. When the writer falls behind, records are dropped and counted
//! rather than making requests wait. A reopen (for logrotate) is handled in order with
//! the lines, so every line before it goes to the old file and every line after it to
//! the new one.

use crate::dispatch::Hooks;
use crate::error::{Error, ErrorKind, Result};
use crate::log::Logger;
use crate::queue::{bounded, Receiver, RecvTimeoutError, Sender};
use http::{HeaderValue, Method, Version};
use parking_lot::Mutex;
use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant, SystemTime};

mod format;

/// Records waiting for the writer at most; more are dropped (and counted).
const QUEUE: usize = 16 * 1024;
/// A buffered line is written out at the latest after this long.
const FLUSH_EVERY: Duration = Duration::from_millis(500);
const WARN_EVERY: Duration = Duration::from_secs(10);
const REOPEN_WAIT: Duration = Duration::from_secs(10);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AccessFormat {
    /// Apache's Combined Log Format (`%h %l %u %t "%r" %>s %b "%{Referer}i" "%{User-agent}i"`), times in UTC.
    Combined,
    /// One JSON object per line.
    Json,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AccessTarget {
    /// Appended to this file (created if missing).
    File(PathBuf),
    /// Each line goes to the server's log callback with the level `Access`, whatever
    /// level the callback was set up with (stderr when there is no callback).
    Log,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccessLogConfig {
    pub format: AccessFormat,
    pub target: AccessTarget,
}

/// What one line says about one request.
pub(crate) struct Record {
    pub when: SystemTime,
    pub remote: String,
    pub method: Method,
    /// The request target as sent: path and query.
    pub target: String,
    pub version: Version,
    pub status: u16,
    pub bytes: u64,
    pub took: Duration,
    pub referer: Option<HeaderValue>,
    pub user_agent: Option<HeaderValue>,
    pub tls: bool,
}

enum Msg {
    Line(Box<Record>),
    Reopen(Sender<Result<()>>),
    Close,
}

pub(crate) struct AccessLog {
    tx: Sender<Msg>,
    dropped: Arc<AtomicU64>,
    thread: Mutex<Option<JoinHandle<()>>>,
    is_file: bool,
}

impl AccessLog {
    /// Opens the file (an error names it) and starts the writer thread.
    pub fn start(config: &AccessLogConfig, log: Logger, hooks: Hooks, server_id: u64) -> Result<AccessLog> {
        let sink = match &config.target {
            AccessTarget::File(path) => Sink::File { file: open(path)?, path: path.clone() },
            AccessTarget::Log => Sink::Log,
        };
        let (tx, rx) = bounded(QUEUE);
        let dropped = Arc::new(AtomicU64::new(0));
        let writer = Writer { rx, sink, format: config.format, log, dropped: dropped.clone() };
        let host_code = matches!(config.target, AccessTarget::Log);
        let thread = std::thread::Builder::new()
            .name("ember-access".into())
            .spawn(move || {
                crate::inside::mark_engine_thread(server_id);
                // Only this thread calls the host's log callback with access lines: it
                // gets the thread hooks as the pool threads do.
                if host_code {
                    hooks.start();
                }
                writer.run();
                if host_code {
                    hooks.stop();
                }
            })
            .map_err(|e| Error::new(ErrorKind::Runtime, format!("start: cannot start the access log thread: {e}")))?;
        Ok(AccessLog { tx, dropped, thread: Mutex::new(Some(thread)), is_file: !host_code })
    }

    /// Hands a record to the writer; never blocks.
    pub fn send(&self, record: Record) {
        if self.tx.try_send(Msg::Line(Box::new(record))).is_err() {
            self.dropped.fetch_add(1, Relaxed);
        }
    }

    pub fn dropped(&self) -> u64 {
        self.dropped.load(Relaxed)
    }

    /// Closes the file and opens it again by its path, after every line sent before.
    pub fn reopen(&self) -> Result<()> {
        if !self.is_file {
            return Ok(());
        }
        let (reply, answer) = bounded(1);
        let gone = || Error::new(ErrorKind::State, "reopen: the access log has stopped");
        self.tx.send_timeout(Msg::Reopen(reply), REOPEN_WAIT).map_err(|_| gone())?;
        match answer.recv_timeout(REOPEN_WAIT) {
            Ok(result) => result,
            Err(RecvTimeoutError::Timeout) => Err(Error::new(ErrorKind::TimedOut, "reopen: the access log writer did not answer within 10 s")),
            Err(RecvTimeoutError::Disconnected) => Err(gone()),
        }
    }

    /// Writes out every line sent so far and ends the writer thread. Idempotent.
    pub fn finish(&self) {
        let Some(thread) = self.thread.lock().take() else { return };
        // Blocking is fine: the writer empties the queue, and stop runs on a host thread.
        let _ = self.tx.send(Msg::Close);
        let _ = thread.join();
    }
}

impl Drop for AccessLog {
    fn drop(&mut self) {
        self.finish();
    }
}

fn open(path: &PathBuf) -> Result<BufWriter<File>> {
    OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .map(|f| BufWriter::with_capacity(64 * 1024, f))
        .map_err(|e| Error::new(ErrorKind::InvalidArg, format!("cannot open the access log file {}: {e}", path.display())))
}

enum Sink {
    File { file: BufWriter<File>, path: PathBuf },
    Log,
}

struct Writer {
    rx: Receiver<Msg>,
    sink: Sink,
    format: AccessFormat,
    log: Logger,
    dropped: Arc<AtomicU64>,
}

impl Writer {
    fn run(mut self) {
        let mut line = String::with_capacity(512);
        let mut reported = 0;
        let mut last_warn: Option<Instant> = None;
        loop {
            let msg = match self.rx.recv_timeout(FLUSH_EVERY) {
                Ok(m) => m,
                Err(RecvTimeoutError::Timeout) => {
                    self.flush();
                    continue;
                }
                Err(RecvTimeoutError::Disconnected) => break,
            };
            match msg {
                Msg::Line(record) => {
                    line.clear();
                    format::line(&mut line, &record, self.format);
                    self.write(&line);
                }
                Msg::Reopen(reply) => {
                    let _ = reply.send(self.reopen());
                }
                Msg::Close => break,
            }
            if self.rx.is_empty() {
                self.flush();
                let dropped = self.dropped.load(Relaxed);
                if dropped != reported && last_warn.is_none_or(|t| t.elapsed() >= WARN_EVERY) {
                    self.log.warn(&format!("access log: {} line(s) dropped because writing fell behind", dropped - reported));
                    reported = dropped;
                    last_warn = Some(Instant::now());
                }
            }
        }
        self.flush();
    }

    fn write(&mut self, line: &str) {
        match &mut self.sink {
            Sink::File { file, .. } => {
                let _ = file.write_all(line.as_bytes());
                let _ = file.write_all(b"\n");
            }
            Sink::Log => self.log.access(line),
        }
    }

    fn flush(&mut self) {
        if let Sink::File { file, path } = &mut self.sink {
            if let Err(e) = file.flush() {
                self.log.error(&format!("access log: cannot write {}: {e}", path.display()));
            }
        }
    }

    /// On failure the old file stays in use, so no line is lost.
    fn reopen(&mut self) -> Result<()> {
        self.flush();
        if let Sink::File { file, path } = &mut self.sink {
            *file = open(path)?;
        }
        Ok(())
    }
}
