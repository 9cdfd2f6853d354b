// The basics through real HTTP: request fields, headers, Unicode, bodies, HEAD, 404/405, answers
// and refused headers, start/map/bind errors, stats, the Log event, inline dispatch, zero-copy bodies.
using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Linq;
using System.Net.Sockets;
using System.Runtime.CompilerServices;
using System.Text;
using System.Threading;
using System.Threading.Tasks;
using Ember;

namespace EmberTests
{
    public static class Basics
    {
        [Test]
        public static void Get_returns_text_body_status_and_content_type()
        {
            using (var s = new EmberServer())
            {
                s.MapGet("/", ctx => ctx.Response.Text("hello"));
                int port = s.Start(0);
                Assert.True(port > 0, "bound port");
                Assert.Equal(port, s.Port, "Port property");
                var r = Http.Get(port, "/");
                Assert.Equal(200, r.Status, "status");
                Assert.Equal("hello", r.Text, "body");
                Assert.Equal("text/plain; charset=utf-8", r.Headers["content-type"], "content-type");
                Assert.Equal("5", r.Headers["content-length"], "content-length");
            }
        }

        [Test]
        public static void Native_version_and_abi_are_readable()
        {
            Assert.True(!string.IsNullOrEmpty(EmberServer.NativeVersion), "version");
            // The library is the one this binding was built for (ABI 4 added the front,
            // TLS, observability and stop-accepting functions).
            Assert.Equal(EmberServer.ExpectedAbiVersion, EmberServer.NativeAbiVersion, "abi version");
            Assert.True(EmberServer.NativeAbiVersion >= 4u, "abi version >= 4");
        }

        [Test]
        public static void Request_fields_route_values_query_headers_and_remote_endpoint()
        {
            using (var s = new EmberServer())
            {
                string seen = null;
                s.MapGet("/users/{id}/files/{*rest}", ctx =>
                {
                    EmberRequest r = ctx.Request;
                    seen = string.Join("|", r.Method, r.Path, r.RawQuery, r.Query["q"], r.Query["n"],
                        r.GetRouteValue("id"), r.RouteValues["rest"], r.Route, r.GetHeader("X-Test"),
                        r.Headers["x-test"], r.RemoteEndPoint.Address.ToString(), r.ProtocolVersion.ToString(),
                        r.GetRouteValue("missing") ?? "null", r.GetHeader("absent") ?? "null");
                    ctx.Response.Status(204);
                });
                int port = s.Start(0);
                var resp = Http.Get(port, "/users/42/files/a/b.txt?q=two+words&n=%C3%A9", "X-Test: v1");
                Assert.Equal(204, resp.Status, "status");
                Assert.Equal("GET|/users/42/files/a/b.txt|q=two+words&n=%C3%A9|two words|é|42|a/b.txt|/users/{id}/files/{*rest}|v1|v1|127.0.0.1|1.1|null|null",
                    seen, "fields");
            }
        }

        [Test]
        public static void Repeated_headers_are_joined_and_listed_in_order()
        {
            using (var s = new EmberServer())
            {
                string joined = null, list = null;
                s.MapGet("/", ctx =>
                {
                    joined = ctx.Request.GetHeader("x-rep");
                    list = string.Join(";", ctx.Request.HeaderList.Where(h => h.Key == "x-rep").Select(h => h.Value));
                });
                int port = s.Start(0);
                Http.Get(port, "/", "X-Rep: one", "X-Rep: two");
                Assert.Equal("one, two", joined, "GetHeader joins");
                Assert.Equal("one;two", list, "HeaderList keeps both");
            }
        }

        [Test]
        public static void Unicode_in_paths_params_bodies_and_headers_round_trips()
        {
            using (var s = new EmberServer())
            {
                s.MapGet("/u/{name}", ctx =>
                {
                    ctx.Response.SetHeader("X-Name", ctx.Request.GetRouteValue("name"));
                    ctx.Response.Text("héllo ✓ 😀 " + ctx.Request.GetRouteValue("name"));
                });
                s.MapPost("/echo", ctx => ctx.Response.Text(ctx.Request.ReadBodyAsString() + "|" + ctx.Request.Body.Length));
                int port = s.Start(0);
                var r = Http.Get(port, "/u/Z%C3%BCrich%20%F0%9F%98%80");
                Assert.Equal("héllo ✓ 😀 Zürich 😀", r.Text, "unicode body");
                Assert.Equal(Encoding.UTF8.GetByteCount("héllo ✓ 😀 Zürich 😀").ToString(), r.Headers["content-length"], "length in bytes");
                byte[] body = Encoding.UTF8.GetBytes("Grüße, 世界 🌍");
                var e = Http.Send(port, "POST", "/echo", body, "Content-Type: text/plain; charset=utf-8");
                Assert.Equal("Grüße, 世界 🌍|" + body.Length, e.Text, "unicode request body");
            }
        }

