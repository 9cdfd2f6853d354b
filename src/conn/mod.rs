//! One accepted connection: protocol detection, hyper, and a watchdog that closes the
//! gaps plain hyper leaves (a silent client held forever, no 408 on a slow header, no
//! idle keep-alive timeout, a peer that never reads its answer).

mod io;
mod rawsock;
mod signals;
mod sniff;
pub(crate) mod stream;
mod watchdog;

use crate::connstate::ConnState;
use crate::engine::Run;
use crate::service;
use crate::tls::TlsSite;
use hyper_util::rt::TokioIo;
use io::Watched;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;
use tokio::sync::{watch, Notify};
use watchdog::{check, tick, Clock, Verdict};

/// After asking an idle HTTP/2 connection to finish (GOAWAY), how long it gets.
const POLITE_GRACE: Duration = Duration::from_secs(1);

/// How long a connection with unread bytes gets before it is judged idle again.
const LOOK_AGAIN_MS: u64 = 10;

/// Serves one TCP connection until it closes, the watchdog ends it, or the runtime stops.
/// `tls`: the connection is a TLS listener's (its handshake comes first, after a PROXY
/// header if the listener expects one).
pub(crate) async fn serve(
    mut stream: TcpStream,
    peer: SocketAddr,
    proxy_protocol: bool,
    run: Arc<Run>,
    shutdown: watch::Receiver<bool>,
    open: Box<dyn Send + Sync>,
    tls: Option<Arc<TlsSite>>,
) {
    let secure = tls.is_some();
    let mut client = None;
    if proxy_protocol {
        // Only a trusted peer may say who the client is (when trust is configured at all).
        if !run.trusted.is_empty() && !run.trusted.contains(peer.ip()) {
            run.log.warn(&format!("{peer}: PROXY header expected from a trusted proxy; connection closed"));
            return;
        }
        let limit = if run.limits.header_timeout.is_zero() { Duration::from_secs(30) } else { run.limits.header_timeout };
        match tokio::time::timeout(limit, crate::proxy::read_header(&mut stream)).await {
            Ok(Ok(named)) => client = named,
            Ok(Err(e)) => return run.log.info(&format!("{peer}: bad PROXY header ({e}); connection closed")),
            Err(_) => return,
        }
    }
    let state = ConnState::new(peer, client, open, secure);
    let raw = rawsock::raw_of(&stream);
    let polite = Arc::new(Notify::new());
    let mut clock = Clock::new();
    let last_word = {
        let work = drive_any(stream, tls, state.clone(), run.clone(), shutdown, polite.clone());
        tokio::pin!(work);
        let mut sleep = signals::WhenWoken::new(tokio::time::sleep(Duration::from_secs(3600)));
        let mut asked = false;
        let mut looked_again = false;
        loop {
            if state.write_blocked.load(Relaxed) {
                // Writes stall for a long while when the kernel's send buffer is large and
                // only wakes the writer once a third of it drains; the queue shrinking is
                // the peer reading, and that is progress.
                if let Some(queued) = rawsock::unsent(raw) {
                    if clock.note_unsent(queued) {
                        state.events.fetch_add(1, Relaxed);
                    }
                }
            }
            let mut verdict = check(&state, &mut clock, &run.limits);
            match verdict {
                // A stall of the whole server (a host's stop-the-world GC pause, a starved
                // CPU, an inline handler that blocks) brings this timer due in the same
                // wake-up as the request the client sent meanwhile. Judged before the
                // connection read it, that request was closed unanswered. Bytes waiting in
                // the socket are read first (`work` is polled before the timer below), then
                // the connection is judged again, once: a trickling head still gets its 408.
                // The look again waits a few ms, not 0: a timer comes due only in a driver
                // turn, which takes in the socket readiness first. Data that came while the
                // thread was descheduled after its last epoll_wait is not seen as readable
                // until then (the fuzzers' starved servers showed it).
                Verdict::Idle | Verdict::Timeout408 if !looked_again && rawsock::unread(raw).is_some_and(|n| n > 0) => {
                    looked_again = true;
                    verdict = Verdict::Wait(LOOK_AGAIN_MS);
                }
                Verdict::Wait(_) => looked_again = false,
                _ => {}
            }
            match verdict {
                Verdict::Wait(ms) => {
                    let ms = ms.min(tick(&run.limits));
                    sleep.rearm().reset(tokio::time::Instant::now() + Duration::from_millis(ms));
                }
                Verdict::Idle if state.is_h2.load(Relaxed) && !asked => {
                    asked = true;
                    polite.notify_one();
                    sleep.rearm().reset(tokio::time::Instant::now() + POLITE_GRACE);
                }
                Verdict::Idle | Verdict::Close => break None,
                Verdict::Flood => {
                    run.log.info(&format!("{peer}: HTTP/2 control-frame flood (PING, SETTINGS, PRIORITY, WINDOW_UPDATE); connection closed"));
                    break None;
                }
                // The raw socket of a TLS connection carries records, not text: a
                // plaintext 408 there would be garbage to the client, so it is only closed.
                Verdict::Timeout408 if secure => break None,
                // Taken while hyper still owns the socket; used once hyper is dropped.
                Verdict::Timeout408 => break rawsock::duplicate(raw).ok(),
            }
            tokio::select! {
                // The connection first: after a stall it reads what arrived before the
                // watchdog looks at it.
                biased;
                _ = &mut work => break None,
                // Asked to finish and did not within the grace: done asking.
                _ = &mut sleep => if asked { break None },
            }
        }
    };
    if let Some(sock) = last_word {
        run.counters.status(408);
        rawsock::send_408(sock).await;
    }
}

