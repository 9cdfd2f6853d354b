using System;
using System.Collections.Generic;
using System.Threading;
using System.Threading.Tasks;
using Ember.Interop;

namespace Ember
{
    using AppFunc = Func<IDictionary<string, object>, Task>;

    /// <summary>
    /// Ember as an OWIN 1.0 server: every request under the mount point is handed to an OWIN
    /// application (Func&lt;IDictionary&lt;string, object&gt;, Task&gt;) with the owin.* request and
    /// response keys, owin.CallCancelled and the server.* / host.* keys. No package needed.
    /// <code>
    /// AppFunc app = env => { ... };
    /// using (var server = new EmberOwinServer(app))
    /// {
    ///     int port = server.Start(8080);
    ///     Console.ReadLine();
    /// }
    /// </code>
    /// To mix OWIN with Ember's own routes, use <see cref="OwinExtensions.MapOwin"/> on an
    /// <see cref="EmberServer"/>. Katana's hosting (WebApp.Start with ServerFactory = "Ember")
    /// finds <see cref="OwinServerFactory"/>.
    /// </summary>
    public sealed class EmberOwinServer : IDisposable
    {
        readonly EmberServer _server;

        /// <param name="app">The OWIN application (the end of your middleware chain).</param>
        /// <param name="options">Engine options; null for defaults.</param>
        /// <param name="pathBase">Mount point ("" = everything, or e.g. "/api"); it becomes
        /// owin.RequestPathBase and is cut from owin.RequestPath.</param>
        public EmberOwinServer(AppFunc app, EmberOptions options = null, string pathBase = "")
        {
            _server = new EmberServer(options ?? new EmberOptions());
            _server.MapOwin(pathBase, app);
        }

        /// <summary>The Ember server underneath (options, stats, events, more routes).</summary>
        public EmberServer Server { get { return _server; } }

        public int Start(int port) { return _server.Start(port); }
        public void Start() { _server.Start(); }
        public void Stop(TimeSpan timeout) { _server.Stop(timeout); }
        public void Dispose() { _server.Dispose(); }
    }

    public static class OwinExtensions
    {
        /// <summary>
        /// Hands every request under <paramref name="pathBase"/> ("" or "/" = all) to an OWIN
        /// application. Map before Start. Returns the server for chaining.
        /// </summary>
        public static EmberServer MapOwin(this EmberServer server, string pathBase, AppFunc app)
        {
            if (server == null) throw new ArgumentNullException("server");
            if (app == null) throw new ArgumentNullException("app");
            pathBase = (pathBase ?? string.Empty).TrimEnd('/');
            if (pathBase.Length > 0 && pathBase[0] != '/') throw new ArgumentException("pathBase must start with '/'", "pathBase");
            var host = new OwinHost(server, app, pathBase);
            server.MapRawAllMethods(pathBase.Length == 0 ? "/" : pathBase, host.OnRequest);
            if (pathBase.Length > 0) server.MapRawAllMethods(pathBase + "/", host.OnRequest);   // the catch-all needs a non-empty rest
            server.MapRawAllMethods(pathBase + "/{*path}", host.OnRequest);
            return server;
        }
    }

    /// <summary>One mounted OWIN application: builds the environment, runs the app, answers.</summary>
    internal sealed unsafe class OwinHost
    {
        readonly EmberServer _server;
        readonly AppFunc _app;
        readonly string _pathBase;
        CancellationTokenSource _disposing = new CancellationTokenSource();
        static readonly IDictionary<string, object> s_capabilities = new Dictionary<string, object>
        {
            { "server.Name", "Ember" },
            { "owin.Version", "1.0" },
        };

        internal OwinHost(EmberServer server, AppFunc app, string pathBase)
        {
            _server = server;
            _app = app;
            _pathBase = pathBase;
            server.Stopping += OnStopping;
        }

        void OnStopping()
        {
            // A stopped server may start again: the next run gets a fresh token.
            CancellationTokenSource old = Interlocked.Exchange(ref _disposing, new CancellationTokenSource());
            try { old.Cancel(); } catch (AggregateException ex) { _server.RaiseError(ex, null, null); }
        }

        /// <summary>host.OnAppDisposing is cancelled when the server stops (owin.CallCancelled too,
        /// and also when the client leaves or the handler timeout answers).</summary>
        internal CancellationToken Disposing { get { return Volatile.Read(ref _disposing).Token; } }

        internal void OnRequest(ulong req, IntPtr infoPtr)
        {
            var info = (EmberRequestInfo*)infoPtr;
            var call = new OwinCall(req, _server);
            IDictionary<string, object> env;
            try
            {
                env = call.Build(info, _pathBase, Disposing, s_capabilities);
            }
            catch (Exception ex)
            {
                call.Fail(ex);
                return;
            }
            Task t;
            try
            {
                t = _app(env);
            }
            catch (Exception ex)
            {
                call.Fail(ex);
                return;
            }
            if (t == null || t.IsCompleted) { call.Complete(t); return; }
            t.ContinueWith(s_complete, call, CancellationToken.None, TaskContinuationOptions.ExecuteSynchronously, TaskScheduler.Default);
        }

        static readonly Action<Task, object> s_complete = (t, state) => ((OwinCall)state).Complete(t);
    }
}
