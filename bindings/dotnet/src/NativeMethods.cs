// Every import of the native engine (include/ember.h), in one place.
// Rules kept here: Cdecl everywhere; text goes in as NUL-terminated UTF-8 byte[] built by
// Utf8.Z (never the default ANSI string marshalling, which is not UTF-8 on .NET Framework);
// text comes out as byte* + length and is decoded with Encoding.UTF8; size_t is UIntPtr.
using System;
using System.Runtime.InteropServices;
using System.Security;

namespace Ember.Interop
{
    /// <summary>ember_str: a borrowed pointer + length view, not NUL-terminated.</summary>
    [StructLayout(LayoutKind.Sequential)]
    internal unsafe struct EmberStr
    {
        public byte* Ptr;
        public UIntPtr Len;
    }

    /// <summary>ember_header: lower-case name + raw value.</summary>
    [StructLayout(LayoutKind.Sequential)]
    internal struct EmberHeader
    {
        public EmberStr Name;
        public EmberStr Value;
    }

    /// <summary>ember_request_info: mirrors the header's struct field by field.</summary>
    [StructLayout(LayoutKind.Sequential)]
    internal unsafe struct EmberRequestInfo
    {
        public UIntPtr Size;
        public ulong Id;
        public EmberStr Method;
        public EmberStr Path;
        public EmberStr Query;
        public EmberStr Body;
        public EmberStr RemoteAddr;
        public EmberStr Route;
        public EmberHeader* Headers;
        public UIntPtr HeaderCount;
        public EmberHeader* Params;
        public UIntPtr ParamCount;
        public uint HttpVersion;
        /// <summary>Declared body length (Content-Length); -1 when unknown or absent (ABI 3).</summary>
        public long ContentLength;
        /// <summary>EMBER_REQUEST_BODY_STREAMED, EMBER_REQUEST_WEBSOCKET (ABI 3).</summary>
        public uint Flags;
    }

    /// <summary>ember_stats.</summary>
    [StructLayout(LayoutKind.Sequential)]
    internal struct EmberStatsNative
    {
        public UIntPtr Size;
        public ulong Requests;
        public ulong Responses1xx;
        public ulong Responses2xx;
        public ulong Responses3xx;
        public ulong Responses4xx;
        public ulong Responses5xx;
        public ulong ActiveConnections;
        public ulong TotalConnections;
        public ulong ActiveRequests;
        public ulong BytesRead;
        public ulong BytesWritten;
        public ulong ResponsesOther;
        public ulong HeldRequests;
    }

    [UnmanagedFunctionPointer(CallingConvention.Cdecl)]
    internal delegate void EmberHandlerFn(IntPtr userData, ulong req, IntPtr info);

    [UnmanagedFunctionPointer(CallingConvention.Cdecl)]
    internal delegate void EmberReleaseFn(IntPtr userData);

    [UnmanagedFunctionPointer(CallingConvention.Cdecl)]
    internal delegate void EmberLogFn(IntPtr userData, int level, IntPtr msg, UIntPtr len);

    [UnmanagedFunctionPointer(CallingConvention.Cdecl)]
    internal delegate void EmberThreadFn(IntPtr userData);

    [UnmanagedFunctionPointer(CallingConvention.Cdecl)]
    internal delegate void EmberEventFn(IntPtr userData, ulong req, int evt);

    [UnmanagedFunctionPointer(CallingConvention.Cdecl)]
    internal delegate void EmberWsOpenFn(IntPtr userData, ulong ws, IntPtr info);

    [UnmanagedFunctionPointer(CallingConvention.Cdecl)]
    internal delegate void EmberWsMessageFn(IntPtr userData, ulong ws, int kind, IntPtr data, UIntPtr len);

    [UnmanagedFunctionPointer(CallingConvention.Cdecl)]
    internal delegate void EmberWsCloseFn(IntPtr userData, ulong ws, ushort code, IntPtr reason, UIntPtr len);

    [UnmanagedFunctionPointer(CallingConvention.Cdecl)]
    internal delegate void EmberWsWritableFn(IntPtr userData, ulong ws);

    /// <summary>ember_ws_handlers: size first, then four function pointers (NULL allowed but for on_message).</summary>
    [StructLayout(LayoutKind.Sequential)]
    internal struct EmberWsHandlers
    {
        public UIntPtr Size;
        public IntPtr OnOpen;
        public IntPtr OnMessage;
        public IntPtr OnClose;
        public IntPtr OnWritable;
    }

