using System;
using System.Collections.Generic;
using System.Runtime.InteropServices;
using System.Threading;
using System.Threading.Tasks;
using Ember.Interop;

namespace Ember
{
    /// <summary>
    /// An HTTP server inside this process. Map routes, then Start; Stop (or Dispose) ends it.
    /// A stopped server can be started again (each Start creates a fresh native server with the
    /// routes mapped so far). Thread-safe: Start/Stop/Dispose may be called from any thread,
    /// Stop/Dispose also from inside a handler.
    /// <code>
    /// using (var server = new EmberServer())
    /// {
    ///     server.MapGet("/hello/{name}", ctx => ctx.Response.Text("hi " + ctx.Request.GetRouteValue("name")));
    ///     int port = server.Start(8080);
    ///     Console.ReadLine();
    /// }
    /// </code>
    /// </summary>
    public sealed partial class EmberServer : IDisposable
    {
        readonly object _gate = new object();
        readonly EmberOptions _options;
        readonly List<RouteEntry> _routes = new List<RouteEntry>();
        NativeInstance _running;
        int[] _ports = new int[0];
        bool _disposed;

        public EmberServer() : this(new EmberOptions()) { }

        public EmberServer(EmberOptions options)
        {
            if (options == null) throw new ArgumentNullException("options");
            // Before the first P/Invoke: find the engine next to this assembly and check its ABI.
            NativeLoader.EnsureLoaded();
            _options = options;
            ShutdownHook.Ensure();
        }

        /// <summary>The options read at each Start.</summary>
        public EmberOptions Options { get { return _options; } }

        /// <summary>
        /// A handler threw (its client got a 500) or an answer was refused by the engine. Raised on
        /// the thread that ran the handler; exceptions thrown by subscribers are swallowed.
        /// </summary>
        public event EventHandler<EmberErrorEventArgs> Error;

        /// <summary>Engine log lines and binding messages at or above Options.LogLevel, from any
        /// thread; a handler exception is also logged here (Level Error, with Exception).</summary>
        public event EventHandler<EmberLogEventArgs> Log;

        /// <summary>The engine's version string.</summary>
        public static string NativeVersion { get { NativeLoader.EnsureLoaded(); return Utf8.FromCString(NativeMethods.ember_version()); } }

        /// <summary>The engine's ABI version (EMBER_ABI_VERSION).</summary>
        public static uint NativeAbiVersion { get { NativeLoader.EnsureLoaded(); return NativeMethods.ember_abi_version(); } }

        /// <summary>The ABI version this Ember.dll was built for; the engine must have the same.</summary>
        public static uint ExpectedAbiVersion { get { return NativeMethods.EMBER_ABI_VERSION; } }

        /// <summary>The native engine file in use (loads it if needed). Set the EMBER_LIBRARY
        /// environment variable to choose the file yourself.</summary>
        public static string NativeLibraryPath { get { NativeLoader.EnsureLoaded(); return NativeLoader.LoadedFrom; } }

        // ---------------- routes ----------------

        /// <summary>Maps a synchronous handler. method: "GET", "POST", ..., or null / "*" for any.
        /// Pattern: "/users/{id}", "/files/{*rest}". Before Start only.</summary>
        public EmberServer Map(string method, string pattern, Action<EmberContext> handler)
        {
            if (handler == null) throw new ArgumentNullException("handler");
            return Add(method, pattern, handler, null);
        }

        /// <summary>Maps an async handler: it is answered when its Task completes, and holds no
        /// engine thread while it awaits.</summary>
        public EmberServer Map(string method, string pattern, Func<EmberContext, Task> handler)
        {
            if (handler == null) throw new ArgumentNullException("handler");
            return Add(method, pattern, null, handler);
        }

        /// <summary>Maps a handler; with <paramref name="streamBody"/> the request body is not buffered:
        /// the handler starts once the head is in and reads <see cref="EmberRequest.BodyStream"/> as
        /// the data arrives (limit: Options.MaxStreamBodyBytes).</summary>
        public EmberServer Map(string method, string pattern, Action<EmberContext> handler, bool streamBody)
        {
            if (handler == null) throw new ArgumentNullException("handler");
            return Add(method, pattern, handler, null, null, streamBody);
        }