async fn drive_any(stream: TcpStream, tls: Option<Arc<TlsSite>>, state: Arc<ConnState>, run: Arc<Run>, shutdown: watch::Receiver<bool>, polite: Arc<Notify>) {
    match tls {
        #[cfg(feature = "tls")]
        // Boxed: a TLS handshake's state is large, and plain connections should not
        // carry its size in their task.
        Some(site) => Box::pin(crate::tls::accept::drive_tls(stream, site, state, run, shutdown, polite)).await,
        #[cfg(not(feature = "tls"))]
        Some(never) => match *never {},
        None => drive_tcp(stream, state, run, shutdown, polite).await,
    }
}

async fn drive_tcp(stream: TcpStream, state: Arc<ConnState>, run: Arc<Run>, shutdown: watch::Receiver<bool>, polite: Arc<Notify>) {
    let is_h2 = match sniff::is_h2(&stream, &state).await {
        Ok(Some(h2)) => h2,
        _ => return,
    };
    // Boxed: the connection's task is made as large as the largest state of its future,
    // and hyper's connection (2 KiB, kept twice over in this future's state when awaited
    // in place) would make every connection that has not sent its first head yet (a
    // slowloris one) carry that size too.
    Box::pin(drive(stream::Stream::Plain(stream), is_h2, state, run, shutdown, polite)).await
}

/// Runs hyper over any byte stream whose protocol is known.
pub(crate) async fn drive<S>(stream: S, is_h2: bool, state: Arc<ConnState>, run: Arc<Run>, mut shutdown: watch::Receiver<bool>, polite: Arc<Notify>)
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    state.is_h2.store(is_h2, Relaxed);
    let io = TokioIo::new(Watched::new(stream, is_h2, state.clone(), run.counters.clone()));
    let svc = {
        let (run, state) = (run.clone(), state.clone());
        hyper::service::service_fn(move |req| service::handle(&run, &state, req))
    };
    if is_h2 {
        #[cfg(feature = "http2")]
        {
            let conn = run.http2.serve_connection(io, svc);
            tokio::pin!(conn);
            until_done(conn.as_mut(), &mut shutdown, &polite, |c| c.graceful_shutdown()).await;
        }
        // Built without HTTP/2 (the minimal library): a prior-knowledge client is closed.
        #[cfg(not(feature = "http2"))]
        drop((io, svc));
        return;
    }
    let conn = run.http1.serve_connection(io, svc).with_upgrades();
    tokio::pin!(conn);
    until_done(conn.as_mut(), &mut shutdown, &polite, |c| c.graceful_shutdown()).await;
}

/// Polls a connection to the end, asking it to finish gracefully when the server stops
/// or the watchdog finds it idle.
async fn until_done<F: std::future::Future>(
    mut conn: Pin<&mut F>,
    shutdown: &mut watch::Receiver<bool>,
    polite: &Notify,
    graceful: impl Fn(Pin<&mut F>),
) {
    if !*shutdown.borrow() {
        let (changed, notified) = (shutdown.changed(), polite.notified());
        tokio::pin!(changed, notified);
        if !signals::ConnOrSignal::new(conn.as_mut(), changed, notified).await {
            return;
        }
    }
    graceful(conn.as_mut());
    conn.await;
}
