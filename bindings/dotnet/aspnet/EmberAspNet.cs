// EmberAspNet.exe: serves a classic ASP.NET application folder with Ember.
//   mono EmberAspNet.exe --root ./site [--port 8080] [--vpath /] [--host 127.0.0.1]
// Options (all optional but --root): --dispatch auto|pool|inline, --workers N, --pool-threads N,
// --max-body BYTES, --max-header-bytes N, --max-headers N, --header-timeout MS,
// --idle-timeout MS, --handler-timeout MS, --warmup PATH (repeatable: fetched once before the
// "listening" line, so the first client does not wait for ASP.NET to compile), --quiet,
// --tls-cert FILE --tls-key FILE [--tls-port N] (a TLS listener too, HTTP/2 by ALPN; env
// EMBER_TLS_CERT / EMBER_TLS_KEY / EMBER_TLS_PORT), --access-log FILE [--access-log-format
// combined|json] (env EMBER_ACCESS_LOG / EMBER_ACCESS_LOG_FORMAT), --metrics PATH (Prometheus
// text answered by the engine, off by default: the application may own every path).
// A bare trailing number is the port too (so `... --root site 0` works like the reference apps).
// Env EMBER_DISPATCH / EMBER_WORKERS apply when the options are not given.
// The first stdout line is "listening on http://HOST:PORT", then "listening on https://HOST:PORT"
// with TLS. SIGTERM / SIGINT stop it gracefully (exit code 0); SIGHUP (Mono on Unix) reloads the
// certificate files and reopens the access log. A certificate that cannot be read
// stops it with exit code 1 and the file named.
using System;
using System.Collections.Generic;
using System.Globalization;
using System.IO;
using System.Net;
using System.Reflection;
using System.Threading;
using Ember;
using Ember.AspNet;

static class EmberAspNetMain
{
    const string Usage =
        "usage: EmberAspNet.exe --root DIR [--port N] [--vpath /] [--host ADDR] [--dispatch auto|pool|inline]\n" +
        "       [--workers N] [--pool-threads N] [--max-body BYTES] [--max-header-bytes N] [--max-headers N]\n" +
        "       [--header-timeout MS] [--idle-timeout MS] [--handler-timeout MS] [--warmup PATH]... [--quiet]\n" +
        "       [--tls-cert FILE --tls-key FILE [--tls-port N]] [--access-log FILE [--access-log-format combined|json]]\n" +
        "       [--metrics PATH] [PORT]";