        public EmberServer Map(string method, string pattern, Func<EmberContext, Task> handler, bool streamBody)
        {
            if (handler == null) throw new ArgumentNullException("handler");
            return Add(method, pattern, null, handler, null, streamBody);
        }

        /// <summary>Maps a sync handler that always runs on a pool thread, even under Auto dispatch
        /// (EMBER_ROUTE_POOL): for one that blocks on its own streamed answer or body (a
        /// <c>Write</c> into a full queue), which its connection's I/O thread must drain.</summary>
        public EmberServer MapPooled(string method, string pattern, Action<EmberContext> handler)
        {
            if (handler == null) throw new ArgumentNullException("handler");
            return Add(method, pattern, handler, null, null, false, true);
        }

        public EmberServer MapPost(string pattern, Action<EmberContext> handler, bool streamBody) { return Map("POST", pattern, handler, streamBody); }
        public EmberServer MapPost(string pattern, Func<EmberContext, Task> handler, bool streamBody) { return Map("POST", pattern, handler, streamBody); }
        public EmberServer MapPut(string pattern, Action<EmberContext> handler, bool streamBody) { return Map("PUT", pattern, handler, streamBody); }
        public EmberServer MapPut(string pattern, Func<EmberContext, Task> handler, bool streamBody) { return Map("PUT", pattern, handler, streamBody); }
        public EmberServer MapAny(string pattern, Action<EmberContext> handler, bool streamBody) { return Map(null, pattern, handler, streamBody); }
        public EmberServer MapAny(string pattern, Func<EmberContext, Task> handler, bool streamBody) { return Map(null, pattern, handler, streamBody); }

        /// <summary>
        /// Maps a WebSocket endpoint (GET upgrades on HTTP/1.1; a plain GET there gets 426). Each
        /// accepted connection runs <paramref name="session"/>, started on the engine's thread
        /// that accepted it and resumed after ReceiveAsync on the thread that delivered the
        /// message (like a handler: under Inline dispatch it must not block); when its Task
        /// ends the connection is closed (1000, or 1011 if it threw).
        /// </summary>
        public EmberServer MapWebSocket(string pattern, Func<EmberWebSocket, Task> session)
        {
            return MapWebSocket(pattern, session, null);
        }

        /// <summary>
        /// Same, with an upgrade callback that sees the request first and may refuse it
        /// (<see cref="EmberWebSocketUpgrade.Reject"/>), pick a subprotocol or add headers to
        /// the 101. It runs on an engine thread; an exception there refuses with 500.
        /// </summary>
        public EmberServer MapWebSocket(string pattern, Func<EmberWebSocket, Task> session, Action<EmberWebSocketUpgrade> onUpgrade)
        {
            if (pattern == null) throw new ArgumentNullException("pattern");
            if (session == null) throw new ArgumentNullException("session");
            lock (_gate)
            {
                CheckNotDisposed();
                if (_running != null) throw new InvalidOperationException("Map routes before Start (or after Stop).");
                _routes.Add(new RouteEntry { Method = "GET", Pattern = pattern, WebSocket = new WebSocketRoute { Session = session, OnUpgrade = onUpgrade } });
            }
            return this;
        }

        /// <summary>
        /// Sends a text message to every WebSocket in <paramref name="group"/> (an endpoint's
        /// pattern, e.g. "/ws/chat", or a name connections joined) but <paramref name="except"/>.
        /// The frame is encoded once and shared; a connection whose send queue is full misses it.
        /// Returns how many connections it was queued to (0 when the server is not running).
        /// </summary>
        public int Broadcast(string group, string text, EmberWebSocket except = null)
        {
            if (text == null) throw new ArgumentNullException("text");
            return Broadcast(group, new ArraySegment<byte>(Utf8.Encoding.GetBytes(text)), EmberWebSocketMessageType.Text, except);
        }

        /// <summary>Same with a binary message.</summary>
        public int Broadcast(string group, byte[] data, EmberWebSocket except = null)
        {
            if (data == null) throw new ArgumentNullException("data");
            return Broadcast(group, new ArraySegment<byte>(data), EmberWebSocketMessageType.Binary, except);
        }

