// The OWIN server: a hand-written middleware chain (no Katana, no NuGet) served by Ember and
// driven by a real socket client.
using System;
using System.Collections.Generic;
using System.IO;
using System.Linq;
using System.Net.Sockets;
using System.Text;
using System.Threading;
using System.Threading.Tasks;
using Ember;

namespace EmberTests
{
    using AppFunc = Func<IDictionary<string, object>, Task>;
    using Middleware = Func<Func<IDictionary<string, object>, Task>, Func<IDictionary<string, object>, Task>>;

    static class OwinTests
    {
        static Task WriteText(IDictionary<string, object> env, string text, int status = 200)
        {
            env["owin.ResponseStatusCode"] = status;
            var headers = (IDictionary<string, string[]>)env["owin.ResponseHeaders"];
            headers["Content-Type"] = new[] { "text/plain; charset=utf-8" };
            byte[] b = Encoding.UTF8.GetBytes(text);
            return ((Stream)env["owin.ResponseBody"]).WriteAsync(b, 0, b.Length);
        }

        // Adds X-Chain to every response just before its head is sent (server.OnSendingHeaders).
        static readonly Middleware Stamp = next => env =>
        {
            var register = (Action<Action<object>, object>)env["server.OnSendingHeaders"];
            register(state =>
            {
                var h = (IDictionary<string, string[]>)((IDictionary<string, object>)state)["owin.ResponseHeaders"];
                h["X-Chain"] = new[] { "stamp" };
            }, env);
            return next(env);
        };

        // /secure/... needs an Authorization header: 401 without calling the rest of the chain.
        static readonly Middleware Guard = next => env =>
        {
            string path = (string)env["owin.RequestPath"];
            var reqHeaders = (IDictionary<string, string[]>)env["owin.RequestHeaders"];
            if (path.StartsWith("/secure", StringComparison.Ordinal) && !reqHeaders.ContainsKey("Authorization"))
            {
                ((IDictionary<string, string[]>)env["owin.ResponseHeaders"])["WWW-Authenticate"] = new[] { "Basic" };
                return WriteText(env, "who are you?", 401);
            }
            return next(env);
        };

        static volatile bool s_cancelSeen;

        static async Task Endpoints(IDictionary<string, object> env)
        {
            string path = (string)env["owin.RequestPath"];
            var reqHeaders = (IDictionary<string, string[]>)env["owin.RequestHeaders"];
            var resHeaders = (IDictionary<string, string[]>)env["owin.ResponseHeaders"];
            var body = (Stream)env["owin.ResponseBody"];
            switch (path)
            {
                case "/hello":
                    await WriteText(env, "hello from OWIN");
                    return;
                case "/env":
                    var sb = new StringBuilder();
                    foreach (string key in new[] { "owin.Version", "owin.RequestMethod", "owin.RequestScheme", "owin.RequestPathBase",
                        "owin.RequestPath", "owin.RequestQueryString", "owin.RequestProtocol", "server.RemoteIpAddress",
                        "server.LocalPort", "server.IsLocal" })
                        sb.Append(key).Append('=').Append(env[key]).Append('\n');
                    sb.Append("types=").Append(env["owin.RequestHeaders"] is IDictionary<string, string[]>)
                      .Append(env["owin.RequestBody"] is Stream).Append(env["owin.ResponseBody"] is Stream)
                      .Append(env["owin.CallCancelled"] is CancellationToken).Append(env["owin.ResponseHeaders"] is IDictionary<string, string[]>)
                      .Append('\n');
                    sb.Append("remote-port=").Append(int.Parse((string)env["server.RemotePort"]) > 0).Append('\n');
                    sb.Append("x-rep=").Append(string.Join("|", reqHeaders["X-Rep"])).Append('\n');
                    await WriteText(env, sb.ToString());
                    return;
                case "/echo":
                    var input = (Stream)env["owin.RequestBody"];
                    var copy = new MemoryStream();
                    await input.CopyToAsync(copy);
                    resHeaders["Content-Type"] = reqHeaders.ContainsKey("Content-Type") ? reqHeaders["Content-Type"] : new[] { "application/octet-stream" };
                    byte[] data = copy.ToArray();
                    await body.WriteAsync(data, 0, data.Length);
                    return;
                case "/async":
                    await Task.Delay(50);
                    await WriteText(env, "after await on " + (Thread.CurrentThread.IsThreadPoolThread ? "pool" : "other"));
                    return;
                case "/cookies":
                    resHeaders["Set-Cookie"] = new[] { "a=1", "b=2" };
                    env["owin.ResponseStatusCode"] = 201;
                    await body.FlushAsync();     // fixes the head; later headers are ignored
                    resHeaders["X-Too-Late"] = new[] { "1" };
                    byte[] done = Encoding.ASCII.GetBytes("created");
                    await body.WriteAsync(done, 0, done.Length);
                    return;
                case "/throw":
                    throw new InvalidOperationException("sync failure in the app");
                case "/throw-async":
                    await Task.Yield();
                    throw new InvalidOperationException("async failure in the app");
                case "/wait-cancel":
                    var token = (CancellationToken)env["owin.CallCancelled"];
                    try { await Task.Delay(30000, token); }
                    catch (TaskCanceledException) { s_cancelSeen = true; }
                    return;
                default:
                    await WriteText(env, "not found: " + path, 404);
                    return;
            }
        }

