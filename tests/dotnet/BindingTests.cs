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

    public static class Errors
    {
        [Test]
        public static void Sync_exception_answers_500_raises_Error_and_Log_and_keeps_serving()
        {
            using (var s = new EmberServer())
            {
                var errors = new List<EmberErrorEventArgs>();
                var logged = new List<EmberLogEventArgs>();
                s.Error += (o, e) => { lock (errors) errors.Add(e); };
                s.Log += (o, e) => { if (e.Exception != null) lock (logged) logged.Add(e); };
                s.MapGet("/fail", ctx => { throw new InvalidOperationException("boom"); });
                s.MapGet("/ok", ctx => ctx.Response.Text("fine"));
                int port = s.Start(0);
                for (int i = 0; i < 3; i++)
                {
                    var r = Http.Get(port, "/fail");
                    Assert.Equal(500, r.Status, "500");
                    Assert.True(!r.Text.Contains("boom"), "exception text is not sent to the client");
                    Assert.Equal("fine", Http.Get(port, "/ok").Text, "still serving");
                }
                lock (errors)
                {
                    Assert.Equal(3, errors.Count, "Error events");
                    Assert.True(errors[0].Exception is InvalidOperationException && errors[0].Exception.Message == "boom", "the exception");
                    Assert.Equal("GET", errors[0].Method, "method");
                    Assert.Equal("/fail", errors[0].Path, "path");
                }
                lock (logged) Assert.Equal(3, logged.Count, "Log events with the exception");
            }
        }

        [Test]
        public static void Async_exception_after_await_answers_500_with_the_inner_exception()
        {
            using (var s = new EmberServer())
            {
                Exception seen = null;
                var got = new ManualResetEventSlim();
                s.Error += (o, e) => { seen = e.Exception; got.Set(); };
                s.MapGet("/fail", async ctx => { await Task.Delay(10); throw new ArgumentException("late boom"); });
                s.MapGet("/fail-sync-part", ctx => Fails());
                int port = s.Start(0);
                Assert.Equal(500, Http.Get(port, "/fail").Status, "500");
                Assert.True(got.Wait(5000), "Error raised");
                Assert.True(seen is ArgumentException, "inner exception, got " + seen);
                Assert.Equal(500, Http.Get(port, "/fail-sync-part").Status, "500 from the synchronous part");
            }
        }

        static Task Fails() { throw new NotSupportedException("before any await"); }

        [Test]
        public static void A_throwing_Error_subscriber_does_not_break_the_server()
        {
            using (var s = new EmberServer())
            {
                s.Error += (o, e) => { throw new Exception("subscriber"); };
                s.Log += (o, e) => { throw new Exception("log subscriber"); };
                s.MapGet("/fail", ctx => { throw new Exception("x"); });
                s.MapGet("/ok", ctx => ctx.Response.Text("ok"));
                int port = s.Start(0);
                Assert.Equal(500, Http.Get(port, "/fail").Status, "500");
                Assert.Equal("ok", Http.Get(port, "/ok").Text, "ok");
            }
        }

        [Test]
        public static void Handler_timeout_answers_503_and_the_late_answer_is_dropped_quietly()
        {
            using (var s = new EmberServer(new EmberOptions { HandlerTimeout = TimeSpan.FromMilliseconds(300) }))
            {
                var late = new TaskCompletionSource<EmberResult>();
                int errors = 0;
                s.Error += (o, e) => Interlocked.Increment(ref errors);
                s.MapGet("/slow", async ctx =>
                {
                    await Task.Delay(800);
                    ctx.Response.Text("too late");
                    late.SetResult(ctx.Respond());
                });
                int port = s.Start(0);
                Assert.Equal(503, Http.Get(port, "/slow").Status, "503");
                Assert.True(late.Task.Wait(5000), "late answer attempted");
                Assert.Equal(EmberResult.TimedOut, late.Task.Result, "late result");
                Assert.Equal(0, errors, "no Error event for a late answer");
            }
        }
    }

    public static class Async
    {
        [Test]
        public static void Two_hundred_concurrent_awaits_finish_together_on_two_pool_threads()
        {
            using (var s = new EmberServer(new EmberOptions { PoolThreads = 2, Workers = 1 }))
            {
                int inside = 0, maxInside = 0;
                s.MapGet("/wait", async ctx =>
                {
                    int n = Interlocked.Increment(ref inside);
                    int m;
                    while ((m = Volatile.Read(ref maxInside)) < n && Interlocked.CompareExchange(ref maxInside, n, m) != m) { }
                    await Task.Delay(1000);
                    Interlocked.Decrement(ref inside);
                    ctx.Response.Text("done " + ctx.Request.Query["i"]);
                });
                int port = s.Start(0);
                ThreadPool.SetMinThreads(64, 64);
                var sw = Stopwatch.StartNew();
                var tasks = Enumerable.Range(0, 200).Select(i => Http.SendAsync(port, "GET", "/wait?i=" + i, null)).ToArray();
                Task.WaitAll(tasks, 30000);
                long ms = sw.ElapsedMilliseconds;
                for (int i = 0; i < 200; i++)
                {
                    Assert.Equal(200, tasks[i].Result.Status, "status " + i);
                    Assert.Equal("done " + i, tasks[i].Result.Text, "body " + i);
                }
                Assert.True(maxInside >= 150, "handlers awaiting at once: " + maxInside);
                Assert.True(ms < 4000, "200 x 1 s awaits on 2 pool threads took " + ms + " ms");
            }
        }

        [Test]
        public static void Async_handler_reads_the_request_after_await_from_a_pool_thread()
        {
            using (var s = new EmberServer(new EmberOptions { Dispatch = EmberDispatch.Inline }))
            {
                s.MapPost("/later/{id}", async ctx =>
                {
                    await Task.Delay(50).ConfigureAwait(false);
                    await Task.Yield();
                    var r = ctx.Request;
                    ctx.Response.Text(r.Method + " " + r.GetRouteValue("id") + " " + r.Query["x"] + " " +
                        r.GetHeader("x-h") + " " + r.ReadBodyAsString() + " " + Thread.CurrentThread.IsThreadPoolThread);
                });
                int port = s.Start(0);
                var res = Http.Send(port, "POST", "/later/7?x=y", Encoding.UTF8.GetBytes("bödy"), "X-H: hv");
                Assert.Equal("POST 7 y hv bödy True", res.Text, "fields after await");
            }
        }

        [Test]
        public static void A_thread_of_our_own_answers_through_a_TaskCompletionSource()
        {
            using (var s = new EmberServer(new EmberOptions { Dispatch = EmberDispatch.Inline }))
            {
                s.MapGet("/own", ctx =>
                {
                    var done = new TaskCompletionSource<bool>();
                    var t = new Thread(() =>
                    {
                        Thread.Sleep(50);
                        ctx.Response.Text("from thread " + ctx.Request.Query["n"]);
                        done.SetResult(true);
                    });
                    t.Start();
                    return done.Task;
                });
                int port = s.Start(0);
                Assert.Equal("from thread 5", Http.Get(port, "/own?n=5").Text, "answered by our thread");
            }
        }

        [Test]
        public static void Completed_task_handlers_answer_inline()
        {
            using (var s = new EmberServer())
            {
                s.MapGet("/", ctx => { ctx.Response.Text("sync-completed"); return Task.FromResult(0); });
                s.MapGet("/null", ctx => (Task)null);
                int port = s.Start(0);
                Assert.Equal("sync-completed", Http.Get(port, "/").Text, "completed task");
                Assert.Equal(200, Http.Get(port, "/null").Status, "null task answers the default 200");
            }
        }
    }

    public static class Lifetime
    {
        // Servers and their lambdas are created in non-inlined helpers so that nothing on the
        // test's stack keeps the delegates alive: only the binding's own references do.
        [MethodImpl(MethodImplOptions.NoInlining)]
        static EmberServer MakeServer(string tag, EmberDispatch dispatch)
        {
            var payload = new string('x', 10) + tag;   // captured: a real closure object per route
            var s = new EmberServer(new EmberOptions { Dispatch = dispatch });
            s.MapGet("/", ctx => ctx.Response.Text(payload));
            s.MapGet("/a", async ctx => { await Task.Yield(); ctx.Response.Text(payload + "a"); });
            return s;
        }

        [Test]
        public static void Callbacks_survive_forced_GC_in_a_loop()
        {
            int live = EmberDiagnostics.LiveNativeServers;
            using (var stop = new CancellationTokenSource())
            {
                var gc = new Thread(() =>
                {
                    while (!stop.IsCancellationRequested)
                    {
                        GC.Collect();
                        GC.WaitForPendingFinalizers();
                        Thread.Sleep(1);
                    }
                });
                gc.IsBackground = true;
                gc.Start();
                try
                {
                    foreach (var mode in new[] { EmberDispatch.Pool, EmberDispatch.Inline })
                    {
                        int port;
                        var server = MakeServer(mode.ToString(), mode);
                        port = server.Start(0);
                        for (int i = 0; i < 300; i++)
                        {
                            Assert.Equal("xxxxxxxxxx" + mode, Http.Get(port, "/").Text, "sync " + i);
                            if (i % 10 == 0) Assert.Equal("xxxxxxxxxx" + mode + "a", Http.Get(port, "/a").Text, "async " + i);
                        }
                        server.Stop();
                    }
                }
                finally
                {
                    stop.Cancel();
                    gc.Join();
                }
            }
            Basics.WaitLiveServers(live);
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        static int StartAbandoned()
        {
            var s = MakeServer("abandoned", EmberDispatch.Pool);
            return s.Start(0);   // the only reference is dropped here
        }

        [Test]
        public static void A_started_server_whose_reference_is_dropped_keeps_serving_through_GC()
        {
            int port = StartAbandoned();
            for (int i = 0; i < 5; i++)
            {
                GC.Collect();
                GC.WaitForPendingFinalizers();
                Assert.Equal("xxxxxxxxxxabandoned", Http.Get(port, "/").Text, "still answers " + i);
            }
            // It is stopped by the process-exit hook at the end of the test run.
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        static void MakeAndDrop(int n)
        {
            for (int i = 0; i < n; i++)
            {
                var s = MakeServer("drop" + i, EmberDispatch.Pool);   // never started, never disposed
                GC.KeepAlive(s);
            }
        }

        [Test]
        public static void Unstarted_servers_are_collected_and_finalized_safely()
        {
            var weak = new List<WeakReference>();
            MakeWeak(weak);
            MakeAndDrop(50);
            for (int i = 0; i < 3; i++) { GC.Collect(); GC.WaitForPendingFinalizers(); }
            Assert.True(weak.All(w => !w.IsAlive), "stopped servers are collectable");
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        static void MakeWeak(List<WeakReference> weak)
        {
            for (int i = 0; i < 5; i++)
            {
                var s = MakeServer("w" + i, EmberDispatch.Pool);
                int port = s.Start(0);
                Http.Get(port, "/");
                s.Stop();            // stopped, not disposed: nothing roots it any more
                weak.Add(new WeakReference(s));
            }
        }

        [Test]
        public static void Start_stop_cycles_reuse_the_routes_and_release_everything()
        {
            int before = EmberDiagnostics.LiveNativeServers;
            var s = new EmberServer();
            int calls = 0;
            s.MapGet("/", ctx => { Interlocked.Increment(ref calls); ctx.Response.Text("c"); });
            for (int i = 0; i < 25; i++)
            {
                int port = s.Start(0);
                Assert.Equal("c", Http.Get(port, "/").Text, "cycle " + i);
                s.Stop(TimeSpan.FromSeconds(1));
                Assert.True(!s.IsRunning, "stopped " + i);
                if (i % 5 == 0) GC.Collect();
            }
            s.Dispose();
            Assert.Equal(25, calls, "handler calls");
            Assert.Equal(before, EmberDiagnostics.LiveNativeServers, "every native server released");
        }

        [Test]
        public static void Two_servers_run_at_once_and_stop_independently()
        {
            using (var a = new EmberServer())
            using (var b = new EmberServer(new EmberOptions { Dispatch = EmberDispatch.Inline }))
            {
                a.MapGet("/", ctx => ctx.Response.Text("A"));
                b.MapGet("/", ctx => ctx.Response.Text("B"));
                int pa = a.Start(0), pb = b.Start(0);
                Assert.True(pa != pb, "different ports");
                var ta = Enumerable.Range(0, 50).Select(i => Http.SendAsync(pa, "GET", "/", null)).ToArray();
                var tb = Enumerable.Range(0, 50).Select(i => Http.SendAsync(pb, "GET", "/", null)).ToArray();
                Task.WaitAll(ta.Concat(tb).Cast<Task>().ToArray(), 20000);
                Assert.True(ta.All(t => t.Result.Text == "A") && tb.All(t => t.Result.Text == "B"), "each answers its own");
                a.Stop();
                Assert.Equal("B", Http.Get(pb, "/").Text, "b still serves");
                Assert.Throws<SocketException>(() => Http.Get(pa, "/"), "a refuses connections");
            }
        }

        [Test]
        public static void Dispose_without_Stop_with_requests_in_flight_is_safe()
        {
            int live = EmberDiagnostics.LiveNativeServers;
            var entered = new ManualResetEventSlim();
            var finished = new TaskCompletionSource<EmberResult>();
            var s = new EmberServer();
            s.MapGet("/await", async ctx =>
            {
                entered.Set();
                await Task.Delay(300);
                ctx.Response.Text("late");
                finished.SetResult(ctx.Respond());
            });
            int port = s.Start(0);
            var client = Http.SendAsync(port, "GET", "/await", null);
            Assert.True(entered.Wait(5000), "handler entered");
            s.Dispose();
            s.Dispose();   // twice is fine
            s.Stop();      // and Stop after Dispose
            Assert.True(!s.IsRunning, "not running");
            Assert.True(finished.Task.Wait(5000), "the awaiting handler still ends");
            Assert.True(finished.Task.Result != EmberResult.Ok, "its answer is refused: " + finished.Task.Result);
            try { client.Wait(5000); } catch (AggregateException) { }   // cut off: either way fine
            Assert.Throws<ObjectDisposedException>(() => s.Start(0), "start after dispose");
            Basics.WaitLiveServers(live);
        }

        [Test]
        public static void Dispose_while_a_blocking_pool_handler_runs_waits_for_it()
        {
            int live = EmberDiagnostics.LiveNativeServers;
            var entered = new ManualResetEventSlim();
            int done = 0;
            var s = new EmberServer();
            s.MapGet("/block", ctx => { entered.Set(); Thread.Sleep(300); Volatile.Write(ref done, 1); ctx.Response.Text("x"); });
            int port = s.Start(0);
            var pending = Http.SendAsync(port, "GET", "/block", null);
            Assert.True(entered.Wait(5000), "entered");
            s.Dispose();
            Assert.Equal(1, Volatile.Read(ref done), "no handler runs after Dispose returns");
            GC.KeepAlive(pending);
            Basics.WaitLiveServers(live);
        }

        [Test]
        public static void Stop_from_inside_a_handler_does_not_deadlock()
        {
            int live = EmberDiagnostics.LiveNativeServers;
            var s = new EmberServer();
            var stopped = new ManualResetEventSlim();
            s.MapGet("/stop", ctx =>
            {
                ctx.Response.Text("bye");
                ctx.Respond();
                ctx.Server.Stop(TimeSpan.FromSeconds(1));
                stopped.Set();
            });
            int port = s.Start(0);
            Assert.Equal("bye", Http.Get(port, "/stop").Text, "answered");
            Assert.True(stopped.Wait(5000), "Stop returned inside the handler");
            Assert.True(!s.IsRunning, "not running");
            Basics.WaitLiveServers(live);
            int port2 = s.Start(0);   // and it can start again
            Assert.Equal(200, Http.Get(port2, "/stop").Status, "restarted");
            s.Dispose();
            Basics.WaitLiveServers(live);
        }

        [Test]
        public static void Stop_after_an_await_in_a_handler_returns_at_once_and_the_request_still_finishes()
        {
            int live = EmberDiagnostics.LiveNativeServers;
            var s = new EmberServer();
            long stopMs = -1;
            s.MapGet("/stop", async ctx =>
            {
                await Task.Delay(50);
                var sw = Stopwatch.StartNew();
                ctx.Server.Stop(TimeSpan.FromSeconds(10));
                stopMs = sw.ElapsedMilliseconds;
                ctx.Response.Text("stopping");
            });
            int port = s.Start(0);
            var r = Http.Get(port, "/stop");
            Assert.Equal("stopping", r.Text, "the in-flight request is answered");
            Assert.True(stopMs >= 0 && stopMs < 1000, "Stop blocked for " + stopMs + " ms");
            Basics.WaitLiveServers(live);
            s.Dispose();
        }

        [Test]
        public static void Dispose_from_inside_an_inline_handler_does_not_deadlock()
        {
            int live = EmberDiagnostics.LiveNativeServers;
            var s = new EmberServer(new EmberOptions { Dispatch = EmberDispatch.Inline });
            s.MapGet("/", ctx => { ctx.Server.Dispose(); ctx.Response.Text("x"); });
            int port = s.Start(0);
            try { Http.Get(port, "/"); } catch (Exception) { }
            Basics.WaitLiveServers(live);
        }

        static void ExpectCleanChild(string mode, long maxMs)
        {
            int code;
            string output;
            long ms;
            Children.Spawn(mode, out code, out output, out ms);
            Assert.Equal(0, code, mode + " exit code; output: " + output);
            Assert.True(!output.Contains("Native Crash") && !output.Contains("SIGSEGV") && !output.Contains("CallbackOnCollectedDelegate"),
                mode + " crash output: " + output);
            Assert.True(ms < maxMs, mode + " took " + ms + " ms");
        }

        [Test]
        public static void Process_exit_with_a_running_server_is_clean()
        {
            ExpectCleanChild("exit-running", 10000);
        }

        [Test]
        public static void Process_exit_with_handlers_awaiting_and_blocking_is_clean()
        {
            ExpectCleanChild("exit-inflight", 10000);
        }

        [Test]
        public static void Process_exit_under_load_with_inline_dispatch_is_clean()
        {
            ExpectCleanChild("exit-inflight-inline", 10000);
        }

        [Test]
        public static void Environment_Exit_from_inside_a_handler_is_clean()
        {
            // Pool and Inline: under Auto (the handler inline on an I/O thread while the pool
            // and the spare I/O thread run) Mono's exit does not finish yet; see README.
            ExpectCleanChild("exit-from-handler-pool", 10000);
            ExpectCleanChild("exit-from-handler-inline", 10000);
        }
    }
}