        [Test]
        public static void Bytes_body_with_offset_all_byte_values_and_1_mib()
        {
            using (var s = new EmberServer())
            {
                var all = Enumerable.Range(0, 256).Select(i => (byte)i).ToArray();
                s.MapGet("/slice", ctx => ctx.Response.Bytes(all, 10, 20, "application/x-slice"));
                s.MapPost("/echo", ctx => ctx.Response.Bytes(ctx.Request.Body, ctx.Request.ContentType ?? "application/octet-stream"));
                int port = s.Start(0);
                var r = Http.Get(port, "/slice");
                Assert.True(r.Body.SequenceEqual(all.Skip(10).Take(20)), "slice");
                Assert.Equal("application/x-slice", r.Headers["content-type"], "type");
                var big = new byte[1 << 20];
                new Random(7).NextBytes(big);
                var e = Http.Send(port, "POST", "/echo", big, "Content-Type: application/x-big");
                Assert.Equal(200, e.Status, "status");
                Assert.True(e.Body.SequenceEqual(big), "1 MiB echo");
            }
        }

        [Test]
        public static void Head_uses_the_get_handler_without_body()
        {
            using (var s = new EmberServer())
            {
                s.MapGet("/", ctx => ctx.Response.Text("body"));
                int port = s.Start(0);
                var r = Http.Send(port, "HEAD", "/", null);
                Assert.Equal(200, r.Status, "status");
                Assert.Equal(0, r.Body.Length, "no body");
            }
        }

        [Test]
        public static void Unknown_path_404_and_wrong_method_405_are_the_engines()
        {
            using (var s = new EmberServer())
            {
                s.MapGet("/only-get", ctx => ctx.Response.Text("x"));
                int port = s.Start(0);
                Assert.Equal(404, Http.Get(port, "/nope").Status, "404");
                var r = Http.Send(port, "POST", "/only-get", new byte[0]);
                Assert.Equal(405, r.Status, "405");
            }
        }

        [Test]
        public static void Response_headers_status_redirect_and_explicit_respond()
        {
            using (var s = new EmberServer())
            {
                var second = new TaskCompletionSource<EmberResult>();
                s.MapGet("/h", ctx =>
                {
                    ctx.Response.AddHeader("Set-Cookie", "a=1");
                    ctx.Response.AddHeader("Set-Cookie", "b=2");
                    ctx.Response.SetHeader("X-One", "1");
                    ctx.Response.SetHeader("X-One", "2");
                    ctx.Response.Json("{}", 201);
                });
                s.MapGet("/r", ctx => ctx.Response.Redirect("/h"));
                s.MapGet("/early", ctx =>
                {
                    ctx.Response.Text("first");
                    Assert.Equal(EmberResult.Ok, ctx.Respond(), "first respond");
                    ctx.Response.Text("ignored");
                    second.SetResult(ctx.Respond());
                });
                int port = s.Start(0);
                var r = Http.Get(port, "/h");
                Assert.Equal(201, r.Status, "status");
                Assert.Equal("a=1, b=2", r.Headers["set-cookie"], "repeated header");
                Assert.Equal("2", r.Headers["x-one"], "SetHeader replaces");
                Assert.Equal("application/json", r.Headers["content-type"], "json type");
                var rd = Http.Get(port, "/r");
                Assert.Equal(302, rd.Status, "redirect");
                Assert.Equal("/h", rd.Headers["location"], "location");
                Assert.Equal("first", Http.Get(port, "/early").Text, "early answer wins");
                Assert.True(second.Task.Wait(5000), "handler finished");
                Assert.Equal(EmberResult.AlreadyAnswered, second.Task.Result, "second Respond");
            }
        }

        [Test]
        public static void Bad_header_value_is_refused_at_once()
        {
            var resp = new EmberResponse();
            Assert.Throws<ArgumentException>(() => resp.SetHeader("X-Bad", "a\r\nInjected: 1"), "CRLF in value");
            Assert.Throws<ArgumentException>(() => resp.SetHeader("Bad Name", "v"), "space in name");
            Assert.Throws<ArgumentOutOfRangeException>(() => resp.StatusCode = 42, "status range");
        }

        [Test]
        public static void Reading_the_request_after_a_sync_answer_throws()
        {
            using (var s = new EmberServer())
            {
                Exception late = null;
                s.MapGet("/", ctx =>
                {
                    ctx.Respond();
                    try { GC.KeepAlive(ctx.Request.Path); } catch (Exception e) { late = e; }
                });
                int port = s.Start(0);
                Http.Get(port, "/");
                Assert.True(late is InvalidOperationException, "InvalidOperationException, got " + late);
            }
        }

