// Lifetimes: callbacks and servers through forced GC, start/stop cycles, Stop and Dispose with
// requests in flight or from inside a handler, and process exit with a server running.
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
            long hooks = Children.ExitHooksMs(output);
            Assert.True(hooks >= 0, mode + ": the exit hooks never finished; output: " + output);
            Assert.True(hooks < maxMs, mode + ": the exit hooks finished " + hooks + " ms after start (the process ended after " + ms + " ms)");
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
