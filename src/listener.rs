//! Binding listen sockets and the accept loop. An accept that fails for want of
//! resources (out of file descriptors) backs off instead of spinning, gives up at once
//! when the server stops, and logs at most one line in a while.

use crate::config::Listen;
use crate::conn;
use crate::engine::Run;
use crate::error::{Error, ErrorKind, Result};
use std::io;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::{watch, Semaphore};

pub(crate) fn bind_all(specs: &[Listen]) -> Result<(Vec<std::net::TcpListener>, Vec<u16>)> {
    let mut listeners = Vec::new();
    let mut ports = Vec::new();
    for spec in specs {
        let l = bind(spec).map_err(|e| Error::new(ErrorKind::Bind, format!("cannot listen on {}: {e}", spec.addr)))?;
        ports.push(l.local_addr().map(|a| a.port()).unwrap_or(0));
        listeners.push(l);
    }
    Ok((listeners, ports))
}

fn bind(spec: &Listen) -> io::Result<std::net::TcpListener> {
    use socket2::{Domain, Protocol, Socket, Type};
    let addr = spec.addr;
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    // On Windows SO_REUSEADDR lets a second socket take over a port already listened on;
    // its default (no reuse) is what unix gets from SO_REUSEADDR here.
    #[cfg(unix)]
    socket.set_reuse_address(true)?;
    if spec.reuse_port {
        reuse_port(&socket)?;
    }
    if addr.is_ipv6() {
        socket.set_only_v6(true)?;
    }
    socket.set_nonblocking(true)?;
    socket.bind(&addr.into())?;
    socket.listen(1024)?;
    Ok(socket.into())
}

#[cfg(all(unix, not(any(target_os = "solaris", target_os = "illumos"))))]
fn reuse_port(socket: &socket2::Socket) -> io::Result<()> {
    socket.set_reuse_port(true)
}

#[cfg(not(all(unix, not(any(target_os = "solaris", target_os = "illumos")))))]
fn reuse_port(_socket: &socket2::Socket) -> io::Result<()> {
    Err(io::Error::new(io::ErrorKind::Unsupported, "SO_REUSEPORT is not available on this system"))
}

/// Errors that concern one connection only (it died in the backlog): accept the next.
fn per_connection(e: &io::Error) -> bool {
    if matches!(e.kind(), io::ErrorKind::ConnectionAborted | io::ErrorKind::ConnectionReset | io::ErrorKind::Interrupted) {
        return true;
    }
    // accept(2): Linux passes on pending network errors of the new socket; retry as for EAGAIN.
    #[cfg(unix)]
    if let Some(code) = e.raw_os_error() {
        return [libc::EPROTO, libc::ENOPROTOOPT, libc::EHOSTDOWN, libc::EHOSTUNREACH, libc::EOPNOTSUPP, libc::ENETUNREACH]
            .contains(&code);
    }
    false
}

const BACKOFF_MIN: Duration = Duration::from_millis(5);
const BACKOFF_MAX: Duration = Duration::from_secs(1);
const LOG_EVERY: Duration = Duration::from_secs(10);

