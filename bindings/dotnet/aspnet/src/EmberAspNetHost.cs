using System;
using System.IO;
using System.Runtime.Remoting;
using System.Threading;
using Ember.Interop;

namespace Ember.AspNet
{
    /// <summary>
    /// Serves a classic ASP.NET application folder (.aspx, .ashx, Global.asax, web.config, bin/)
    /// with Ember: each request goes to HttpRuntime.ProcessRequest in the application's own
    /// domain through Ember's HttpWorkerRequest.
    /// <code>
    /// using (var host = new EmberAspNetHost("/srv/site"))
    /// {
    ///     int port = host.Start(8080);
    ///     Console.ReadLine();
    /// }
    /// </code>
    /// The engine calls back in this (the server's) domain, which calls the application's
    /// domain through a function pointer made there (DomainEntry: no remoting, so the call
    /// context System.Web fills is never serialized); that domain answers the engine directly.
    /// When ASP.NET restarts the application (web.config, bin/ or Global.asax changed), the
    /// next request creates a fresh domain.
    /// </summary>
    public sealed class EmberAspNetHost : IDisposable
    {
        readonly object _gate = new object();
        readonly EmberServer _server;
        readonly string _virtualPath, _physicalPath;
        Generation _current;
        int _generations;
        bool _inlineRefused;
        string _localAddress = "127.0.0.1";
        int _localPort;

        sealed class Generation
        {
            internal AppHost Host;
            internal AppDomain Domain;
            internal DomainWatch Watch;
            internal IntPtr Entry;   // the domain's DomainRequestFn; zero = remoting bridge
            internal IntPtr Gate;    // its EntryGate
        }

        public EmberAspNetHost(string physicalPath) : this(physicalPath, "/", new EmberOptions()) { }

        /// <param name="physicalPath">The application folder (with web.config, bin/ ...).</param>
        /// <param name="virtualPath">Where it is mounted, "/" or e.g. "/shop".</param>
        /// <param name="options">Engine options (limits, listen address ...). System.Web blocks
        /// the thread that runs a request, so it always gets a pool thread: under Auto (the
        /// default) its routes carry EMBER_ROUTE_POOL; Inline is replaced by Pool, with a warning
        /// in the Log.</param>
        public EmberAspNetHost(string physicalPath, string virtualPath, EmberOptions options)
        {
            if (physicalPath == null) throw new ArgumentNullException("physicalPath");
            if (!Directory.Exists(physicalPath)) throw new DirectoryNotFoundException("no such application folder: " + physicalPath);
            if (string.IsNullOrEmpty(virtualPath) || virtualPath[0] != '/') throw new ArgumentException("the virtual path must start with '/'", "virtualPath");
            if (virtualPath.Length > 1) virtualPath = virtualPath.TrimEnd('/');
            _physicalPath = Path.GetFullPath(physicalPath);
            _virtualPath = virtualPath;
            options = options ?? new EmberOptions();
            if (options.Dispatch == EmberDispatch.Inline)
            {
                // HttpRuntime.ProcessRequest runs the whole pipeline on the calling thread and
                // blocks it (async handlers, session locks): on an I/O thread that stalls every
                // connection of that thread. System.Web always gets the pool.
                options.Dispatch = EmberDispatch.Pool;
                _inlineRefused = true;
            }
            // POST, PUT ... bodies are streamed to System.Web (ReadEntityBody reads from the
            // client as it sends); the body limit stays the one limit for every request.
            if (!options.MaxStreamBodyBytes.HasValue) options.MaxStreamBodyBytes = options.MaxBodyBytes ?? DefaultMaxBody;
            _server = new EmberServer(options);
            if (virtualPath == "/")
            {
                _server.MapRawAllMethods("/", OnRequest);
                _server.MapRawAllMethods("/{*path}", OnRequest);
            }
            else
            {
                _server.MapRawAllMethods(virtualPath, OnRequest);
                _server.MapRawAllMethods(virtualPath + "/", OnRequest);   // the catch-all needs a non-empty rest
                _server.MapRawAllMethods(virtualPath + "/{*path}", OnRequest);
            }
        }

        /// <summary>The engine's default body limit (EMBER_LIMIT_MAX_BODY_BYTES), also used for
        /// streamed bodies here unless MaxStreamBodyBytes is set.</summary>
        const long DefaultMaxBody = 16L << 20;

        /// <summary>The abort-notice callback of THIS (the server's) domain, for the application's
        /// domain (see AbortCell): it outlives every application domain.</summary>
        static readonly long s_abortFn = AbortCell.FunctionPointer.ToInt64();

        /// <summary>The Ember server underneath (options, stats, Log and Error events).</summary>
        public EmberServer Server { get { return _server; } }

        public string PhysicalPath { get { return _physicalPath; } }
        public string VirtualPath { get { return _virtualPath; } }

        /// <summary>Application domains created so far (1 after the first start; +1 per restart).</summary>
        public int DomainGenerations { get { return Volatile.Read(ref _generations); } }

        /// <summary>Creates the application's domain and listens on Options.Host:port (0 = a free
        /// port); returns the bound port. A broken web.config shows up on the first request as
        /// ASP.NET's error page, like under IIS.</summary>
        public int Start(int port)
        {
            WarnInline();
            Current();
            int bound = _server.Start(port);
            SetEndPoint(_server.Options.Host ?? "127.0.0.1", bound);
            return bound;
        }

        /// <summary>Listens on Options.ListenAddresses.</summary>
        public void Start()
        {
            WarnInline();
            Current();
            _server.Start();
            SetEndPoint(_server.Options.Host ?? "127.0.0.1", _server.Port);
        }