        [Test]
        public static void Map_after_start_throws_and_start_twice_throws()
        {
            using (var s = new EmberServer())
            {
                s.MapGet("/", ctx => { });
                s.Start(0);
                Assert.Throws<InvalidOperationException>(() => s.MapGet("/x", ctx => { }), "map after start");
                Assert.Throws<InvalidOperationException>(() => s.Start(0), "start twice");
            }
        }

        [Test]
        public static void Port_in_use_is_an_EmberException_with_Bind_and_the_server_can_start_elsewhere()
        {
            int live = EmberDiagnostics.LiveNativeServers;
            using (var a = new EmberServer())
            using (var b = new EmberServer())
            {
                a.MapGet("/", ctx => ctx.Response.Text("a"));
                b.MapGet("/", ctx => ctx.Response.Text("b"));
                int port = a.Start(0);
                var e = Assert.Throws<EmberException>(() => b.Start(port), "bind");
                Assert.Equal(EmberResult.Bind, e.Result, "result");
                Assert.True(e.Message.Contains(port.ToString()), "message names the address: " + e.Message);
                Assert.True(!b.IsRunning, "not running");
                int port2 = b.Start(0);
                Assert.Equal("b", Http.Get(port2, "/").Text, "b serves");
                Assert.Equal("a", Http.Get(port, "/").Text, "a serves");
            }
            WaitLiveServers(live);
        }

        [Test]
        public static void Bad_route_pattern_is_an_EmberException_at_start()
        {
            int live = EmberDiagnostics.LiveNativeServers;
            using (var s = new EmberServer())
            {
                s.MapGet("/a/{", ctx => { });
                var e = Assert.Throws<EmberException>(() => s.Start(0), "route");
                Assert.Equal(EmberResult.Route, e.Result, "result " + e.Message);
            }
            WaitLiveServers(live);
        }

        [Test]
        public static void Stats_count_requests_and_status_classes()
        {
            using (var s = new EmberServer())
            {
                s.MapGet("/", ctx => ctx.Response.Text("x"));
                int port = s.Start(0);
                for (int i = 0; i < 5; i++) Http.Get(port, "/");
                Http.Get(port, "/missing");
                EmberStats st = s.GetStats();
                Assert.True(st.Requests >= 6, "requests " + st.Requests);
                Assert.True(st.Responses2xx >= 5, "2xx " + st.Responses2xx);
                Assert.True(st.Responses4xx >= 1, "4xx " + st.Responses4xx);
            }
        }

        [Test]
        public static void Engine_log_lines_reach_the_Log_event()
        {
            var lines = new List<string>();
            using (var s = new EmberServer(new EmberOptions { LogLevel = EmberLogLevel.Info }))
            {
                s.Log += (o, e) => { lock (lines) lines.Add(e.Level + " " + e.Message); };
                s.MapGet("/", ctx => { });
                s.Start(0);
                s.Stop();
            }
            lock (lines) Assert.True(lines.Count > 0, "at least one engine log line at Info");
        }

        [Test]
        public static void Inline_dispatch_serves_sync_and_async_handlers()
        {
            using (var s = new EmberServer(new EmberOptions { Dispatch = EmberDispatch.Inline, Workers = 1 }))
            {
                s.MapGet("/sync", ctx => ctx.Response.Text("s"));
                s.MapGet("/async", async ctx => { await Task.Delay(20); ctx.Response.Text("a"); });
                int port = s.Start(0);
                Assert.Equal("s", Http.Get(port, "/sync").Text, "sync");
                Assert.Equal("a", Http.Get(port, "/async").Text, "async");
            }
        }

        [Test]
        public static void Zero_copy_bodies_are_unpinned_after_sending()
        {
            var big = new byte[300000];
            for (int i = 0; i < big.Length; i++) big[i] = (byte)(i * 7);
            using (var s = new EmberServer())
            {
                s.MapGet("/big", ctx => ctx.Response.BytesNoCopy(big, "application/octet-stream"));
                int port = s.Start(0);
                for (int i = 0; i < 20; i++)
                {
                    var r = Http.Get(port, "/big");
                    Assert.True(r.Body.SequenceEqual(big), "body " + i);
                    GC.Collect();
                }
            }
            var sw = Stopwatch.StartNew();
            while (EmberDiagnostics.PinnedBodies != 0 && sw.ElapsedMilliseconds < 5000) Thread.Sleep(10);
            Assert.Equal(0, EmberDiagnostics.PinnedBodies, "pinned bodies left");
        }

        /// <summary>Waits until only `baseline` native servers are held (a test may leave one
        /// running on purpose; the process-exit hook stops it).</summary>
        internal static void WaitLiveServers(int baseline)
        {
            var sw = Stopwatch.StartNew();
            while (EmberDiagnostics.LiveNativeServers > baseline && sw.ElapsedMilliseconds < 10000) Thread.Sleep(10);
            Assert.Equal(baseline, EmberDiagnostics.LiveNativeServers, "native servers still held");
        }
    }
}
