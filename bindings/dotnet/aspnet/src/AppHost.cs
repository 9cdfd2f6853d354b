using System;
using System.Collections.Generic;
using System.ComponentModel;
using System.IO;
using System.Reflection;
using System.Runtime.InteropServices;
using System.Threading;
using System.Web;
using System.Web.Hosting;
using Ember.Interop;

namespace Ember.AspNet
{
    /// <summary>
    /// Lives in the ASP.NET application's domain (created by <see cref="EmberAspNetHost"/>);
    /// infrastructure, not for direct use. The server's domain calls <see cref="Process"/> once
    /// per request with two integers: the request token and the address of the engine's request
    /// info. Both mean the same in every domain of the process. By default the call is not a
    /// remoting call but a function pointer of a delegate made here (<see cref="Attach"/>,
    /// <see cref="DomainEntry"/>), so the thread's call context stays behind. The answer goes
    /// to the engine straight from this domain (<see cref="ResponseSink"/>), without a second
    /// crossing.
    /// </summary>
    [EditorBrowsable(EditorBrowsableState.Never)]
    public sealed class AppHost : MarshalByRefObject
    {
        internal const string ServerSoftware = "Ember";
        internal const string HostDirKey = "ember.hostDir";

        static readonly string[] s_defaultDocuments =
            { "Default.aspx", "default.aspx", "index.aspx", "Index.aspx", "index.html", "index.htm", "default.htm" };

        internal string VirtualPath = "/";
        internal string PhysicalPath;
        internal string LocalAddress = "127.0.0.1";
        internal int LocalPort;
        /// <summary>The server domain's abort-notice callback (AbortCell); zero = none.</summary>
        internal IntPtr AbortFn;
        DomainWatch _watch;
        long _refused;
        // The direct entry (DomainEntry): rooted here for the domain's life; the gate is the
        // server domain's native memory.
        DomainRequestFn _entry;
        IntPtr _gate;
        TimeSpan _drain;
        // The engine threads inside, for the unload event to abort after the drain time.
        readonly HashSet<Thread> _inside = new HashSet<Thread>();
        // The requests System.Web drops while this domain unloads go back (or get a 503).
        readonly Handback _handback = new Handback();

        /// <summary>The host's own 503 while the application restarts (sent with Retry-After).</summary>
        internal const string RestartedText = "Service Unavailable: the application restarted\n";

        public AppHost()
        {
            // Ember.dll and Ember.AspNet.dll are not in the application's bin folder: load them
            // from the server's folder (handed over as domain data) when this domain asks.
            AppDomain.CurrentDomain.AssemblyResolve += ResolveOwnAssemblies;
            AppDomain.CurrentDomain.DomainUnload += OnDomainUnload;
        }

        static Assembly ResolveOwnAssemblies(object sender, ResolveEventArgs e)
        {
            string name = new AssemblyName(e.Name).Name;
            if (name != "Ember" && name != "Ember.AspNet") return null;
            foreach (Assembly a in AppDomain.CurrentDomain.GetAssemblies())
            {
                if (a.GetName().Name == name) return a;
            }
            string dir = AppDomain.CurrentDomain.GetData(HostDirKey) as string;
            if (dir == null) return null;
            string file = Path.Combine(dir, name + ".dll");
            return File.Exists(file) ? Assembly.LoadFrom(file) : null;
        }

        /// <summary>The domain lives as long as the application, not a remoting lease.</summary>
        public override object InitializeLifetimeService() { return null; }

        /// <summary>Called once after the domain was created (and again when the port is known).</summary>
        public void Configure(string virtualPath, string physicalPath, string localAddress, int localPort, DomainWatch watch, long abortFn)
        {
            AbortFn = new IntPtr(abortFn);
            VirtualPath = virtualPath;
            PhysicalPath = physicalPath.EndsWith(Path.DirectorySeparatorChar.ToString(), StringComparison.Ordinal)
                ? physicalPath : physicalPath + Path.DirectorySeparatorChar;
            LocalAddress = localAddress;
            LocalPort = localPort;
            if (watch != null) _watch = watch;
        }