        void WarnInline()
        {
            if (_inlineRefused)
                _server.RaiseLog(EmberLogLevel.Warn, "System.Web blocks the thread that runs a request: using Pool dispatch, not Inline", null);
        }

        void SetEndPoint(string host, int port)
        {
            if (host == "0.0.0.0" || host == "::" || host == "[::]") host = "127.0.0.1";
            lock (_gate)
            {
                _localAddress = host.Trim('[', ']');
                _localPort = port;
                if (_current != null) _current.Host.Configure(_virtualPath, _physicalPath, _localAddress, _localPort, null, s_abortFn);
            }
        }

        /// <summary>Stops the server gracefully (in-flight requests finish for up to timeout),
        /// then ends the application (Application_End) and unloads its domain.</summary>
        public void Stop(TimeSpan timeout)
        {
            _server.Stop(timeout);
            Generation g;
            lock (_gate)
            {
                g = _current;
                _current = null;
            }
            if (g == null) return;
            try
            {
                g.Host.Shutdown();
                if (!g.Watch.WaitUnloaded(TimeSpan.FromSeconds(10)) && g.Domain != null) AppDomain.Unload(g.Domain);
            }
            catch (AppDomainUnloadedException) { }
            catch (RemotingException) { }
            catch (CannotUnloadAppDomainException) { }
        }

        public void Dispose()
        {
            Stop(_server.Options.DisposeTimeout);
            _server.Dispose();
        }

        /// <summary>The live application domain, created on first use and after a restart.</summary>
        AppHost Current() { return CurrentGeneration().Host; }

        Generation CurrentGeneration()
        {
            Generation g = Volatile.Read(ref _current);
            if (g != null && !g.Watch.Unloaded) return g;
            lock (_gate)
            {
                g = _current;
                if (g != null && !g.Watch.Unloaded) return g;
                var watch = new DomainWatch();
                AppDomain domain;
                AppHost host = AppDomainFactory.Create(_virtualPath, _physicalPath, out domain);
                host.Configure(_virtualPath, _physicalPath, _localAddress, _localPort, watch, s_abortFn);
                g = new Generation { Host = host, Domain = domain, Watch = watch };
                if (DomainEntry.Direct)
                {
                    g.Gate = EntryGate.Create();
                    TimeSpan drain = _server.Options.HandlerTimeout ?? TimeSpan.FromSeconds(30);
                    if (drain <= TimeSpan.Zero || drain > TimeSpan.FromSeconds(90)) drain = TimeSpan.FromSeconds(90);
                    g.Entry = new IntPtr(host.Attach(g.Gate.ToInt64(), (int)drain.TotalMilliseconds));
                }
                Volatile.Write(ref _current, g);
                int n = Interlocked.Increment(ref _generations);
                if (n > 1) _server.RaiseLog(EmberLogLevel.Info, "ASP.NET application restarted (domain generation " + n + ")", null);
                return g;
            }
        }

        // Engine thread, server's domain.
        void OnRequest(ulong req, IntPtr info)
        {
            for (int attempt = 0; ; attempt++)
            {
                Generation g;
                try
                {
                    g = CurrentGeneration();
                }
                catch (Exception ex)
                {
                    _server.RaiseError(ex, null, null);
                    Answer(req, 500, "Internal Server Error: the ASP.NET application could not be started\n");
                    return;
                }
                int outcome;
                if (g.Entry != IntPtr.Zero)
                {
                    // The direct bridge: the application's domain answers (503 itself if it is
                    // unloaded under the request) and never throws back.
                    if (EntryGate.TryEnter(g.Gate))
                    {
                        try { outcome = DomainEntry.Call(g.Entry, req, info); }
                        finally { EntryGate.Leave(g.Gate); }
                    }
                    else outcome = DomainEntry.Refused;   // closed: the domain is unloading
                }
                else
                {
                    try
                    {
                        outcome = g.Host.Process((long)req, info.ToInt64());
                    }
                    catch (ThreadAbortException)
                    {
                        // The application's domain was unloaded under this request (a restart).
                        if (!ShutdownHook.ProcessExiting) Thread.ResetAbort();
                        Answer(req, 503, AppHost.RestartedText);
                        return;
                    }
                    catch (Exception ex) when (ex is AppDomainUnloadedException || ex is RemotingException)
                    {
                        outcome = DomainEntry.Refused;   // the domain went away between requests
                    }
                }
                if (outcome == DomainEntry.Taken) return;
                // The domain is unloading (ASP.NET restarts the application) and gave the request
                // back untouched: a fresh domain, created now, takes it, once. The old one may
                // still be running Application_End meanwhile.
                MarkUnloaded(g.Host);
                if (attempt == 0) continue;
                Answer(req, 503, AppHost.RestartedText);
                return;
            }
        }

        void MarkUnloaded(AppHost host)
        {
            lock (_gate)
            {
                if (_current != null && ReferenceEquals(_current.Host, host)) _current.Watch.Unloading();
            }
        }

        static unsafe void Answer(ulong req, int status, string text)
        {
            byte[] body = System.Text.Encoding.UTF8.GetBytes(text);
            byte[] head = System.Text.Encoding.ASCII.GetBytes(AppHost.PlainHead(status));
            fixed (byte* h = head)
            fixed (byte* b = body)
                NativeMethods.ember_request_respond(req, (ushort)status, h, (UIntPtr)head.Length, b, (UIntPtr)body.Length);
        }
    }
}