    static int Main(string[] args)
    {
        string root = null, vpath = "/";
        int port = 8080;
        bool quiet = false;
        var warmups = new List<string>();
        var o = new EmberOptions { LogLevel = EmberLogLevel.Info };
        string dispatch = Environment.GetEnvironmentVariable("EMBER_DISPATCH");
        string workers = Environment.GetEnvironmentVariable("EMBER_WORKERS");
        string tlsCert = Environment.GetEnvironmentVariable("EMBER_TLS_CERT");
        string tlsKey = Environment.GetEnvironmentVariable("EMBER_TLS_KEY");
        string tlsPort = Environment.GetEnvironmentVariable("EMBER_TLS_PORT");
        string accessLog = Environment.GetEnvironmentVariable("EMBER_ACCESS_LOG");
        string accessFormat = Environment.GetEnvironmentVariable("EMBER_ACCESS_LOG_FORMAT");
        try
        {
            for (int i = 0; i < args.Length; i++)
            {
                string a = args[i];
                Func<string> next = () =>
                {
                    if (i + 1 >= args.Length) throw new ArgumentException(a + " needs a value");
                    return args[++i];
                };
                switch (a)
                {
                    case "--root": root = next(); break;
                    case "--port": port = Int(next(), 0, 65535, a); break;
                    case "--vpath": vpath = next(); break;
                    case "--host": o.Host = next(); break;
                    case "--dispatch": dispatch = next(); break;
                    case "--workers": workers = next(); break;
                    case "--pool-threads": o.PoolThreads = Int(next(), 0, 4096, a); break;
                    case "--max-body": o.MaxBodyBytes = Long(next(), a); break;
                    case "--max-header-bytes": o.MaxHeaderBytes = Int(next(), 0, int.MaxValue, a); break;
                    case "--max-headers": o.MaxHeaders = Int(next(), 0, int.MaxValue, a); break;
                    case "--header-timeout": o.HeaderTimeout = TimeSpan.FromMilliseconds(Long(next(), a)); break;
                    case "--idle-timeout": o.IdleTimeout = TimeSpan.FromMilliseconds(Long(next(), a)); break;
                    case "--handler-timeout": o.HandlerTimeout = TimeSpan.FromMilliseconds(Long(next(), a)); break;
                    case "--warmup": warmups.Add(next()); break;
                    case "--quiet": quiet = true; break;
                    case "--tls-cert": tlsCert = next(); break;
                    case "--tls-key": tlsKey = next(); break;
                    case "--tls-port": tlsPort = next(); break;
                    case "--access-log": accessLog = next(); break;
                    case "--access-log-format": accessFormat = next(); break;
                    case "--metrics": o.MetricsPath = next(); break;
                    case "-h": case "--help": Console.WriteLine(Usage); return 0;
                    default:
                        if (a.Length > 0 && char.IsDigit(a[0]) && i == args.Length - 1) { port = Int(a, 0, 65535, "port"); break; }
                        throw new ArgumentException("unknown argument " + a);
                }
            }
            if (root == null) throw new ArgumentException("--root is required");
            if (dispatch == "inline") o.Dispatch = EmberDispatch.Inline;
            else if (dispatch == "pool") o.Dispatch = EmberDispatch.Pool;
            else if (dispatch != null && dispatch != "auto") throw new ArgumentException("--dispatch must be auto, pool or inline");
            if (workers != null) o.Workers = Int(workers, 0, 1024, "workers");
            if (!string.IsNullOrEmpty(accessLog)) o.AccessLogPath = accessLog;
            if (accessFormat == "json") o.AccessLogFormat = EmberAccessLogFormat.Json;
            else if (!string.IsNullOrEmpty(accessFormat) && accessFormat != "combined")
                throw new ArgumentException("--access-log-format must be combined or json");
            if (string.IsNullOrEmpty(tlsCert) != string.IsNullOrEmpty(tlsKey))
                throw new ArgumentException("--tls-cert and --tls-key go together");
            if (!string.IsNullOrEmpty(tlsCert))
            {
                int tp = string.IsNullOrEmpty(tlsPort) ? 0 : Int(tlsPort, 0, 65535, "--tls-port");
                string addr = (o.Host.IndexOf(':') >= 0 ? "[" + o.Host + "]" : o.Host) + ":" + tp;
                try { o.TlsListeners.Add(new EmberTlsListener(addr, new EmberTlsConfig(tlsCert, tlsKey))); }
                catch (EmberException e)
                {
                    // The message names the file that could not be used.
                    Console.Error.WriteLine("EmberAspNet: " + e.Message);
                    return 1;
                }
            }
        }
        catch (ArgumentException e)
        {
            Console.Error.WriteLine("EmberAspNet: " + e.Message);
            Console.Error.WriteLine(Usage);
            return 2;
        }

        Func<string> waitForStop = InstallStopSignals();
        EmberAspNetHost host;
        try
        {
            host = new EmberAspNetHost(root, vpath, o);
        }
        catch (Exception e) when (e is ArgumentException || e is IOException)
        {
            Console.Error.WriteLine("EmberAspNet: " + e.Message);
            return 2;
        }
        using (host)
        {
            if (!quiet) host.Server.Log += (s, e) => Console.Error.WriteLine("ember [" + e.Level.ToString().ToLowerInvariant() + "] " + e.Message);
            host.Server.Error += (s, e) => Console.Error.WriteLine("EmberAspNet: request failed: " + e.Exception);
            int bound;
            try
            {
                bound = host.Start(port);
            }
            catch (EmberException e)
            {
                Console.Error.WriteLine("EmberAspNet: " + e.Message);
                return 1;
            }
            string shown = o.Host.IndexOf(':') >= 0 ? "[" + o.Host + "]" : o.Host;
            if (shown == "0.0.0.0") shown = "127.0.0.1";
            foreach (string w in warmups) Warm("http://" + shown + ":" + bound + w);
            Console.Out.WriteLine("listening on http://" + shown + ":" + bound);
            if (o.TlsListeners.Count > 0) Console.Out.WriteLine("listening on https://" + shown + ":" + host.Server.TlsPorts[0]);
            Console.Out.Flush();
            if (!quiet) Console.Error.WriteLine("EmberAspNet: serving " + host.PhysicalPath + " at " + host.VirtualPath);
            EmberServer server = host.Server;
            OnSighup(() =>
            {
                // Renewed certificates and logrotate: neither needs a restart.
                try
                {
                    if (server.TlsPorts.Count > 0) server.ReloadTls();
                    if (o.AccessLogPath != null) server.ReopenAccessLog();
                }
                catch (Exception e) { Console.Error.WriteLine("EmberAspNet: SIGHUP: " + e.Message); }
            });

            string why = waitForStop();
            Console.Error.WriteLine("EmberAspNet: " + why + ", stopping");
            host.Stop(TimeSpan.FromSeconds(5));
        }
        return 0;
    }