    [SuppressUnmanagedCodeSecurity]
    internal static unsafe partial class NativeMethods
    {
        /// <summary>Resolved as ember.dll (Windows), libember.so (Linux, also via Ember.dll.config
        /// under Mono), libember.dylib (macOS).</summary>
        internal const string Lib = "ember";

        /// <summary>The ABI these declarations mirror (include/ember.h's EMBER_ABI_VERSION);
        /// NativeLoader refuses an engine of another version.</summary>
        internal const uint EMBER_ABI_VERSION = 6;

        internal const int EMBER_OK = 0;
        internal const int EMBER_DISPATCH_INLINE = 0;
        internal const int EMBER_DISPATCH_POOL = 1;
        internal const int EMBER_DISPATCH_AUTO = 2;
        internal const int EMBER_LIMIT_MAX_HEADER_BYTES = 1;
        internal const int EMBER_LIMIT_MAX_HEADERS = 2;
        internal const int EMBER_LIMIT_MAX_BODY_BYTES = 3;
        internal const int EMBER_LIMIT_HEADER_TIMEOUT_MS = 4;
        internal const int EMBER_LIMIT_IDLE_TIMEOUT_MS = 5;
        internal const int EMBER_LIMIT_MAX_CONNECTIONS = 6;
        internal const int EMBER_LIMIT_HANDLER_TIMEOUT_MS = 7;
        internal const int EMBER_LIMIT_MIN_BODY_RATE = 8;
        internal const int EMBER_LIMIT_STREAM_QUEUE_BYTES = 12;
        internal const int EMBER_LIMIT_WS_MAX_MESSAGE_BYTES = 13;
        internal const int EMBER_LIMIT_WS_QUEUE_BYTES = 14;
        internal const int EMBER_LIMIT_WS_PING_INTERVAL_MS = 15;
        internal const int EMBER_LIMIT_WS_MAX_CONNECTIONS = 16;
        internal const int EMBER_LIMIT_MAX_STREAM_BODY_BYTES = 17;
        internal const uint EMBER_ROUTE_STREAM_BODY = 1;
        internal const uint EMBER_ROUTE_POOL = 2;
        internal const uint EMBER_REQUEST_BODY_STREAMED = 1;
        internal const uint EMBER_REQUEST_WEBSOCKET = 2;
        internal const int EMBER_EVENT_WRITABLE = 1;
        internal const int EMBER_EVENT_READABLE = 2;
        internal const int EMBER_EVENT_ABORTED = 3;
        internal const int EMBER_EVENT_COMPLETED = 4;
        internal const int EMBER_WS_TEXT = 1;
        internal const int EMBER_WS_BINARY = 2;
        internal const int EMBER_ERR_INVALID_ARG = -2;
        internal const int EMBER_ERR_STATE = -3;
        internal const int EMBER_ERR_ALREADY_ANSWERED = -6;
        internal const int EMBER_ERR_TIMED_OUT = -7;
        internal const int EMBER_ERR_CLIENT_GONE = -8;
        internal const int EMBER_ERR_INVALID_HANDLE = -9;
        internal const int EMBER_ERR_WOULD_BLOCK = -14;
        internal const int EMBER_ERR_TOO_LARGE = -15;
        internal const uint EMBER_WAIT_FOREVER = uint.MaxValue;

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern IntPtr ember_version();

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern uint ember_abi_version();

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern IntPtr ember_result_name(int code);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern IntPtr ember_last_error();

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int ember_last_error_copy(byte* buf, UIntPtr cap, out UIntPtr outLen);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int ember_server_new(out EmberServerHandle server);

        /// <summary>Only EmberServerHandle.ReleaseHandle calls this.</summary>
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int ember_server_free(IntPtr server);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int ember_server_listen(EmberServerHandle server, byte[] address);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int ember_server_set_workers(EmberServerHandle server, uint workers);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int ember_server_set_dispatch(EmberServerHandle server, int mode);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int ember_server_set_pool_threads(EmberServerHandle server, uint threads);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int ember_server_set_limit(EmberServerHandle server, int limit, ulong value);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int ember_server_set_health_path(EmberServerHandle server, byte[] path);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int ember_server_add_trusted_proxy(EmberServerHandle server, byte[] cidr);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int ember_server_drain(EmberServerHandle server);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int ember_server_stop_accepting(EmberServerHandle server);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int ember_server_set_log(EmberServerHandle server, EmberLogFn log, IntPtr userData, int minLevel);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int ember_server_set_thread_hooks(EmberServerHandle server, EmberThreadFn onStart, EmberThreadFn onStop, IntPtr userData);

