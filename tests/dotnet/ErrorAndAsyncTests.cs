// Handler failures (500s, the Error event, the handler timeout's 503 and late answers) and async
// handlers (many awaits on few threads, reads after await, TaskCompletionSource, completed tasks).
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
}