        public int Broadcast(string group, ArraySegment<byte> data, EmberWebSocketMessageType type, EmberWebSocket except = null)
        {
            if (group == null) throw new ArgumentNullException("group");
            if (data.Array == null) throw new ArgumentNullException("data");
            if (type != EmberWebSocketMessageType.Text && type != EmberWebSocketMessageType.Binary)
                throw new ArgumentOutOfRangeException("type");
            NativeInstance inst;
            lock (_gate) inst = _running;
            if (inst == null) return 0;
            return inst.Broadcast(group, data, type, except == null ? 0UL : except.Id);
        }

        public EmberServer MapGet(string pattern, Action<EmberContext> handler) { return Map("GET", pattern, handler); }
        public EmberServer MapGet(string pattern, Func<EmberContext, Task> handler) { return Map("GET", pattern, handler); }
        public EmberServer MapPost(string pattern, Action<EmberContext> handler) { return Map("POST", pattern, handler); }
        public EmberServer MapPost(string pattern, Func<EmberContext, Task> handler) { return Map("POST", pattern, handler); }
        public EmberServer MapPut(string pattern, Action<EmberContext> handler) { return Map("PUT", pattern, handler); }
        public EmberServer MapPut(string pattern, Func<EmberContext, Task> handler) { return Map("PUT", pattern, handler); }
        public EmberServer MapDelete(string pattern, Action<EmberContext> handler) { return Map("DELETE", pattern, handler); }
        public EmberServer MapDelete(string pattern, Func<EmberContext, Task> handler) { return Map("DELETE", pattern, handler); }
        public EmberServer MapAny(string pattern, Action<EmberContext> handler) { return Map(null, pattern, handler); }
        public EmberServer MapAny(string pattern, Func<EmberContext, Task> handler) { return Map(null, pattern, handler); }

        /// <summary>Adapters (OWIN) learn here that the server begins to stop (before in-flight
        /// requests are drained), on the thread that called Stop.</summary>
        internal event Action Stopping;

        /// <summary>Maps an adapter's handler that answers by itself (System.Web, OWIN).</summary>
        internal EmberServer MapRaw(string method, string pattern, RawHandler handler)
        {
            if (handler == null) throw new ArgumentNullException("handler");
            return Add(method, pattern, null, null, handler);
        }

        /// <summary>Maps an adapter's handler for every method of <paramref name="pattern"/>: GET (and
        /// so HEAD), DELETE and OPTIONS with buffered bodies (rare, and free to read), every other
        /// method streaming its body (read as it arrives, whatever its size).</summary>
        internal EmberServer MapRawAllMethods(string pattern, RawHandler handler)
        {
            if (handler == null) throw new ArgumentNullException("handler");
            foreach (string m in s_bufferedMethods) Add(m, pattern, null, null, handler);
            return Add(null, pattern, null, null, handler, streamBody: true);
        }

        static readonly string[] s_bufferedMethods = { "GET", "DELETE", "OPTIONS" };

        EmberServer Add(string method, string pattern, Action<EmberContext> sync, Func<EmberContext, Task> async,
            RawHandler raw = null, bool streamBody = false, bool pool = false)
        {
            if (pattern == null) throw new ArgumentNullException("pattern");
            if (method == "*") method = null;
            lock (_gate)
            {
                CheckNotDisposed();
                if (_running != null) throw new InvalidOperationException("Map routes before Start (or after Stop).");
                _routes.Add(new RouteEntry { Method = method, Pattern = pattern, Sync = sync, Async = async, Raw = raw, StreamBody = streamBody, Pool = pool });
            }
            return this;
        }

        // ---------------- lifecycle ----------------

        /// <summary>Listens on Options.Host:port (port 0 picks a free one) and returns the bound port.</summary>
        public int Start(int port)
        {
            if (port < 0 || port > 65535) throw new ArgumentOutOfRangeException("port");
            string host = _options.Host ?? "127.0.0.1";
            string addr = (host.IndexOf(':') >= 0 && !host.StartsWith("[", StringComparison.Ordinal) ? "[" + host + "]" : host) + ":" + port;
            StartOn(new[] { addr });
            return _ports[0];
        }

