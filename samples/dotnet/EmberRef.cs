// The Ember reference app for .NET (contract: tests/REFERENCE_APP.md). This file: setup and the
// request/response routes; the streaming and WebSocket routes are in EmberRefStreaming.cs.
// Usage: mono EmberRef.exe [port]   (default 8080; 0 picks a free port and prints it)
// Env: EMBER_DISPATCH=auto|inline|pool (default auto), EMBER_WORKERS=N (default 0 = cores).
// EMBER_REF_GC_PRESSURE=<KiB> (default 0): garbage allocated per request (EmberRefPressure.cs).
// Stops gracefully on SIGTERM / SIGINT (Ctrl+C) with exit code 0.
// Env EMBER_TLS_CERT + EMBER_TLS_KEY (PEM files): also listen with TLS on EMBER_TLS_PORT (default 0);
// EMBER_ACCESS_LOG=<file> (EMBER_ACCESS_LOG_FORMAT=combined|json). /metrics is the engine's.
// SIGHUP (Mono) reloads the certificates and reopens the access log.
using System;
using System.Collections.Generic;
using System.Globalization;
using System.Reflection;
using System.Text;
using System.Threading;
using System.Threading.Tasks;
using Ember;

static partial class EmberRef
{
    static readonly byte[] HelloBody = Encoding.UTF8.GetBytes("{\"code\": 1, \"msg\": \"Hello WebAPI\"}");
    const string Json = "application/json";
    const int SlowMaxMs = 600000;

    static int Main(string[] args)
    {
        int port = 8080;
        if (args.Length > 1 || (args.Length == 1 && !TryParse(args[0], 65535, out port)))
        {
            Console.Error.WriteLine("usage: EmberRef.exe [port]");
            return 2;
        }
        var options = new EmberOptions
        {
            MaxBodyBytes = 1048576,
            HeaderTimeout = TimeSpan.FromMilliseconds(1000),
            IdleTimeout = TimeSpan.FromMilliseconds(5000),
            HandlerTimeout = TimeSpan.FromMilliseconds(3000),
            MaxHeaderBytes = 16384,
            MaxHeaders = 100,
            MaxStreamBodyBytes = 4294967296,
            // /ws echo: a client that reads its echoes late may have this much waiting for a
            // send that awaits room before the session closes it with 1008 (the contract asks
            // for at least 4 MiB).
            WebSocketReceiveQueueBytes = 4 << 20,
            LogLevel = EmberLogLevel.Info,
            MetricsPath = "/metrics",
            AccessLogPath = NonEmpty(Environment.GetEnvironmentVariable("EMBER_ACCESS_LOG")),
            AccessLogFormat = Environment.GetEnvironmentVariable("EMBER_ACCESS_LOG_FORMAT") == "json"
                ? EmberAccessLogFormat.Json : EmberAccessLogFormat.Combined,
        };
        string dispatch = Environment.GetEnvironmentVariable("EMBER_DISPATCH");
        if (dispatch == "inline") options.Dispatch = EmberDispatch.Inline;
        else if (dispatch == "pool") options.Dispatch = EmberDispatch.Pool;
        else if (dispatch != null && dispatch != "auto")
        {
            Console.Error.WriteLine("EMBER_DISPATCH must be inline, pool or auto");
            return 2;
        }
        string workers = Environment.GetEnvironmentVariable("EMBER_WORKERS");
        if (workers != null)
        {
            int w;
            if (!TryParse(workers, 1024, out w)) { Console.Error.WriteLine("EMBER_WORKERS must be 0..1024"); return 2; }
            options.Workers = w;
        }

        // Behind a load balancer (tests/REFERENCE_APP.md): the engine's health path, the
        // proxies allowed to name the client, and how long to drain on SIGTERM.
        options.HealthPath = NonEmpty(Environment.GetEnvironmentVariable("EMBER_HEALTH_PATH"));
        foreach (string cidr in (Environment.GetEnvironmentVariable("EMBER_TRUSTED_PROXIES") ?? "").Split(','))
            if (cidr.Length > 0) options.TrustedProxies.Add(cidr);
        int drainMs = 0, refuseMs = 0;
        string drain = Environment.GetEnvironmentVariable("EMBER_DRAIN_MS");
        string refuse = Environment.GetEnvironmentVariable("EMBER_REFUSE_MS");
        if ((drain != null && !TryParse(drain, 600000, out drainMs)) || (refuse != null && !TryParse(refuse, 600000, out refuseMs)))
        {
            Console.Error.WriteLine("EMBER_DRAIN_MS and EMBER_REFUSE_MS must be 0..600000");
            return 2;
        }

        // Signal handlers go in before the port is announced: a SIGTERM right after the
        // "listening" line must already stop us gracefully.
        var stopSignals = new EmberStopSignals();
        using (var server = new EmberServer(options))
        {
            server.Log += (s, e) => Console.Error.WriteLine("ember [" + e.Level.ToString().ToLowerInvariant() + "] " + e.Message);
            Map(server);
            int bound;
            try
            {
                AddTls(options);
                bound = server.Start(port);
            }
            catch (Exception e) when (e is EmberException || e is ArgumentException)
            {
                Console.Error.WriteLine("EmberRef: " + e.Message);
                return 1;
            }
            Console.Out.WriteLine("listening on http://127.0.0.1:" + bound);
            foreach (int tlsPort in server.TlsPorts) Console.Out.WriteLine("listening on https://127.0.0.1:" + tlsPort);
            Console.Out.Flush();
            OnSighup(() =>
            {
                try
                {
                    if (server.TlsPorts.Count > 0) server.ReloadTls();
                    if (options.AccessLogPath != null) server.ReopenAccessLog();
                }
                catch (Exception e) { Console.Error.WriteLine("EmberRef: SIGHUP: " + e.Message); }
            });

            // SIGTERM: drain for EMBER_DRAIN_MS, refuse new connections for EMBER_REFUSE_MS (each
            // if set), then stop with 5 s for what is in flight.
            string why = server.RunUntilSignal(stopSignals, TimeSpan.FromMilliseconds(drainMs),
                TimeSpan.FromMilliseconds(refuseMs), TimeSpan.FromSeconds(5));
            Console.Error.WriteLine("EmberRef: " + why + ", stopped");
        }
        return 0;
    }