/// `tls`: the listener's TLS state, for a TLS listener.
pub(crate) async fn accept_loop(
    listener: tokio::net::TcpListener,
    proxy_protocol: bool,
    run: Arc<Run>,
    mut shutdown: watch::Receiver<bool>,
    slots: Arc<Semaphore>,
    tls: Option<Arc<crate::tls::TlsSite>>,
) {
    // Counted closed when this returns: the listener is dropped by then (in `take_queued`,
    // or with the other arguments on an early return).
    let _open = ListenerOpen(run.clone());
    let mut refuse = run.health.refusing();
    let mut backoff = BACKOFF_MIN;
    let mut failures: u64 = 0;
    let mut last_log: Option<Instant> = None;
    loop {
        if *refuse.borrow() || *shutdown.borrow() {
            break;
        }
        let permit = tokio::select! {
            p = slots.clone().acquire_owned() => match p { Ok(p) => p, Err(_) => return },
            _ = shutdown.changed() => break,
            _ = refuse.changed() => break,
        };
        let accepted = tokio::select! {
            r = listener.accept() => r,
            _ = shutdown.changed() => break,
            _ = refuse.changed() => break,
        };
        match accepted {
            Ok((stream, remote)) => {
                backoff = BACKOFF_MIN;
                if failures > 0 {
                    run.log.info(&format!("accepting again after {failures} failed accept(s)"));
                    failures = 0;
                    last_log = None;
                }
                spawn_conn(stream, remote, permit, proxy_protocol, &run, &shutdown, &tls);
            }
            Err(e) if per_connection(&e) => continue,
            Err(e) => {
                drop(permit);
                failures += 1;
                if last_log.is_none_or(|t| t.elapsed() >= LOG_EVERY) {
                    run.log.warn(&format!("accept failed ({failures} so far): {e}; backing off {} ms", backoff.as_millis()));
                    last_log = Some(Instant::now());
                }
                tokio::select! {
                    _ = tokio::time::sleep(backoff) => {}
                    _ = shutdown.changed() => break,
                    _ = refuse.changed() => break,
                }
                backoff = (backoff * 2).min(BACKOFF_MAX);
            }
        }
    }
    take_queued(listener, proxy_protocol, &run, &shutdown, &slots, &tls);
}

struct ListenerOpen(Arc<Run>);

impl Drop for ListenerOpen {
    fn drop(&mut self) {
        self.0.health.listener_closed();
    }
}

/// Closing a listening socket resets the connections the kernel completed but nobody
/// accepted yet, after their clients may have sent a request: a proxy cannot retry a POST
/// it already sent. So before the listener closes (stop, or stop-accepting), what is queued
/// is accepted and served like any other connection (graceful: one answer, then close).
/// The window left is the few microseconds between the last accept and the close.
fn take_queued(
    listener: tokio::net::TcpListener,
    proxy_protocol: bool,
    run: &Arc<Run>,
    shutdown: &watch::Receiver<bool>,
    slots: &Arc<Semaphore>,
    tls: &Option<Arc<crate::tls::TlsSite>>,
) {
    // The std listener accepts without waiting for the reactor's readiness event, which
    // may not have arrived for a connection the kernel already queued.
    let Ok(std_listener) = listener.into_std() else { return };
    loop {
        match std_listener.accept() {
            Ok((std_stream, remote)) => {
                let Ok(permit) = slots.clone().try_acquire_owned() else { return };
                if std_stream.set_nonblocking(true).is_err() {
                    continue;
                }
                let Ok(stream) = tokio::net::TcpStream::from_std(std_stream) else { continue };
                spawn_conn(stream, remote, permit, proxy_protocol, run, shutdown, tls);
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted || per_connection(&e) => continue,
            Err(_) => return, // WouldBlock: the queue is empty (or accept failed): close now
        }
    }
}

fn spawn_conn(
    stream: tokio::net::TcpStream,
    remote: std::net::SocketAddr,
    permit: tokio::sync::OwnedSemaphorePermit,
    proxy_protocol: bool,
    run: &Arc<Run>,
    shutdown: &watch::Receiver<bool>,
    tls: &Option<Arc<crate::tls::TlsSite>>,
) {
    let _ = stream.set_nodelay(true);
    let (run, shutdown, tls) = (run.clone(), shutdown.clone(), tls.clone());
    run.counters.total_connections.fetch_add(1, Relaxed);
    let open = run.counters.active_connections.fetch_add(1, Relaxed) + 1;
    run.counters.peak_connections.fetch_max(open, Relaxed);
    tokio::spawn(async move {
        let open = Box::new(OpenConnection(run.counters.clone(), permit));
        conn::serve(stream, remote, proxy_protocol, run, shutdown, open, tls).await;
    });
}

/// Holds a connection slot (the permit) and the open-connection count while alive.
/// Holds the counters, not the server's `Run`: a connection kept by a WebSocket task must
/// not keep the server's dispatcher alive.
struct OpenConnection(Arc<crate::stats::Counters>, #[allow(dead_code)] tokio::sync::OwnedSemaphorePermit);

impl Drop for OpenConnection {
    fn drop(&mut self) {
        self.0.active_connections.fetch_sub(1, Relaxed);
    }
}