        /// <summary>Listens on every address in Options.ListenAddresses.</summary>
        public void Start()
        {
            var addrs = new List<string>(_options.ListenAddresses);
            if (addrs.Count == 0) throw new InvalidOperationException("Options.ListenAddresses is empty; use Start(port).");
            StartOn(addrs.ToArray());
        }

        void StartOn(string[] addresses)
        {
            lock (_gate)
            {
                CheckNotDisposed();
                if (_running != null) throw new InvalidOperationException("The server is already running.");
                if (ShutdownHook.ProcessExiting) throw new InvalidOperationException("The process is exiting.");
                EmberServerHandle h;
                Native.Check(NativeMethods.ember_server_new(out h), "ember_server_new");
                var inst = new NativeInstance(this, _routes.ToArray(), h);
                try
                {
                    Configure(inst, addresses);
                    for (int i = 0; i < inst.Routes.Length; i++) inst.Register(i);
                    ApplyFront(h);
                    Native.Check(NativeMethods.ember_server_start(h), "ember_server_start");
                    var ports = new int[addresses.Length];
                    for (int i = 0; i < ports.Length; i++)
                    {
                        ushort p;
                        Native.Check(NativeMethods.ember_server_port(h, (UIntPtr)(uint)i, out p), "ember_server_port");
                        ports[i] = p;
                    }
                    _ports = ports;
                    _tlsPorts = TlsSetup.Ports(h, addresses.Length, _options);
                }
                catch
                {
                    inst.StopAndFree(0);
                    throw;
                }
                _running = inst;
            }
        }

        void Configure(NativeInstance inst, string[] addresses)
        {
            EmberServerHandle h = inst.Handle;
            EmberOptions o = _options;
            foreach (string a in addresses)
                Native.Check(NativeMethods.ember_server_listen(h, Utf8.Z(a)), "ember_server_listen(" + a + ")");
            if (o.Workers < 0 || o.PoolThreads < 0) throw new ArgumentOutOfRangeException("options", "Workers/PoolThreads must be >= 0");
            Native.Check(NativeMethods.ember_server_set_workers(h, (uint)o.Workers), "ember_server_set_workers");
            Native.Check(NativeMethods.ember_server_set_dispatch(h, (int)o.Dispatch), "ember_server_set_dispatch");
            Native.Check(NativeMethods.ember_server_set_pool_threads(h, (uint)o.PoolThreads), "ember_server_set_pool_threads");
            if (o.MaxBodyBytes.HasValue) Limit(h, NativeMethods.EMBER_LIMIT_MAX_BODY_BYTES, o.MaxBodyBytes.Value);
            if (o.MaxHeaderBytes.HasValue) Limit(h, NativeMethods.EMBER_LIMIT_MAX_HEADER_BYTES, o.MaxHeaderBytes.Value);
            if (o.MaxHeaders.HasValue) Limit(h, NativeMethods.EMBER_LIMIT_MAX_HEADERS, o.MaxHeaders.Value);
            if (o.HeaderTimeout.HasValue) Limit(h, NativeMethods.EMBER_LIMIT_HEADER_TIMEOUT_MS, Ms(o.HeaderTimeout.Value));
            if (o.IdleTimeout.HasValue) Limit(h, NativeMethods.EMBER_LIMIT_IDLE_TIMEOUT_MS, Ms(o.IdleTimeout.Value));
            if (o.HandlerTimeout.HasValue) Limit(h, NativeMethods.EMBER_LIMIT_HANDLER_TIMEOUT_MS, Ms(o.HandlerTimeout.Value));
            if (o.MaxConnections.HasValue) Limit(h, NativeMethods.EMBER_LIMIT_MAX_CONNECTIONS, o.MaxConnections.Value);
            if (o.HealthPath != null)
                Native.Check(NativeMethods.ember_server_set_health_path(h, Utf8.Z(o.HealthPath)), "ember_server_set_health_path");
            foreach (string cidr in o.TrustedProxies)
                Native.Check(NativeMethods.ember_server_add_trusted_proxy(h, Utf8.Z(cidr)), "ember_server_add_trusted_proxy(" + cidr + ")");
            if (o.MaxStreamBodyBytes.HasValue) Limit(h, NativeMethods.EMBER_LIMIT_MAX_STREAM_BODY_BYTES, o.MaxStreamBodyBytes.Value);
            if (o.MinBodyRate.HasValue) Limit(h, NativeMethods.EMBER_LIMIT_MIN_BODY_RATE, o.MinBodyRate.Value);
            if (o.StreamQueueBytes.HasValue) Limit(h, NativeMethods.EMBER_LIMIT_STREAM_QUEUE_BYTES, o.StreamQueueBytes.Value);
            if (o.WebSocketMaxMessageBytes.HasValue) Limit(h, NativeMethods.EMBER_LIMIT_WS_MAX_MESSAGE_BYTES, o.WebSocketMaxMessageBytes.Value);
            if (o.WebSocketQueueBytes.HasValue) Limit(h, NativeMethods.EMBER_LIMIT_WS_QUEUE_BYTES, o.WebSocketQueueBytes.Value);
            if (o.WebSocketPingInterval.HasValue) Limit(h, NativeMethods.EMBER_LIMIT_WS_PING_INTERVAL_MS, Ms(o.WebSocketPingInterval.Value));
            if (o.WebSocketMaxConnections.HasValue) Limit(h, NativeMethods.EMBER_LIMIT_WS_MAX_CONNECTIONS, o.WebSocketMaxConnections.Value);
            Native.Check(NativeMethods.ember_server_set_log(h, inst.LogThunk, IntPtr.Zero, (int)o.LogLevel), "ember_server_set_log");
            ThreadHooks.Apply(h);
            TlsSetup.Configure(h, o);
        }

