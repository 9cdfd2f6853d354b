using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Linq;
using System.Text;
using System.Threading;
using System.Threading.Tasks;
using Ember;

namespace EmberTests
{
    public static class Options
    {
        [Test]
        public static void Body_limit_from_options_answers_413()
        {
            using (var s = new EmberServer(new EmberOptions { MaxBodyBytes = 1000 }))
            {
                s.MapPost("/echo", ctx => ctx.Response.Bytes(ctx.Request.Body));
                int port = s.Start(0);
                Assert.Equal(200, Http.Send(port, "POST", "/echo", new byte[1000]).Status, "at the limit");
                Assert.Equal(413, Http.Send(port, "POST", "/echo", new byte[1001]).Status, "over the limit");
            }
        }

        [Test]
        public static void Several_listen_addresses_report_their_ports()
        {
            var o = new EmberOptions();
            o.ListenAddresses.Add("127.0.0.1:0");
            o.ListenAddresses.Add("127.0.0.1:0");
            using (var s = new EmberServer(o))
            {
                s.MapGet("/", ctx => ctx.Response.Text("x"));
                s.Start();
                Assert.Equal(2, s.Ports.Count, "two ports");
                Assert.True(s.Ports[0] != s.Ports[1] && s.Ports[0] > 0, "distinct ports");
                foreach (int p in s.Ports) Assert.Equal("x", Http.Get(p, "/").Text, "serves on " + p);
            }
        }

        [Test]
        public static void Bad_option_values_are_refused_at_start()
        {
            using (var s = new EmberServer(new EmberOptions { Host = "not an address" }))
            {
                s.MapGet("/", ctx => { });
                var e = Assert.Throws<EmberException>(() => s.Start(0), "bad host");
                Assert.True(e.Result == EmberResult.InvalidArg || e.Result == EmberResult.Bind, "result " + e.Result);
            }
            using (var s = new EmberServer(new EmberOptions { MaxHeaderBytes = 10 }))
            {
                s.MapGet("/", ctx => { });
                Assert.Equal(EmberResult.InvalidArg, Assert.Throws<EmberException>(() => s.Start(0), "tiny header limit").Result, "result");
            }
        }
    }

    public static class Concurrency
    {
        [Test]
        public static void A_blocking_pool_handler_does_not_stall_other_requests()
        {
            using (var s = new EmberServer(new EmberOptions { PoolThreads = 4 }))
            {
                s.MapGet("/block", ctx => { Thread.Sleep(3000); ctx.Response.Text("b"); });
                s.MapGet("/fast", ctx => ctx.Response.Text("f"));
                int port = s.Start(0);
                var blocked = Enumerable.Range(0, 2).Select(i => Http.SendAsync(port, "GET", "/block", null)).ToArray();
                Thread.Sleep(100);
                var sw = Stopwatch.StartNew();
                for (int i = 0; i < 20; i++) Assert.Equal("f", Http.Get(port, "/fast").Text, "fast " + i);
                Assert.True(sw.ElapsedMilliseconds < 2500, "fast requests waited " + sw.ElapsedMilliseconds + " ms");
                Task.WaitAll(blocked, 10000);
                Assert.True(blocked.All(t => t.Result.Text == "b"), "blocked ones answered");
            }
        }

        [Test]
        public static void Load_on_two_servers_while_a_third_cycles_and_GC_runs()
        {
            int live = EmberDiagnostics.LiveNativeServers;
            using (var a = new EmberServer())
            using (var b = new EmberServer(new EmberOptions { Dispatch = EmberDispatch.Inline }))
            {
                a.MapGet("/{n}", ctx => ctx.Response.Text("a" + ctx.Request.GetRouteValue("n")));
                b.MapGet("/{n}", async ctx => { await Task.Yield(); ctx.Response.Text("b" + ctx.Request.GetRouteValue("n")); });
                int pa = a.Start(0), pb = b.Start(0);
                int errors = 0, done = 0;
                var stop = new ManualResetEventSlim();
                var threads = new List<Thread>();
                for (int t = 0; t < 4; t++)
                {
                    int id = t;
                    threads.Add(new Thread(() =>
                    {
                        int i = 0;
                        while (!stop.IsSet)
                        {
                            int port = (i % 2 == 0) ? pa : pb;
                            string want = (i % 2 == 0 ? "a" : "b") + id + "x" + i;
                            try { if (Http.Get(port, "/" + id + "x" + i).Text != want) Interlocked.Increment(ref errors); }
                            catch (Exception) { Interlocked.Increment(ref errors); }
                            Interlocked.Increment(ref done);
                            i++;
                        }
                    }));
                }
                threads.Add(new Thread(() =>
                {
                    while (!stop.IsSet) { GC.Collect(); GC.WaitForPendingFinalizers(); Thread.Sleep(5); }
                }));
                int cycles = 0;
                threads.Add(new Thread(() =>
                {
                    var c = new EmberServer();
                    c.MapGet("/", ctx => ctx.Response.Text("c"));
                    while (!stop.IsSet)
                    {
                        int port = c.Start(0);
                        try { if (Http.Get(port, "/").Text != "c") Interlocked.Increment(ref errors); }
                        catch (Exception) { Interlocked.Increment(ref errors); }
                        c.Stop(TimeSpan.FromMilliseconds(200));
                        cycles++;
                    }
                    c.Dispose();
                }));
                foreach (var t in threads) { t.IsBackground = true; t.Start(); }
                Thread.Sleep(3000);
                stop.Set();
                foreach (var t in threads) Assert.True(t.Join(15000), "thread ended");
                Assert.Equal(0, errors, "errors in " + done + " requests and " + cycles + " start/stop cycles");
                Assert.True(done > 200 && cycles > 5, "did work: " + done + " requests, " + cycles + " cycles");
            }
            Basics.WaitLiveServers(live);
        }

        [Test]
        public static void Utf8_request_header_values_are_decoded()
        {
            using (var s = new EmberServer())
            {
                s.MapGet("/", ctx => ctx.Response.Text(ctx.Request.GetHeader("x-name") + "|" + ctx.Request.Headers["X-Name"]));
                int port = s.Start(0);
                Assert.Equal("Jürgen ✓|Jürgen ✓", Http.Get(port, "/", "X-Name: Jürgen ✓").Text, "header value");
            }
        }
    }
}
