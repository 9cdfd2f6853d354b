//! The fuzz input: operations and their arguments, decoded by `arbitrary`.

use arbitrary::Arbitrary;
use std::ffi::CString;

#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum Srv {
    Nth(u8),
    Null,
}

#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum H {
    /// One of this input's handles.
    Seen(u8),
    /// One of this input's handles with another generation, shard or index.
    Mangled(u8, u8),
    /// A handle from an earlier input, whose server was freed long ago.
    Old(u8),
    Forged(u64),
    Zero,
}

/// Bytes for a C string; NULs inside are dropped (the C string would end there anyway).
#[derive(Arbitrary, Debug)]
pub struct Str(pub Vec<u8>);

impl Str {
    pub fn c(&self) -> CString {
        CString::new(self.0.iter().copied().filter(|b| *b != 0).collect::<Vec<u8>>()).unwrap()
    }
}

/// A pointer + length argument: a real buffer, or NULL with the length the buffer has.
#[derive(Arbitrary, Debug)]
pub struct Buf {
    pub bytes: Vec<u8>,
    pub null: bool,
}

/// The struct size a caller passes with a sized output struct.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum Size {
    /// sizeof as this build knows it.
    Full,
    /// Too small to hold even the size field.
    Tiny(u8),
    /// An older or newer header's idea of the size (up to twice ours).
    Any(u16),
}

#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum Status {
    Ok,
    NoContent,
    Teapot,
    Any(u16),
}

impl Status {
    pub fn code(self) -> u16 {
        match self {
            Status::Ok => 200,
            Status::NoContent => 204,
            Status::Teapot => 418,
            Status::Any(n) => n,
        }
    }
}

/// A response header block: mostly well-formed, sometimes anything.
#[derive(Arbitrary, Debug)]
pub enum Headers {
    None,
    Plain,
    Framing,
    Any(Buf),
}

impl Headers {
    pub fn buf(&self) -> Option<Buf> {
        let fixed = |s: &[u8]| Some(Buf { bytes: s.to_vec(), null: false });
        match self {
            Headers::None => None,
            Headers::Plain => fixed(b"Content-Type: text/plain\r\nX-A: 1"),
            // The engine owns framing: these are dropped, never sent twice.
            Headers::Framing => fixed(b"Content-Length: 99\nTransfer-Encoding: chunked\nConnection: close"),
            Headers::Any(b) => Some(Buf { bytes: b.bytes.clone(), null: b.null }),
        }
    }
}

#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum LimitValue {
    Small(u16),
    Zero,
    Max,
    Any(u64),
}

#[derive(Arbitrary, Debug, Clone, Copy, PartialEq)]
pub enum Kind {
    /// Keeps the handle; ops answer it later from the fuzzer's thread.
    Defer,
    /// Answers inside the call.
    AnswerNow,
    /// Stops its own server from inside (must return at once).
    StopInside,
    /// Frees its own server from inside (must be refused).
    FreeInside,
}

#[derive(Arbitrary, Debug)]
pub enum PathSel {
    /// The n-th route registered on this server, parameters filled in.
    Route(u8),
    Raw(Vec<u8>),
}

/// A WebSocket connection handle.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum W {
    /// One that an open callback of this input saw.
    Seen(u8),
    /// A request handle used as a WebSocket handle (the wrong kind of token).
    Request(u8),
    Forged(u64),
}

/// Streaming answers, streamed bodies, events and WebSockets (ABI 3).
#[derive(Arbitrary, Debug)]
pub enum StreamOp {
    Begin { h: H, status: Status, headers: Headers },
    Write { h: H, body: Option<Buf> },
    WriteNocopy { h: H, body: Option<Buf>, null_release: bool },
    End(H),
    WaitWritable(H, u8),
    Read { h: H, cap: u16, ms: u8, null_buf: bool, null_out: bool },
    OnEvent(H, bool),
    WsAccept(W, Headers),
    WsSend { ws: W, kind: i32, data: Option<Buf> },
    WsClose { ws: W, code: u16, reason: Option<Buf> },
    WsJoin(W, Option<Str>),
    WsLeave(W, Option<Str>),
    WsBuffered(W, bool),
    Broadcast { srv: Srv, group: Option<Str>, kind: i32, data: Option<Buf>, except: W, null_out: bool },
    /// A WebSocket endpoint; `size` is what the caller claims for its handlers struct.
    WebSocket { srv: Srv, pattern: Option<Str>, size: Size, null_open: bool, null_message: bool, null_release: bool },
    /// A route with `EMBER_ROUTE_STREAM_BODY` (or unknown flag bits).
    RouteFlags { srv: Srv, pattern: u8, flags: u32 },
}

#[derive(Arbitrary, Debug)]
pub enum Op {
    /// A running server in one step (new, listen on 127.0.0.1:0, one route, start, and
    /// `sends % 4` requests to it), so that the request ops meet live requests without
    /// the fuzzer having to find the whole sequence first.
    /// `extras` bit 0 adds a log callback (all levels), bit 1 thread hooks, bit 2 a
    /// WebSocket endpoint at /ws and one client's handshake, bit 3 a streamed-body route.
    Quickstart { kind: Kind, inline: bool, pattern: u8, sends: u8, extras: u8 },
    New,
    Free(Srv),
    Listen(Srv, Str),
    ListenLoopback(Srv),
    SetWorkers(Srv, u32),
    SetDispatch(Srv, i32),
    SetPoolThreads(Srv, u32),
    SetLimit(Srv, i32, LimitValue),
    SetLog(Srv, bool, i32),
    SetHooks(Srv, bool, bool),
    Route { srv: Srv, method: Option<Str>, pattern: Option<Str>, kind: Kind, null_handler: bool, null_release: bool },
    Start(Srv),
    Port(Srv, u8, bool),
    Stop(Srv, u8),
    Wait(Srv, u8),
    Stats(Srv, bool, Size),
    Send { srv: Srv, post: bool, path: PathSel, body: Vec<u8> },
    /// A WebSocket upgrade request (the handshake only) to a path of this server.
    Upgrade { srv: Srv, path: PathSel },
    Stream(StreamOp),
    DropClient(u8),
    GetInfo(H, bool, Size),
    ListenFlags(Srv, u32),
    Header(H, Option<Str>, bool),
    Param(H, Option<Str>, bool),
    Respond { h: H, status: Status, headers: Headers, body: Option<Buf> },
    RespondNocopy { h: H, status: Status, headers: Headers, body: Option<Buf>, null_release: bool },
    LastError,
    LastErrorCopy(u8, bool, bool),
    ResultName(i32),
    Version,
}
