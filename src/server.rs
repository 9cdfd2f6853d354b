//! Server lifecycle: configure → start → stop → (free). Several servers may live in one
//! process; each owns its tokio runtime and callback pool.

use crate::config::{Config, Dispatch, Limits, Listen};
use crate::dispatch::{Dispatcher, Hooks, Pool};
use crate::engine::Run;
use crate::error::{Error, ErrorKind, Result};
use crate::handler::Handler;
use crate::inside;
use crate::listener;
use crate::log::Logger;
use crate::router::{Endpoint, Router};
use crate::stats::{Counters, Stats};
use http::Method;
use parking_lot::{Condvar, Mutex};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::Arc;
use tokio::sync::{watch, Semaphore};

// Stopping, draining and waiting: the lifecycle's second half, apart so that each file
// stays readable (it reaches into Server's private state, hence a child module).
mod stop;

static NEXT_ID: AtomicU64 = AtomicU64::new(1);

enum Phase {
    Configuring { config: Config, router: Router, hooks: Hooks },
    Running(Box<Running>),
    Stopping,
    Stopped,
}

struct Running {
    runtime: tokio::runtime::Runtime,
    sysmon: Option<crate::sysmon::Sysmon>,
    pool: Option<Pool>,
    run: Arc<Run>,
    shutdown: watch::Sender<bool>,
    /// Per listener, in listen order: its TLS state if it is a TLS listener.
    #[cfg_attr(not(feature = "tls"), allow(dead_code))]
    tls: Vec<Option<Arc<crate::tls::TlsSite>>>,
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

    pub(crate) fn configure<T>(&self, f: impl FnOnce(&mut Config, &mut Router, &mut Hooks) -> Result<T>) -> Result<T> {
        match &mut *self.phase.lock() {
            Phase::Configuring { config, router, hooks } => f(config, router, hooks),
            _ => Err(Error::new(ErrorKind::State, "the server was already started; options and routes are set before start")),
        }
    }

    pub fn listen(&self, address: &str) -> Result<()> {
        self.listen_with(address, false)
    }

    /// `reuse_port`: SO_REUSEPORT, so that several processes can listen on one port.
    pub fn listen_with(&self, address: &str, reuse_port: bool) -> Result<()> {
        self.listen_spec(address, reuse_port, false)
    }

    /// `proxy_protocol`: connections on this address start with a PROXY header (from a
    /// load balancer) that names the client.
    pub fn listen_spec(&self, address: &str, reuse_port: bool, proxy_protocol: bool) -> Result<()> {
        self.add_listener(address, reuse_port, proxy_protocol, None)
    }

    pub(crate) fn add_listener(&self, address: &str, reuse_port: bool, proxy_protocol: bool, tls: Option<Arc<crate::tls::TlsSite>>) -> Result<()> {
        let addr: SocketAddr = address.trim().parse().map_err(|_| {
            Error::new(ErrorKind::InvalidArg, format!("{address:?} is not an address like \"127.0.0.1:8080\" or \"[::1]:0\""))
        })?;
        self.configure(|c, _, _| Ok(c.listen.push(Listen { addr, reuse_port, proxy_protocol, tls })))
    }

    /// Per listener, in listen order, its TLS state: those configured, or those running.
    #[cfg_attr(not(feature = "tls"), allow(dead_code))]
    pub(crate) fn tls_sites(&self) -> Vec<Option<Arc<crate::tls::TlsSite>>> {
        match &*self.phase.lock() {
            Phase::Configuring { config, .. } => config.listen.iter().map(|l| l.tls.clone()).collect(),
            Phase::Running(r) => r.tls.clone(),
            _ => Vec::new(),
        }
    }

    /// The running server's access log and metrics (None when both are off).
    pub(crate) fn observer(&self) -> Result<Option<Arc<crate::observe::Observe>>> {
        match &*self.phase.lock() {
            Phase::Running(r) => Ok(r.run.observe.clone()),
            _ => Err(Error::new(ErrorKind::State, "the server is not running")),
        }
    }