        /// <summary>Same, with native function pointers (the Mono thread shim's hooks).</summary>
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl, EntryPoint = "ember_server_set_thread_hooks")]
        internal static extern int ember_server_set_thread_hooks_native(EmberServerHandle server, IntPtr onStart, IntPtr onStop, IntPtr userData);

        /// <summary>method: NULL for any.</summary>
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int ember_server_route(EmberServerHandle server, byte[] method, byte[] pattern,
            EmberHandlerFn handler, IntPtr userData, EmberReleaseFn release);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int ember_server_start(EmberServerHandle server);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int ember_server_port(EmberServerHandle server, UIntPtr index, out ushort port);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int ember_server_stop(EmberServerHandle server, uint timeoutMs);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int ember_server_wait(EmberServerHandle server, uint timeoutMs);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int ember_server_stats(EmberServerHandle server, out EmberStatsNative stats, UIntPtr statsSize);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int ember_request_get_info(ulong req, out EmberRequestInfo info, UIntPtr infoSize);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int ember_request_header(ulong req, byte[] name, out EmberStr value);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int ember_request_param(ulong req, byte[] name, out EmberStr value);

        /// <summary>The one call that answers a request: status + header block + body (copied).</summary>
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int ember_request_respond(ulong req, ushort status,
            byte* headers, UIntPtr headersLen, byte* body, UIntPtr bodyLen);

        /// <summary>Status, Content-Type (not NUL-terminated, 0 = none) and body (copied): no
        /// header block (ABI 5).</summary>
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int ember_request_respond_small(ulong req, ushort status,
            byte* contentType, uint contentTypeLen, byte* body, uint bodyLen);

        /// <summary>A prepared answer (ABI 5): headers and body copied now; freed with ember_answer_free.</summary>
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int ember_answer_new(ushort status, byte* headers, UIntPtr headersLen,
            byte* body, UIntPtr bodyLen, out ulong answer);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int ember_answer_free(ulong answer);

        /// <summary>Answers with a prepared answer; its body is shared, not copied (ABI 5).</summary>
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int ember_request_respond_answer(ulong req, ulong answer);

        /// <summary>Like respond, body not copied; release(releaseData) once when the engine is done.</summary>
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int ember_request_respond_nocopy(ulong req, ushort status,
            byte* headers, UIntPtr headersLen, byte* body, UIntPtr bodyLen,
            EmberReleaseFn release, IntPtr releaseData);
    
        // ---------------- streaming (ABI 3) ----------------

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int ember_server_route_flags(EmberServerHandle server, byte[] method, byte[] pattern, uint flags,
            EmberHandlerFn handler, IntPtr userData, EmberReleaseFn release);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int ember_response_begin(ulong req, ushort status, byte* headers, UIntPtr headersLen);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int ember_response_write(ulong req, byte* data, UIntPtr len);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int ember_response_end(ulong req);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int ember_response_abort(ulong req);

        /// <summary>Blocking; EMBER_ERR_STATE on an I/O thread.</summary>
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int ember_response_wait_writable(ulong req, uint timeoutMs);

        /// <summary>timeoutMs 0 never blocks; otherwise EMBER_ERR_STATE on an I/O thread.</summary>
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int ember_request_read(ulong req, byte* buf, UIntPtr cap, uint timeoutMs, out UIntPtr n);

        /// <summary>Takes a raw function pointer: the binding's event delegates are static
        /// (or come from another domain, see RequestEvents).</summary>
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int ember_request_on_event(ulong req, IntPtr eventFn, IntPtr userData);

        // ---------------- WebSocket (ABI 3) ----------------

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int ember_server_websocket(EmberServerHandle server, byte[] pattern, ref EmberWsHandlers handlers,
            IntPtr userData, EmberReleaseFn release);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int ember_ws_accept(ulong ws, byte* headers, UIntPtr headersLen);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int ember_ws_send(ulong ws, int kind, byte* data, UIntPtr len);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int ember_ws_close(ulong ws, ushort code, byte* reason, UIntPtr reasonLen);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int ember_ws_join(ulong ws, byte[] group);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int ember_ws_leave(ulong ws, byte[] group);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int ember_ws_buffered(ulong ws, out UIntPtr bytes);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int ember_server_ws_broadcast(EmberServerHandle server, byte[] group, int kind, byte* data, UIntPtr len,
            ulong except, out UIntPtr sent);
    }
}