        static void Limit(EmberServerHandle h, int limit, long value)
        {
            if (value < 0) throw new ArgumentOutOfRangeException("options", "limits must be >= 0");
            Native.Check(NativeMethods.ember_server_set_limit(h, limit, (ulong)value), "ember_server_set_limit(" + limit + ")");
        }

        static long Ms(TimeSpan t)
        {
            if (t < TimeSpan.Zero) throw new ArgumentOutOfRangeException("options", "timeouts must be >= 0");
            return (long)Math.Ceiling(t.TotalMilliseconds);
        }

        static uint TimeoutMs(TimeSpan t)
        {
            if (t <= TimeSpan.Zero) return 0;
            double ms = Math.Ceiling(t.TotalMilliseconds);
            return ms >= uint.MaxValue - 1 ? uint.MaxValue - 1 : (uint)ms;
        }

        /// <summary>True between Start and Stop.</summary>
        public bool IsRunning { get { lock (_gate) return _running != null; } }

        /// <summary>The first bound port (0 before the first Start).</summary>
        public int Port { get { var p = _ports; return p.Length > 0 ? p[0] : 0; } }

        /// <summary>Bound ports, one per listen address, in order.</summary>
        public IReadOnlyList<int> Ports { get { return (int[])_ports.Clone(); } }

        /// <summary>
        /// Starts draining ahead of a stop (a rolling restart behind a load balancer): the health
        /// path answers 503 and every HTTP/1.1 answer closes its connection, so the balancer takes
        /// this process out; requests are still served until <see cref="Stop()"/>. Idempotent.
        /// </summary>
        public void Drain()
        {
            NativeInstance inst;
            lock (_gate) inst = _running;
            if (inst == null) throw new InvalidOperationException("Drain needs a running server.");
            Native.Check(NativeMethods.ember_server_drain(inst.Handle), "ember_server_drain");
        }

        /// <summary>
        /// Drains and closes the listeners: new connections are refused (a balancer without active
        /// health checks, like nginx open source, then retries elsewhere, even a POST); open ones
        /// are still served, each answer closing its connection, until <see cref="Stop()"/>.
        /// </summary>
        public void StopAccepting()
        {
            NativeInstance inst;
            lock (_gate) inst = _running;
            if (inst == null) throw new InvalidOperationException("StopAccepting needs a running server.");
            Native.Check(NativeMethods.ember_server_stop_accepting(inst.Handle), "ember_server_stop_accepting");
        }