    /// Believes PROXY headers and Forwarded / X-Forwarded-For / X-Forwarded-Proto from
    /// peers in `cidr` ("10.0.0.0/8", "127.0.0.1", "::1/128"). Before start.
    pub fn add_trusted_proxy(&self, cidr: &str) -> Result<()> {
        let cidr = cidr.trim();
        let net: ipnet::IpNet = cidr
            .parse()
            .or_else(|_| cidr.parse::<std::net::IpAddr>().map(ipnet::IpNet::from))
            .map_err(|_| Error::new(ErrorKind::InvalidArg, format!("{cidr:?} is not an address or network like \"10.0.0.0/8\"")))?;
        self.configure(|c, _, _| Ok(c.trusted_proxies.0.push(net)))
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
        self.route_to(method, pattern, Endpoint::handler(handler))
    }

    /// A route to any endpoint: a handler that reads its body in pieces, a WebSocket.
    pub fn route_to(&self, method: Option<Method>, pattern: &str, endpoint: Endpoint) -> Result<()> {
        #[cfg(not(feature = "ws"))]
        if let Endpoint::WebSocket(_) = endpoint {
            return Err(crate::ws::unsupported());
        }
        self.configure(|_, r, _| r.add(method, pattern, endpoint))
    }

    /// A WebSocket endpoint on `pattern` (GET upgrades). Its connections join the group
    /// named by the pattern.
    pub fn websocket(&self, pattern: &str, route: Arc<crate::ws::WsRoute>) -> Result<()> {
        self.route_to(Some(Method::GET), pattern, Endpoint::WebSocket(route.clone()))?;
        let _ = route.pattern.set(pattern.to_owned());
        Ok(())
    }

    /// Sends one message to every connection in `group` (a route pattern, or a name
    /// connections joined), except `except` (0 = none). The frame is encoded once.
    pub fn broadcast(&self, group: &str, kind: crate::ws::Kind, data: &[u8], except: u64) -> Result<crate::ws::Broadcast> {
        #[cfg(not(feature = "ws"))]
        {
            let _ = (group, kind, data, except);
            Err(crate::ws::unsupported())
        }
        #[cfg(feature = "ws")]
        {
            let hub = match &*self.phase.lock() {
                Phase::Running(r) => r.run.hub.clone(),
                _ => return Err(Error::new(ErrorKind::State, "broadcast: the server is not running")),
            };
            Ok(hub.broadcast(group, &crate::ws::encode(kind, data), except))
        }
    }

    pub fn stats(&self) -> Stats {
        self.counters.snapshot()
    }

    pub(crate) fn counters(&self) -> &Counters {
        &self.counters
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
        let Phase::Configuring { config, hooks, .. } = &*phase else {
            return Err(Error::new(ErrorKind::State, "start: the server was already started"));
        };
        if config.listen.is_empty() {
            return Err(Error::new(ErrorKind::State, "start: no listen address; call listen first"));
        }
        let (listeners, ports) = listener::bind_all(&config.listen)?;
        // Before the configuration is given up: a file that cannot be opened leaves the
        // server as it was, to be fixed and started again.
        let observe = crate::observe::Observe::start(config, &self.counters, &self.logger(), hooks, self.id)?;
        crate::signals::ignore_sigpipe_if_default();
        let Phase::Configuring { config, router, hooks } = std::mem::replace(&mut *phase, Phase::Stopped) else {
            unreachable!()
        };
        let running = self.launch(config, router, hooks, listeners, observe)?;
        let log = running.run.log.clone();
        *self.ports.lock() = ports;
        *phase = Phase::Running(Box::new(running));
        // Host callbacks never run under the phase lock: a log callback may call stop.
        drop(phase);
        inside::within(self.id, || log.info(&format!("server {} started", self.id)));
        Ok(())
    }