        /// <summary>Answers of this domain the engine refused (client gone, handler timeout).</summary>
        public long Refusals { get { return Interlocked.Read(ref _refused); } }

        internal void Refused(int rc) { Interlocked.Increment(ref _refused); }

        /// <summary>Runs one request through HttpRuntime (the remoting bridge). Never throws for
        /// the application's failures: System.Web answers those itself (500 with its error page).
        /// Returns DomainEntry.Taken, or DomainEntry.Refused: this domain is unloading and gives
        /// the request back untouched, for a fresh domain.</summary>
        public int Process(long req, long info)
        {
            return ProcessCore((ulong)req, new IntPtr(info));
        }

        /// <summary>Makes this domain's direct request entry and returns its function pointer,
        /// for the server's domain to call through <see cref="EntryGate"/> <paramref name="gate"/>
        /// (native memory). Called once, right after the domain was created. On unload, requests
        /// inside get <paramref name="drainMs"/> to finish before they are aborted.</summary>
        public long Attach(long gate, int drainMs)
        {
            _gate = new IntPtr(gate);
            _drain = TimeSpan.FromMilliseconds(drainMs);
            _entry = OnEngineRequest;
            return Marshal.GetFunctionPointerForDelegate(_entry).ToInt64();
        }

        // Engine (pool) thread, called from the server's domain, running in this one. Must
        // never throw: there is no managed caller to catch it, only the unmanaged call.
        int OnEngineRequest(ulong req, IntPtr info)
        {
            Thread me = Thread.CurrentThread;
            lock (_inside) _inside.Add(me);
            try
            {
                return ProcessCore(req, info);
            }
            catch (ThreadAbortException)
            {
                // This domain is being unloaded under the request (an application restart), or
                // the process is exiting: end the abort here, leave the domain, answer 503.
                try { Thread.ResetAbort(); } catch { }
                Answer(req, 503, RestartedText);
            }
            catch (Exception ex)
            {
                try { Console.Error.WriteLine("EmberAspNet: request failed: " + ex); } catch { }
                Answer(req, 500, "Internal Server Error\n");
            }
            finally
            {
                lock (_inside) _inside.Remove(me);
            }
            return DomainEntry.Taken;
        }

        /// <summary>Unload event: from here on no request enters; returns once every thread that
        /// entered is back in the server's domain (see DomainEntry for why).</summary>
        void DrainBeforeUnload()
        {
            EntryGate.Close(_gate);
            // A request that unloads its own domain synchronously waits for the others only.
            Thread me = Thread.CurrentThread;
            int self;
            lock (_inside) self = _inside.Contains(me) ? 1 : 0;
            var clock = System.Diagnostics.Stopwatch.StartNew();
            TimeSpan nextAbort = _drain;
            while (EntryGate.Busy(_gate) > self)
            {
                if (clock.Elapsed >= nextAbort)
                {
                    Thread[] late;
                    lock (_inside)
                    {
                        late = new Thread[_inside.Count];
                        _inside.CopyTo(late);
                    }
                    foreach (Thread t in late)
                    {
                        if (t != me) try { t.Abort(); } catch { }
                    }
                    // Again later for a thread that was in native code or entered since.
                    nextAbort = clock.Elapsed + TimeSpan.FromMilliseconds(500);
                }
                Thread.Sleep(5);
            }
        }

        /// <summary>A plain-text answer (a 503 says when to retry); fails quietly when something
        /// was answered already.</summary>
        internal static unsafe void Answer(ulong req, int status, string text)
        {
            try
            {
                byte[] body = System.Text.Encoding.UTF8.GetBytes(text);
                byte[] head = System.Text.Encoding.ASCII.GetBytes(PlainHead(status));
                fixed (byte* h = head)
                fixed (byte* b = body)
                    NativeMethods.ember_request_respond(req, (ushort)status, h, (UIntPtr)head.Length, b, (UIntPtr)body.Length);
            }
            catch { }
        }

        /// <summary>The header lines of the host's own plain-text answers.</summary>
        internal static string PlainHead(int status)
        {
            return status == 503
                ? "Content-Type: text/plain; charset=utf-8\r\nRetry-After: 1\r\n"
                : "Content-Type: text/plain; charset=utf-8\r\n";
        }

