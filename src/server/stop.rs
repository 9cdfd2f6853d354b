//! The way down: graceful stop, waiting for it, draining and closing the listeners, and
//! the drop that stops a server still running.

use super::{Phase, Running, Server};
use crate::error::{Error, ErrorKind, Result};
use crate::inside;
use parking_lot::Mutex;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant};

impl Server {
    /// Graceful stop: stop accepting, let in-flight requests finish, close idle
    /// connections, force-close the rest at `timeout`. Idempotent. From any of this
    /// server's own threads or callbacks (a handler, a log line, a release callback, a
    /// thread hook) it only starts the shutdown and returns (see `wait`).
    pub fn stop(self: &Arc<Self>, timeout: Duration) -> Result<()> {
        if inside::inside(self.id) {
            // Blocking here could wait for this very thread. A stop already under way
            // (this may be its own release callback) needs nothing more.
            if !matches!(*self.phase.lock(), Phase::Running(_) | Phase::Configuring { .. }) {
                return Ok(());
            }
            let me = self.clone();
            std::thread::Builder::new()
                .name("ember-stop".into())
                .spawn(move || me.stop_now(timeout))
                .map_err(|e| Error::new(ErrorKind::Runtime, format!("stop: cannot start the stop thread: {e}")))?;
            return Ok(());
        }
        self.stop_now(timeout);
        Ok(())
    }

    fn stop_now(&self, timeout: Duration) {
        let mut phase = self.phase.lock();
        match std::mem::replace(&mut *phase, Phase::Stopping) {
            Phase::Running(running) => {
                drop(phase);
                // Release and log callbacks run on this thread during the shutdown.
                let outcome = inside::within(self.id, || {
                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.shut_down(*running, timeout)))
                });
                *self.phase.lock() = Phase::Stopped;
                self.ports.lock().clear();
                self.stopped.notify_all();
                if let Err(panic) = outcome {
                    std::panic::resume_unwind(panic);
                }
            }
            Phase::Configuring { router, .. } => {
                *phase = Phase::Stopped;
                drop(phase);
                inside::within(self.id, || drop(router));
                self.stopped.notify_all();
            }
            Phase::Stopping => {
                while matches!(*phase, Phase::Stopping) {
                    self.stopped.wait(&mut phase);
                }
            }
            Phase::Stopped => *phase = Phase::Stopped,
        }
    }

    fn shut_down(&self, running: Running, timeout: Duration) {
        let Running { runtime, sysmon, mut pool, run, shutdown, .. } = running;
        let log = run.log.clone();
        let _ = shutdown.send(true);
        let deadline = Instant::now() + timeout;
        while self.counters.active_connections.load(Relaxed) > 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        let left = self.counters.active_connections.load(Relaxed);
        if left > 0 {
            log.info(&format!("stop: force-closing {left} connection(s) at the timeout"));
        }
        // Dropping the runtime drops every connection and waits for its worker threads,
        // so no inline callback is still running afterwards.
        // Until here handlers may still block an I/O thread and need the monitor.
        if let Some(m) = sysmon {
            m.stop();
        }
        drop_runtime(runtime);
        // Before the dispatcher goes: the close callbacks of what was force-closed run
        // on the pool (or here) while it still exists.
        crate::ws::purge_server(self.id);
        // Every answer has ended with the runtime: its access log lines are all queued.
        if let Some(observe) = &run.observe {
            observe.finish();
        }
        drop(run);
        if let Some(pool) = pool.as_mut() {
            pool.join();
        }
        crate::exchange::unregister_server(self.id);
        crate::registry::purge_server(self.id);
        log.info(&format!("server {} stopped", self.id));
    }

    /// Blocks until the server has stopped or `timeout` passes (None = forever).
    pub fn wait(&self, timeout: Option<Duration>) -> Result<()> {
        let deadline = timeout.map(|t| Instant::now() + t);
        let mut phase = self.phase.lock();
        loop {
            if matches!(*phase, Phase::Stopped) {
                return Ok(());
            }
            if inside::inside(self.id) {
                return Err(Error::new(
                    ErrorKind::State,
                    "wait: cannot wait for a server from one of its own threads or callbacks (handler, log, release, thread hook)",
                ));
            }
            match deadline {
                None => self.stopped.wait(&mut phase),
                Some(d) => {
                    if self.stopped.wait_until(&mut phase, d).timed_out() && !matches!(*phase, Phase::Stopped) {
                        return Err(Error::new(ErrorKind::TimedOut, "wait: the server is still running"));
                    }
                }
            }
        }
    }


    /// Starts draining: the health path answers 503 and HTTP/1 answers close their
    /// connections, while the server goes on serving until `stop`. Idempotent.
    pub fn drain(&self) -> Result<()> {
        match &*self.phase.lock() {
            Phase::Running(r) => {
                r.run.health.drain();
                Ok(())
            }
            _ => Err(Error::new(ErrorKind::State, "drain: the server is not running")),
        }
    }

    /// Drains (see `drain`) and closes the listeners: new connections are refused, those
    /// open are served (each answer closes it) until `stop`. Idempotent; while running.
    /// Returns once the listeners are closed (a new connection is then refused), except on
    /// the server's own threads, where waiting for the accept loops could wait for itself.
    pub fn stop_accepting(&self) -> Result<()> {
        let run = match &*self.phase.lock() {
            Phase::Running(r) => r.run.clone(),
            _ => return Err(Error::new(ErrorKind::State, "stop_accepting: the server is not running")),
        };
        run.health.stop_accepting();
        if !self.is_inside() && !run.health.wait_listeners_closed(Duration::from_secs(2)) {
            run.log.warn("stop_accepting: a listener was still open after 2 s");
        }
        Ok(())
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let phase = std::mem::replace(&mut *self.phase.lock(), Phase::Stopped);
        if let Phase::Running(running) = phase {
            self.shut_down(*running, Duration::ZERO);
        }
    }
}

/// tokio refuses to drop a runtime from inside another runtime's thread (an inline
/// handler of one server stopping another); do it from a plain thread then.
fn drop_runtime(runtime: tokio::runtime::Runtime) {
    if tokio::runtime::Handle::try_current().is_err() {
        drop(runtime);
        return;
    }
    let slot = Arc::new(Mutex::new(Some(runtime)));
    let theirs = slot.clone();
    match std::thread::Builder::new().name("ember-stop".into()).spawn(move || drop(theirs.lock().take())) {
        Ok(t) => drop(t.join()),
        // No thread to be had: let the workers wind down on their own.
        Err(_) => {
            if let Some(rt) = slot.lock().take() {
                rt.shutdown_background();
            }
        }
    }
}