    fn launch(
        &self,
        config: Config,
        router: Router,
        hooks: Hooks,
        listeners: Vec<std::net::TcpListener>,
        observe: Option<Arc<crate::observe::Observe>>,
    ) -> Result<Running> {
        let log = self.logger();
        let runtime_error = |e: std::io::Error| Error::new(ErrorKind::Runtime, format!("start: cannot create threads: {e}"));
        let (start_hook, stop_hook) = (hooks.clone(), hooks.clone());
        let id = self.id;
        // Only inline dispatch forbids blocking waits on I/O threads: with auto dispatch a
        // spare I/O thread serves the others while one blocks.
        let strict = config.dispatch == Dispatch::Inline;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(config.runtime_threads())
            .thread_name("ember-io")
            .enable_all()
            .on_thread_start(move || {
                inside::mark_engine_thread(id);
                inside::mark_io_thread(strict);
                start_hook.start()
            })
            .on_thread_stop(move || stop_hook.stop())
            .build()
            .map_err(runtime_error)?;
        let limits = config.limits.clamped();
        let (pool, dispatcher) = match config.dispatch {
            Dispatch::Inline => (None, Dispatcher::inline(self.id, limits.stream_queue_bytes)),
            Dispatch::Pool | Dispatch::Auto => {
                let inline_budget = if config.dispatch == Dispatch::Auto { config.worker_threads() } else { 0 };
                let (pool, dispatcher) =
                    Pool::start(
                    config.pool_size(),
                    limits.max_queued,
                    limits.stream_queue_bytes,
                    inline_budget,
                    limits.handler_timeout,
                    self.id,
                    hooks,
                    log.clone(),
                )
                        .map_err(runtime_error)?;
                (Some(pool), dispatcher)
            }
        };
        let (shutdown, shutdown_rx) = watch::channel(false);
        crate::exchange::register_server(&dispatcher);
        let mut run = Run::new(
            self.id,
            router,
            limits.clone(),
            dispatcher,
            self.counters.clone(),
            log.clone(),
            shutdown_rx.clone(),
            config.health_path.clone(),
            config.trusted_proxies.clone(),
        );
        run.observe = observe;
        run.front = crate::front::Front::build(&config.front);
        let run = Arc::new(run);
        let slots = Arc::new(Semaphore::new(limits.max_connections.max(1)));
        runtime.spawn(crate::trim::watch(self.counters.clone(), shutdown_rx.clone()));
        for (std_listener, spec) in listeners.into_iter().zip(&config.listen) {
            let _enter = runtime.enter();
            let listener = tokio::net::TcpListener::from_std(std_listener).map_err(runtime_error)?;
            run.health.listener_opened();
            let accept = listener::accept_loop(listener, spec.proxy_protocol, run.clone(), shutdown_rx.clone(), slots.clone(), spec.tls.clone());
            runtime.spawn(accept);
        }
        let tls = config.listen.iter().map(|l| l.tls.clone()).collect();
        let sysmon = match run.dispatcher.inline_slots() {
            Some(slots) => Some(crate::sysmon::Sysmon::start(slots, runtime.handle().clone()).map_err(runtime_error)?),
            None => None,
        };
        Ok(Running { runtime, sysmon, pool, run, shutdown, tls })
    }

    /// A path the engine answers itself (GET/HEAD): 200 `{"status": "ok"}`, or 503 while
    /// draining. Before start.
    pub fn set_health_path(&self, path: &str) -> Result<()> {
        if !path.starts_with('/') {
            return Err(Error::new(ErrorKind::InvalidArg, format!("health path {path:?} must start with '/'")));
        }
        self.configure(|c, _, _| Ok(c.health_path = Some(path.to_owned())))
    }

    /// What the running server's connections share (None unless running).
    pub(crate) fn running_run(&self) -> Option<Arc<Run>> {
        match &*self.phase.lock() {
            Phase::Running(r) => Some(r.run.clone()),
            _ => None,
        }
    }

    pub fn is_running(&self) -> bool {
        matches!(*self.phase.lock(), Phase::Running(_))
    }

    /// True on this server's own threads and inside its callbacks, where blocking on it
    /// (wait, free) could wait for the very thread asking.
    pub fn is_inside(&self) -> bool {
        inside::inside(self.id)
    }
}