        static AppFunc Chain()
        {
            AppFunc app = Endpoints;
            foreach (Middleware m in new[] { Guard, Stamp }) app = m(app);   // Stamp runs first
            return app;
        }

        [Test]
        public static void Middleware_chain_serves_text_status_headers_and_short_circuits()
        {
            using (var server = new EmberOwinServer(Chain()))
            {
                int port = server.Start(0);
                HttpResult r = Http.Get(port, "/hello");
                Assert.Equal(200, r.Status, "status");
                Assert.Equal("hello from OWIN", r.Text, "body");
                Assert.Equal("text/plain; charset=utf-8", r.Headers["Content-Type"], "content type");
                Assert.Equal("stamp", r.Headers["X-Chain"], "OnSendingHeaders ran before the head was sent");

                r = Http.Get(port, "/secure/data");
                Assert.Equal(401, r.Status, "guard answers without calling the endpoint");
                Assert.Equal("Basic", r.Headers["WWW-Authenticate"], "guard header");
                Assert.Equal("stamp", r.Headers["X-Chain"], "the stamp still applies");

                r = Http.Get(port, "/secure/data", "Authorization: Basic eDp5");
                Assert.Equal(404, r.Status, "with credentials the request reaches the endpoints");
                Assert.Equal("not found: /secure/data", r.Text, "endpoint saw the path");
            }
        }

        [Test]
        public static void Environment_has_the_owin_keys_with_the_right_types()
        {
            using (var server = new EmberOwinServer(Chain()))
            {
                int port = server.Start(0);
                HttpResult r = Http.Get(port, "/env?x=%C3%A9&y=1", "X-Rep: one", "X-Rep: two");
                Assert.Equal(200, r.Status, "status");
                string t = r.Text;
                foreach (string line in new[] { "owin.Version=1.0", "owin.RequestMethod=GET", "owin.RequestScheme=http",
                    "owin.RequestPathBase=\n", "owin.RequestPath=/env", "owin.RequestQueryString=x=%C3%A9&y=1",
                    "owin.RequestProtocol=HTTP/1.1", "server.RemoteIpAddress=127.0.0.1", "server.LocalPort=" + port,
                    "server.IsLocal=True", "types=TrueTrueTrueTrueTrue", "remote-port=True", "x-rep=one|two" })
                    Assert.True(t.Contains(line), "missing '" + line.Trim() + "' in:\n" + t);
            }
        }

        [Test]
        public static void Request_body_echoes_and_async_apps_answer_after_await()
        {
            using (var server = new EmberOwinServer(Chain()))
            {
                int port = server.Start(0);
                var body = new byte[300000];
                new Random(7).NextBytes(body);
                HttpResult r = Http.Send(port, "POST", "/echo", body, "Content-Type: application/x-test");
                Assert.Equal(200, r.Status, "status");
                Assert.True(r.Body.SequenceEqual(body), "body echoed byte for byte");
                Assert.Equal("application/x-test", r.Headers["Content-Type"], "content type");
                r = Http.Get(port, "/async");
                Assert.Equal("after await on pool", r.Text, "answered from the continuation");
            }
        }

        [Test]
        public static void Flush_fixes_the_head_and_repeated_response_headers_are_sent_apart()
        {
            using (var server = new EmberOwinServer(Chain()))
            {
                int port = server.Start(0);
                string raw = RawGet(port, "/cookies");
                Assert.True(raw.StartsWith("HTTP/1.1 201", StringComparison.Ordinal), raw);
                Assert.True(raw.Contains("set-cookie: a=1\r\n") && raw.Contains("set-cookie: b=2\r\n"), "two Set-Cookie lines: " + raw);
                Assert.True(!raw.Contains("x-too-late"), "headers added after the flush are not sent: " + raw);
                // The flush started a streamed answer: what follows goes out as chunks.
                Assert.True(raw.Contains("transfer-encoding: chunked\r\n"), "streamed after the flush: " + raw);
                Assert.True(raw.EndsWith("\r\n\r\n7\r\ncreated\r\n0\r\n\r\n", StringComparison.Ordinal), raw);
            }
        }