    static string NonEmpty(string s) { return string.IsNullOrEmpty(s) ? null : s; }

    /// <summary>The optional TLS listener of the contract, from EMBER_TLS_CERT / EMBER_TLS_KEY.</summary>
    static void AddTls(EmberOptions options)
    {
        string cert = NonEmpty(Environment.GetEnvironmentVariable("EMBER_TLS_CERT"));
        string key = NonEmpty(Environment.GetEnvironmentVariable("EMBER_TLS_KEY"));
        if (cert == null || key == null) return;
        int tlsPort = 0;
        string p = Environment.GetEnvironmentVariable("EMBER_TLS_PORT");
        if (p != null && !TryParse(p, 65535, out tlsPort)) throw new ArgumentException("EMBER_TLS_PORT must be 0..65535");
        options.TlsListeners.Add(new EmberTlsListener("127.0.0.1:" + tlsPort, new EmberTlsConfig(cert, key)));
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

    static void Map(EmberServer server)
    {
        // Prepared once in the engine: each GET / is then one short engine call (EmberAnswer).
        var hello = new EmberAnswer(200, Json, HelloBody);
        server.MapGet("/", ctx => { Pressure(); ctx.Response.Answer(hello); });

        server.MapGet("/users/{id}", ctx =>
        {
            Pressure();
            ctx.Response.Json("{\"id\": " + Quote(ctx.Request.GetRouteValue("id")) + "}");
        });

        server.MapPost("/echo", ctx =>
        {
            Pressure();
            ctx.Response.Bytes(ctx.Request.Body, ctx.Request.ContentType ?? "application/octet-stream");
        });

        server.MapGet("/inspect", ctx =>
        {
            Pressure();
            EmberRequest r = ctx.Request;
            var sb = new StringBuilder(512);
            sb.Append("{\"method\": ").Append(Quote(r.Method));
            sb.Append(", \"path\": ").Append(Quote(r.Path));
            sb.Append(", \"query\": ").Append(Quote(r.RawQuery));
            sb.Append(", \"headers\": {");
            // One member per name, repeated values joined with ", " in arrival order.
            var order = new List<string>();
            var joined = new Dictionary<string, string>(StringComparer.Ordinal);
            foreach (KeyValuePair<string, string> h in r.HeaderList)
            {
                string prev;
                if (joined.TryGetValue(h.Key, out prev)) joined[h.Key] = prev + ", " + h.Value;
                else { joined[h.Key] = h.Value; order.Add(h.Key); }
            }
            for (int i = 0; i < order.Count; i++)
            {
                if (i > 0) sb.Append(", ");
                sb.Append(Quote(order[i])).Append(": ").Append(Quote(joined[order[i]]));
            }
            sb.Append("}, \"remote_addr\": ").Append(Quote(r.RemoteAddress)).Append('}');
            ctx.Response.Json(sb.ToString());
        });

        // Returns at its first await without answering; a timer thread answers later.
        server.MapGet("/slow", async ctx =>
        {
            int ms;
            if (!TryParse(ctx.Request.Query["ms"], SlowMaxMs, out ms))
            {
                ctx.Response.Json("{\"error\": \"expected ms=0..600000\"}", 400);
                return;
            }
            if (ms > 0) await Task.Delay(ms).ConfigureAwait(false);
            ctx.Response.Json("{\"slept_ms\": " + ms.ToString(CultureInfo.InvariantCulture) + "}");
        });

        // Throws: the binding answers 500, raises Error/Log, and the server keeps serving.
        server.MapGet("/fail", ctx =>
        {
            Pressure();
            throw new InvalidOperationException("this handler always fails");
        });

        MapStreaming(server);   // /sse, /stream, /upload, /ws, /ws/chat: EmberRefStreaming.cs
        MapEngineFeatures(server);
    }

    static int s_cachedCalls;

    /// <summary>Static files, compression, the output cache, CORS and filtering: the engine's
    /// (tests/REFERENCE_APP.md); only /cached, /cache/purge and /api/ping reach .NET.</summary>
    static void MapEngineFeatures(EmberServer server)
    {
        string www = Environment.GetEnvironmentVariable("EMBER_WWW");
        if (string.IsNullOrEmpty(www)) www = "samples/www";
        server.MapStatic("/static", www, new EmberStaticOptions { CacheControl = "public, max-age=60" });
        // The same folder as a single-page app: paths that name no file get index.html.
        server.MapStatic("/app", www, new EmberStaticOptions { Precompressed = false, SpaFallback = true, CacheControl = "no-cache" });
        server.UseCompression(gzip: true, brotli: true, minBytes: 1024, zstd: true);
        server.CompressionForPath("/echo", false);
        server.UseOutputCache(64L << 20);
        server.UseCors("/api", new EmberCorsPolicy
        {
            Origins = "https://app.example",
            Methods = "GET, POST",
            Headers = "Content-Type, X-Api-Key",
            ExposeHeaders = "X-Api-Version",
            MaxAge = TimeSpan.FromSeconds(600),
        });
        server.DenyIp("127.0.0.2");
        server.MaxUrlBytes(8192);
        server.AllowMethods("GET, HEAD, POST, PUT, DELETE, PATCH, OPTIONS");
        server.DenyPath("*.bak");
        server.DenyPath("/private/*");

        server.MapGet("/cached", ctx =>
        {
            var q = ctx.Request.Query;
            int ttl = 60, pad = 0, cookie = 0, priv = 0;
            if ((q["ttl"] != null && !TryParse(q["ttl"], 3600, out ttl)) || ttl == 0 ||
                (q["pad"] != null && !TryParse(q["pad"], 100000, out pad)) ||
                (q["cookie"] != null && !TryParse(q["cookie"], 1, out cookie)) ||
                (q["private"] != null && !TryParse(q["private"], 1, out priv)))
            {
                ctx.Response.Json("{\"error\": \"bad query\"}", 400);
                return;
            }
            int calls = Interlocked.Increment(ref s_cachedCalls);
            var sb = new StringBuilder("{\"calls\": ").Append(calls.ToString(CultureInfo.InvariantCulture));
            if (pad > 0) sb.Append(", \"pad\": \"").Append('x', pad).Append('"');
            sb.Append('}');
            ctx.Response.CacheFor(TimeSpan.FromSeconds(ttl));
            if (cookie == 1) ctx.Response.AddHeader("Set-Cookie", "seen=1");
            if (priv == 1) ctx.Response.AddHeader("Cache-Control", "private");
            ctx.Response.Json(sb.ToString());
        });

        server.MapPost("/cache/purge", ctx =>
        {
            long n = server.PurgeCache(ctx.Request.Query["prefix"] ?? string.Empty);
            ctx.Response.Json("{\"purged\": " + n.ToString(CultureInfo.InvariantCulture) + "}");
        });

        Action<EmberContext> pong = ctx =>
        {
            ctx.Response.AddHeader("X-Api-Version", "1");
            ctx.Response.Json("{\"pong\": true}");
        };
        server.MapGet("/api/ping", pong);
        server.MapPost("/api/ping", pong);
    }

    static bool TryParse(string s, int max, out int value)
    {
        value = 0;
        if (string.IsNullOrEmpty(s) || s.Length > 9) return false;
        foreach (char c in s) if (c < '0' || c > '9') return false;
        value = int.Parse(s, NumberStyles.None, CultureInfo.InvariantCulture);
        return value <= max;
    }

    /// <summary>A JSON string literal (control characters and DEL escaped, as the C app does).</summary>
    static string Quote(string s)
    {
        if (s == null) s = string.Empty;
        var sb = new StringBuilder(s.Length + 2);
        sb.Append('"');
        foreach (char c in s)
        {
            switch (c)
            {
                case '"': sb.Append("\\\""); break;
                case '\\': sb.Append("\\\\"); break;
                case '\n': sb.Append("\\n"); break;
                case '\r': sb.Append("\\r"); break;
                case '\t': sb.Append("\\t"); break;
                default:
                    if (c < 0x20 || c == 0x7f) sb.Append("\\u").Append(((int)c).ToString("x4", CultureInfo.InvariantCulture));
                    else sb.Append(c);
                    break;
            }
        }
        return sb.Append('"').ToString();
    }
}