    /// <summary>One GET, so ASP.NET compiles what the path needs before clients come.</summary>
    static void Warm(string url)
    {
        try
        {
            var req = (HttpWebRequest)WebRequest.Create(url);
            req.Timeout = 120000;
            req.AllowAutoRedirect = false;
            using (var resp = (HttpWebResponse)req.GetResponse()) { }
        }
        catch (WebException e)
        {
            var r = e.Response as HttpWebResponse;
            Console.Error.WriteLine("EmberAspNet: warm-up " + url + ": " + (r != null ? ((int)r.StatusCode).ToString() : e.Message));
            if (r != null) r.Close();
        }
    }

    static int Int(string s, int min, int max, string what)
    {
        int v;
        if (!int.TryParse(s, NumberStyles.None, CultureInfo.InvariantCulture, out v) || v < min || v > max)
            throw new ArgumentException(what + " must be a number " + min + ".." + max);
        return v;
    }

    static long Long(string s, string what)
    {
        long v;
        if (!long.TryParse(s, NumberStyles.None, CultureInfo.InvariantCulture, out v))
            throw new ArgumentException(what + " must be a non-negative number");
        return v;
    }

    /// <summary>Runs <paramref name="action"/> on each SIGHUP (Mono on Unix; nothing elsewhere).</summary>
    static void OnSighup(Action action)
    {
        const string posix = ", Mono.Posix, Version=4.0.0.0, Culture=neutral, PublicKeyToken=0738eb9f132ed756";
        Type unixSignal = Type.GetType("Mono.Unix.UnixSignal" + posix, false);
        Type signum = Type.GetType("Mono.Unix.Native.Signum" + posix, false);
        if (unixSignal == null || signum == null) return;
        object hup = Activator.CreateInstance(unixSignal, Enum.Parse(signum, "SIGHUP"));
        MethodInfo wait = unixSignal.GetMethod("WaitOne", Type.EmptyTypes);
        MethodInfo reset = unixSignal.GetMethod("Reset", Type.EmptyTypes);
        var t = new Thread(() =>
        {
            for (;;)
            {
                wait.Invoke(hup, null);
                reset.Invoke(hup, null);
                action();
            }
        });
        t.IsBackground = true;
        t.Start();
    }

    /// <summary>SIGTERM / SIGINT under Mono (Mono.Posix through reflection), Ctrl+C elsewhere.</summary>
    static Func<string> InstallStopSignals()
    {
        var stop = new ManualResetEvent(false);
        string why = "stop requested";
        const string posix = ", Mono.Posix, Version=4.0.0.0, Culture=neutral, PublicKeyToken=0738eb9f132ed756";
        Type unixSignal = Type.GetType("Mono.Unix.UnixSignal" + posix, false);
        Type signum = Type.GetType("Mono.Unix.Native.Signum" + posix, false);
        if (unixSignal != null && signum != null)
        {
            Array signals = Array.CreateInstance(unixSignal, 2);
            signals.SetValue(Activator.CreateInstance(unixSignal, Enum.Parse(signum, "SIGTERM")), 0);
            signals.SetValue(Activator.CreateInstance(unixSignal, Enum.Parse(signum, "SIGINT")), 1);
            MethodInfo waitAny = unixSignal.GetMethod("WaitAny", new[] { signals.GetType() });
            var t = new Thread(() =>
            {
                int i = (int)waitAny.Invoke(null, new object[] { signals });
                why = i == 0 ? "SIGTERM" : "SIGINT";
                stop.Set();
            });
            t.IsBackground = true;
            t.Start();
        }
        else
        {
            Console.CancelKeyPress += (s, e) => { e.Cancel = true; why = "Ctrl+C"; stop.Set(); };
        }
        return () => { stop.WaitOne(); return why; };
    }
}