        [Test]
        public static void App_exceptions_answer_500_raise_Error_and_the_server_keeps_serving()
        {
            using (var server = new EmberOwinServer(Chain()))
            {
                var errors = new List<Exception>();
                server.Server.Error += (s, e) => { lock (errors) errors.Add(e.Exception); };
                int port = server.Start(0);
                Assert.Equal(500, Http.Get(port, "/throw").Status, "sync throw");
                Assert.Equal(500, Http.Get(port, "/throw-async").Status, "async throw");
                Assert.Equal("hello from OWIN", Http.Get(port, "/hello").Text, "still serving");
                lock (errors)
                {
                    Assert.Equal(2, errors.Count, "Error raised per failure");
                    Assert.Equal("sync failure in the app", errors[0].Message, "first");
                    Assert.Equal("async failure in the app", errors[1].Message, "second (unwrapped)");
                }
            }
        }

        [Test]
        public static void MapOwin_mounts_an_app_under_a_path_base_beside_native_routes()
        {
            using (var server = new EmberServer())
            {
                server.MapGet("/", ctx => ctx.Response.Text("native"));
                server.MapOwin("/api", env => WriteText(env, "base=" + env["owin.RequestPathBase"] + " path=" + env["owin.RequestPath"]));
                int port = server.Start(0);
                Assert.Equal("native", Http.Get(port, "/").Text, "native route");
                Assert.Equal("base=/api path=/users/caf\u00e9", Http.Get(port, "/api/users/caf%C3%A9").Text, "decoded path under the base");
                Assert.Equal("base=/api path=", Http.Get(port, "/api").Text, "the base itself");
                Assert.Equal("base=/api path=/", Http.Get(port, "/api/").Text, "the base with its slash");
                Assert.Equal(404, Http.Get(port, "/other").Status, "outside the mount: the engine's 404");
            }
        }

        [Test]
        public static void CallCancelled_fires_when_the_server_stops()
        {
            s_cancelSeen = false;
            var server = new EmberOwinServer(Chain());
            int port = server.Start(0);
            Task<HttpResult> pending = Task.Run(() => Http.Get(port, "/wait-cancel"));
            Thread.Sleep(300);
            server.Stop(TimeSpan.FromSeconds(5));
            for (int i = 0; i < 50 && !s_cancelSeen; i++) Thread.Sleep(20);
            Assert.True(s_cancelSeen, "owin.CallCancelled was cancelled by Stop");
            try { pending.Wait(5000); } catch (AggregateException) { }
            server.Dispose();
        }

        [Test]
        public static void Katana_server_factory_convention_starts_and_stops_a_server()
        {
            // What Microsoft.Owin.Hosting does with ServerFactory = "Ember": find the type by name,
            // Initialize(properties), Create(app, properties), Dispose to stop.
            Type factory = Type.GetType("Ember.OwinServerFactory, Ember", true);
            var properties = new Dictionary<string, object>();
            factory.GetMethod("Initialize").Invoke(null, new object[] { properties });
            Assert.Equal("1.0", (string)properties["owin.Version"], "owin.Version advertised");
            int port;
            var probe = new TcpListener(System.Net.IPAddress.Loopback, 0);
            probe.Start();
            port = ((System.Net.IPEndPoint)probe.LocalEndpoint).Port;
            probe.Stop();
            properties["host.Addresses"] = new List<IDictionary<string, object>>
            {
                new Dictionary<string, object> { { "scheme", "http" }, { "host", "localhost" }, { "port", port.ToString() }, { "path", "/app" } },
            };
            AppFunc app = env => WriteText(env, "katana-style " + env["owin.RequestPathBase"]);
            var server = (IDisposable)factory.GetMethod("Create").Invoke(null, new object[] { app, properties });
            Assert.Equal("katana-style /app", Http.Get(port, "/app/x").Text, "served");
            server.Dispose();
            Assert.Throws<SocketException>(() => Http.Get(port, "/app/x"), "stopped by Dispose");
        }

        static string RawGet(int port, string target)
        {
            using (var c = new TcpClient("127.0.0.1", port))
            {
                byte[] req = Encoding.ASCII.GetBytes("GET " + target + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
                NetworkStream s = c.GetStream();
                s.Write(req, 0, req.Length);
                var ms = new MemoryStream();
                s.CopyTo(ms);
                return Encoding.ASCII.GetString(ms.ToArray());
            }
        }
    }
}
