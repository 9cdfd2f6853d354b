//! Server lifecycle: configure → start → stop → (free). Several servers may live in one
//! process; each owns its tokio runtime and callback pool.

use crate::config::{Config, Dispatch, Limits};
use crate::conn;
use crate::dispatch::{Hooks, Job, Pool};
use crate::error::{Error, ErrorKind, Result};
use crate::handler::{self, Handler};
use crate::log::Logger;
use crate::router::Router;
use crate::stats::{Counters, Stats};
use http::Method;
use parking_lot::{Condvar, Mutex};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{watch, Semaphore};

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

/// Where a request's callback runs.
pub(crate) enum Target {
    Inline,
    Pool(crossbeam_channel::Sender<Job>),
}

/// What every connection of one started server shares. Dropping the last one drops
/// the router, which runs each registration's release callback.
pub(crate) struct Run {
    pub server_id: u64,
    pub router: Router,
    pub limits: Limits,
    pub target: Target,
    pub counters: Arc<Counters>,
    pub log: Logger,
    pub http1: hyper::server::conn::http1::Builder,
    #[cfg(feature = "http2")]
    pub http2: hyper::server::conn::http2::Builder<hyper_util::rt::TokioExecutor>,
}

enum Phase {
    Configuring { config: Config, router: Router, hooks: Hooks },
    Running(Box<Running>),
    Stopping,
    Stopped,
}

struct Running {
    runtime: tokio::runtime::Runtime,
    pool: Option<Pool>,
    run: Arc<Run>,
    shutdown: watch::Sender<bool>,
}

/// An HTTP server. All methods take `&self` and are safe to call from any thread.
pub struct Server {
    id: u64,
    phase: Mutex<Phase>,
    stopped: Condvar,
    ports: Mutex<Vec<u16>>,
    counters: Arc<Counters>,
    log: Mutex<Logger>,
}

impl Default for Server {
    fn default() -> Self {
        Self::new()
    }
}

impl Server {
    pub fn new() -> Server {
        Server {
            id: NEXT_ID.fetch_add(1, Relaxed),
            phase: Mutex::new(Phase::Configuring { config: Config::default(), router: Router::new(), hooks: Hooks::default() }),
            stopped: Condvar::new(),
            ports: Mutex::new(Vec::new()),
            counters: Arc::new(Counters::default()),
            log: Mutex::new(Logger::default()),
        }
    }

    fn configure<T>(&self, f: impl FnOnce(&mut Config, &mut Router, &mut Hooks) -> Result<T>) -> Result<T> {
        match &mut *self.phase.lock() {
            Phase::Configuring { config, router, hooks } => f(config, router, hooks),
            _ => Err(Error::new(ErrorKind::State, "the server was already started; options and routes are set before start")),
        }
    }

    pub fn listen(&self, address: &str) -> Result<()> {
        let addr: SocketAddr = address.trim().parse().map_err(|_| {
            Error::new(ErrorKind::InvalidArg, format!("{address:?} is not an address like \"127.0.0.1:8080\" or \"[::1]:0\""))
        })?;
        self.configure(|c, _, _| Ok(c.listen.push(addr)))
    }

    pub fn set_workers(&self, workers: usize) -> Result<()> {
        self.configure(|c, _, _| Ok(c.workers = workers))
    }

    pub fn set_dispatch(&self, dispatch: Dispatch) -> Result<()> {
        self.configure(|c, _, _| Ok(c.dispatch = dispatch))
    }

    pub fn set_pool_threads(&self, threads: usize) -> Result<()> {
        self.configure(|c, _, _| Ok(c.pool_threads = threads))
    }

    pub fn set_limits(&self, f: impl FnOnce(&mut Limits) -> Result<()>) -> Result<()> {
        self.configure(|c, _, _| f(&mut c.limits))
    }

    pub fn set_hooks(&self, hooks: Hooks) -> Result<()> {
        self.configure(|_, _, h| Ok(*h = hooks))
    }

    pub fn set_logger(&self, logger: Logger) -> Result<()> {
        self.configure(|_, _, _| Ok(()))?;
        *self.log.lock() = logger;
        Ok(())
    }

    pub fn logger(&self) -> Logger {
        self.log.lock().clone()
    }

    /// `method` None = any method.
    pub fn route(&self, method: Option<Method>, pattern: &str, handler: Handler) -> Result<()> {
        self.configure(|_, r, _| r.add(method, pattern, handler))
    }

    pub fn stats(&self) -> Stats {
        self.counters.snapshot()
    }

    /// The bound port of the `index`-th listen address (after start).
    pub fn port(&self, index: usize) -> Result<u16> {
        let ports = self.ports.lock();
        if ports.is_empty() {
            return Err(Error::new(ErrorKind::State, "the server is not running, so it has no ports"));
        }
        ports.get(index).copied().ok_or_else(|| {
            Error::new(ErrorKind::InvalidArg, format!("listener index {index} is out of range (the server has {})", ports.len()))
        })
    }

    /// Binds every address and starts serving; returns once listening.
    pub fn start(&self) -> Result<()> {
        let mut phase = self.phase.lock();
        let Phase::Configuring { config, .. } = &*phase else {
            return Err(Error::new(ErrorKind::State, "start: the server was already started"));
        };
        if config.listen.is_empty() {
            return Err(Error::new(ErrorKind::State, "start: no listen address; call listen first"));
        }
        let (listeners, ports) = bind_all(&config.listen)?;
        crate::signals::ignore_sigpipe_if_default();
        let Phase::Configuring { config, router, hooks } = std::mem::replace(&mut *phase, Phase::Stopped) else {
            unreachable!()
        };
        match self.launch(config, router, hooks, listeners) {
            Ok(running) => {
                *self.ports.lock() = ports;
                *phase = Phase::Running(Box::new(running));
                Ok(())
            }
            Err(e) => Err(e),
        }
    }

