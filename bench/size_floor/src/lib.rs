//! The smallest thing that could be called an embeddable HTTP engine on tokio + hyper:
//! `floor_start` binds 127.0.0.1:port, serves HTTP/1.1 keep-alive on a tokio runtime in a
//! thread of its own, and asks the host (a C callback) for each answer's body. Panics are
//! caught at the C boundary, as every ember function does. Built only to measure bytes.
use std::convert::Infallible;
use std::ffi::c_void;
use std::net::SocketAddr;
use std::panic::{catch_unwind, AssertUnwindSafe};

use bytes::Bytes;
use http_body_util::Full;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

/// The host's handler: the request path in, a body out (pointer and length, valid until the
/// next call on that thread).
pub type FloorHandler =
    extern "C" fn(user: *mut c_void, path: *const u8, path_len: usize, body_len: *mut usize) -> *const u8;

#[derive(Clone, Copy)]
struct Host {
    handler: FloorHandler,
    user: usize,
}

fn answer(host: Host, req: &Request<hyper::body::Incoming>) -> Response<Full<Bytes>> {
    let path = req.uri().path();
    let mut len = 0usize;
    let ptr = (host.handler)(host.user as *mut c_void, path.as_ptr(), path.len(), &mut len);
    let body = if ptr.is_null() {
        Bytes::new()
    } else {
        Bytes::copy_from_slice(unsafe { std::slice::from_raw_parts(ptr, len) })
    };
    Response::new(Full::new(body))
}

async fn serve(listener: TcpListener, host: Host) {
    loop {
        let Ok((stream, _)) = listener.accept().await else { continue };
        tokio::spawn(async move {
            let svc = service_fn(move |req| async move { Ok::<_, Infallible>(answer(host, &req)) });
            let _ = http1::Builder::new().serve_connection(TokioIo::new(stream), svc).await;
        });
    }
}

fn runtime() -> std::io::Result<tokio::runtime::Runtime> {
    #[cfg(feature = "multi-thread")]
    let mut b = tokio::runtime::Builder::new_multi_thread();
    #[cfg(not(feature = "multi-thread"))]
    let mut b = tokio::runtime::Builder::new_current_thread();
    b.enable_io().enable_time().build()
}

/// Starts serving on 127.0.0.1:`port` (0: any) in a new thread; returns the bound port, or -1.
#[no_mangle]
pub extern "C" fn floor_start(port: u16, handler: FloorHandler, user: *mut c_void) -> i32 {
    let host = Host { handler, user: user as usize };
    catch_unwind(AssertUnwindSafe(|| {
        let rt = runtime().ok()?;
        let listener = rt
            .block_on(TcpListener::bind(SocketAddr::from(([127, 0, 0, 1], port))))
            .ok()?;
        let bound = listener.local_addr().ok()?.port();
        std::thread::spawn(move || rt.block_on(serve(listener, host)));
        Some(bound as i32)
    }))
    .ok()
    .flatten()
    .unwrap_or(-1)
}