        /// <summary>Stops gracefully, waiting up to 5 s for in-flight requests.</summary>
        public void Stop() { Stop(TimeSpan.FromSeconds(5)); }

        /// <summary>
        /// Stops accepting, lets in-flight requests finish for up to <paramref name="timeout"/>,
        /// then force-closes the rest. When it returns no handler runs any more (except async
        /// handlers still awaiting: their late answers are dropped quietly). From inside a handler
        /// (also after an await in an async handler) it starts the stop and returns at once; the
        /// rest happens on a pool thread. Idempotent.
        /// </summary>
        public void Stop(TimeSpan timeout)
        {
            NativeInstance inst;
            lock (_gate)
            {
                inst = _running;
                _running = null;
            }
            if (inst == null) return;
            var stopping = Stopping;
            if (stopping != null)
            {
                try { stopping(); } catch (Exception ex) { RaiseLog(EmberLogLevel.Warn, "stop hook failed: " + ex.Message, ex); }
            }
            uint ms = TimeoutMs(timeout);
            if (inst.IsCurrentHandlerThread) inst.StopFromHandler(ms);
            else if (inst.IsCurrentAsyncHandler)
            {
                // After an await inside one of our handlers: that request is itself in flight, so a
                // blocking stop would wait for it. Stop on another thread and return.
                ThreadPool.QueueUserWorkItem(_ => inst.StopAndFree(ms));
            }
            else inst.StopAndFree(ms);
        }

        /// <summary>Stops (force-closing after Options.DisposeTimeout, default at once) and
        /// releases everything. Safe without Stop, twice, and from inside a handler.</summary>
        public void Dispose()
        {
            lock (_gate)
            {
                if (_disposed) return;
                _disposed = true;
            }
            Stop(_options.DisposeTimeout);
        }

        /// <summary>Engine counters of the running server (null when not running).</summary>
        public EmberStats GetStats()
        {
            NativeInstance inst;
            lock (_gate) inst = _running;
            if (inst == null) return null;
            EmberStatsNative s;
            try
            {
                Native.Check(NativeMethods.ember_server_stats(inst.Handle, out s, (UIntPtr)Marshal.SizeOf(typeof(EmberStatsNative))), "ember_server_stats");
            }
            catch (ObjectDisposedException) { return null; }
            return new EmberStats
            {
                Requests = (long)s.Requests,
                Responses1xx = (long)s.Responses1xx,
                Responses2xx = (long)s.Responses2xx,
                Responses3xx = (long)s.Responses3xx,
                Responses4xx = (long)s.Responses4xx,
                Responses5xx = (long)s.Responses5xx,
                ActiveConnections = (long)s.ActiveConnections,
                TotalConnections = (long)s.TotalConnections,
                ActiveRequests = (long)s.ActiveRequests,
                BytesRead = (long)s.BytesRead,
                BytesWritten = (long)s.BytesWritten,
                ResponsesOther = (long)s.ResponsesOther,
                HeldRequests = (long)s.HeldRequests,
            };
        }

        void CheckNotDisposed()
        {
            if (_disposed) throw new ObjectDisposedException("EmberServer");
        }

        /// <summary>Process exit: force-stop without waiting (handlers are cut off).</summary>
        internal void StopForExit()
        {
            lock (_gate) _disposed = true;
            Stop(TimeSpan.Zero);
        }

        // ---------------- events ----------------

        internal void RaiseError(Exception ex, string method, string path)
        {
            var onError = Error;
            if (onError != null)
            {
                try { onError(this, new EmberErrorEventArgs(ex, method, path)); }
                catch { }
            }
            RaiseLog(EmberLogLevel.Error,
                "handler failed" + (method != null ? " (" + method + " " + path + ")" : string.Empty) + ": " + ex.Message, ex);
        }

        internal void RaiseLog(EmberLogLevel level, string message, Exception ex)
        {
            var onLog = Log;
            if (onLog == null || (level > _options.LogLevel && level != EmberLogLevel.Access)) return;
            try { onLog(this, new EmberLogEventArgs(level, message, ex)); }
            catch { }
        }
    }
}