    fn launch(&self, config: Config, router: Router, hooks: Hooks, listeners: Vec<std::net::TcpListener>) -> Result<Running> {
        let log = self.logger();
        let runtime_error = |e: std::io::Error| Error::new(ErrorKind::Runtime, format!("start: cannot create threads: {e}"));
        let (start_hook, stop_hook) = (hooks.clone(), hooks.clone());
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(config.worker_threads())
            .thread_name("ember-io")
            .enable_all()
            .on_thread_start(move || start_hook.start())
            .on_thread_stop(move || stop_hook.stop())
            .build()
            .map_err(runtime_error)?;
        let (pool, target) = match config.dispatch {
            Dispatch::Inline => (None, Target::Inline),
            Dispatch::Pool => {
                let (pool, tx) = Pool::start(config.pool_size(), self.id, hooks, log.clone()).map_err(runtime_error)?;
                (Some(pool), Target::Pool(tx))
            }
        };
        let limits = config.limits.clone();
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
            let mut http2 = conn::http2_builder();
            http2.max_header_list_size(limits.max_header_bytes as u32);
            http2
        };
        let run = Arc::new(Run {
            server_id: self.id,
            router,
            limits: limits.clone(),
            target,
            counters: self.counters.clone(),
            log: log.clone(),
            http1,
            #[cfg(feature = "http2")]
            http2,
        });
        let (shutdown, shutdown_rx) = watch::channel(false);
        let slots = Arc::new(Semaphore::new(limits.max_connections.max(1)));
        for std_listener in listeners {
            let _enter = runtime.enter();
            let listener = tokio::net::TcpListener::from_std(std_listener).map_err(runtime_error)?;
            runtime.spawn(accept_loop(listener, run.clone(), shutdown_rx.clone(), slots.clone()));
        }
        log.info(&format!("server {} started", self.id));
        Ok(Running { runtime, pool, run, shutdown })
    }

    /// Graceful stop: stop accepting, let in-flight requests finish, close idle
    /// connections, force-close the rest at `timeout`. Idempotent. From inside one of
    /// this server's handlers it only starts the shutdown (see `wait`).
    pub fn stop(self: &Arc<Self>, timeout: Duration) -> Result<()> {
        if handler::in_handler_of(self.id) {
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
                let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.shut_down(*running, timeout)));
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
                drop(router);
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
        let Running { runtime, mut pool, run, shutdown } = running;
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
        drop_runtime(runtime);
        drop(run);
        if let Some(pool) = pool.as_mut() {
            pool.join();
        }
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
            if handler::in_handler_of(self.id) {
                return Err(Error::new(ErrorKind::State, "wait: cannot wait for a server from inside its own handler"));
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

    pub fn is_running(&self) -> bool {
        matches!(*self.phase.lock(), Phase::Running(_))
    }

    pub(crate) fn id(&self) -> u64 {
        self.id
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

fn bind_all(addrs: &[SocketAddr]) -> Result<(Vec<std::net::TcpListener>, Vec<u16>)> {
    let mut listeners = Vec::new();
    let mut ports = Vec::new();
    for addr in addrs {
        let l = bind(*addr).map_err(|e| Error::new(ErrorKind::Bind, format!("cannot listen on {addr}: {e}")))?;
        ports.push(l.local_addr().map(|a| a.port()).unwrap_or(0));
        listeners.push(l);
    }
    Ok((listeners, ports))
}

fn bind(addr: SocketAddr) -> std::io::Result<std::net::TcpListener> {
    use socket2::{Domain, Protocol, Socket, Type};
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    // On Windows SO_REUSEADDR lets a second socket take over a port already listened on;
    // its default (no reuse) is what unix gets from SO_REUSEADDR here.
    #[cfg(unix)]
    socket.set_reuse_address(true)?;
    if addr.is_ipv6() {
        socket.set_only_v6(true)?;
    }
    socket.set_nonblocking(true)?;
    socket.bind(&addr.into())?;
    socket.listen(1024)?;
    Ok(socket.into())
}

async fn accept_loop(listener: tokio::net::TcpListener, run: Arc<Run>, mut shutdown: watch::Receiver<bool>, slots: Arc<Semaphore>) {
    loop {
        let permit = tokio::select! {
            p = slots.clone().acquire_owned() => match p { Ok(p) => p, Err(_) => return },
            _ = shutdown.changed() => return,
        };
        let accepted = tokio::select! {
            r = listener.accept() => r,
            _ = shutdown.changed() => return,
        };
        match accepted {
            Ok((stream, remote)) => {
                let _ = stream.set_nodelay(true);
                let (run, shutdown) = (run.clone(), shutdown.clone());
                run.counters.total_connections.fetch_add(1, Relaxed);
                run.counters.active_connections.fetch_add(1, Relaxed);
                tokio::spawn(async move {
                    let _open = OpenConnection(run.clone(), permit);
                    conn::serve(stream, remote, run, shutdown).await;
                });
            }
            Err(e) => {
                // Out of file descriptors and the like: back off instead of spinning.
                run.log.warn(&format!("accept failed: {e}"));
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

/// Holds a connection slot (the permit) and the open-connection count while alive.
struct OpenConnection(Arc<Run>, #[allow(dead_code)] tokio::sync::OwnedSemaphorePermit);

impl Drop for OpenConnection {
    fn drop(&mut self) {
        self.0.counters.active_connections.fetch_sub(1, Relaxed);
    }
}