        unsafe int ProcessCore(ulong req, IntPtr info)
        {
            // System.Web of this domain would drop it (see Handback): a fresh domain takes it.
            if (Handback.Unloading) return _handback.Refuse();
            var wr = new EmberWorkerRequest(this, req, (EmberRequestInfo*)info);
            string redirect = wr.DirectoryRedirect();
            if (redirect != null)
            {
                wr.SendStatus(301, "Moved Permanently");
                wr.SendUnknownResponseHeader("Location", redirect);
                wr.FlushResponse(true);
                return DomainEntry.Taken;
            }
            try
            {
                HttpRuntime.ProcessRequest(wr);
            }
            catch (ThreadAbortException)
            {
                throw;   // the domain is being unloaded: the caller answers 503
            }
            catch (Exception ex)
            {
                // HttpRuntime itself failed (it reports application errors as pages): answer 500
                // unless something was sent already.
                if (wr.Sink.Streaming) wr.Sink.Abort();   // half an answer must not look whole
                else if (!wr.Sink.Done)
                {
                    wr.Sink.SetStatus(500);
                    wr.Sink.AddHeader("Content-Type", "text/plain; charset=utf-8");
                    byte[] m = System.Text.Encoding.UTF8.GetBytes("Internal Server Error\n");
                    wr.Sink.Write(m, 0, m.Length);
                    wr.FlushResponse(true);
                }
                Console.Error.WriteLine("EmberAspNet: HttpRuntime.ProcessRequest failed: " + ex);
                return DomainEntry.Taken;
            }
            return _handback.AfterProcess(wr);
        }

        /// <summary>The default document of a folder, or null.</summary>
        internal string DefaultDocument(string folder)
        {
            foreach (string d in s_defaultDocuments)
            {
                if (File.Exists(Path.Combine(folder, d))) return d;
            }
            return null;
        }

        internal string MapPath(string path)
        {
            string root = PhysicalPath;
            if (string.IsNullOrEmpty(path) || path == VirtualPath) return root;
            if (path.Length > 1 && path[0] == '~' && path[1] == '/') path = VirtualPath.TrimEnd('/') + path.Substring(1);
            if (VirtualPath.Length > 1 && path.StartsWith(VirtualPath, StringComparison.OrdinalIgnoreCase) &&
                (path.Length == VirtualPath.Length || path[VirtualPath.Length] == '/'))
                path = path.Substring(VirtualPath.Length);
            path = path.TrimStart('/');
            if (Path.DirectorySeparatorChar != '/') path = path.Replace('/', Path.DirectorySeparatorChar);
            return Path.Combine(root, path);
        }

        /// <summary>Ends the application (Application_End runs) and unloads its domain.</summary>
        public void Shutdown()
        {
            HttpRuntime.UnloadAppDomain();
        }

        void OnDomainUnload(object sender, EventArgs e)
        {
            // First: no request may enter or stay in a domain the runtime is about to tear down.
            if (_gate != IntPtr.Zero) DrainBeforeUnload();
            _handback.AnswerParked();
            DomainWatch w = _watch;
            if (w == null) return;
            try { w.Unloading(); } catch { }
        }
    }

    /// <summary>
    /// Lives in the server's domain; the application's domain tells it when it unloads (ASP.NET
    /// restarts an application when web.config, bin/ or Global.asax change), so the next request
    /// goes to a fresh domain. Infrastructure, not for direct use.
    /// </summary>
    [EditorBrowsable(EditorBrowsableState.Never)]
    public sealed class DomainWatch : MarshalByRefObject
    {
        volatile bool _unloaded;
        readonly ManualResetEvent _gone = new ManualResetEvent(false);

        public override object InitializeLifetimeService() { return null; }

        public bool Unloaded { get { return _unloaded; } }

        public void Unloading()
        {
            _unloaded = true;
            _gone.Set();
        }

        internal bool WaitUnloaded(TimeSpan timeout) { return _gone.WaitOne(timeout); }
    }
}
