// Auto dispatch (the default): handlers run on the I/O thread that read the request, and one
// that blocks holds only its own connection. Which thread ran a handler is read from the
// kernel's name for it: the engine names its I/O threads "ember-io", its pool threads "ember-cb-N".
using System;
using System.IO;
using System.Runtime.InteropServices;
using System.Threading;
using Ember;

namespace EmberTests
{
    public static class AutoDispatch
    {
        [DllImport("libc", EntryPoint = "syscall")]
        static extern int Syscall(int number);

        const int SYS_gettid = 186;   // x86_64

        static string ThreadName()
        {
            return File.ReadAllText("/proc/self/task/" + Syscall(SYS_gettid) + "/comm").Trim();
        }

        [Test]
        public static void Default_dispatch_is_auto_and_fast_handlers_run_on_the_io_thread()
        {
            Assert.Equal(EmberDispatch.Auto, new EmberOptions().Dispatch, "default dispatch");
            using (var s = new EmberServer(new EmberOptions()))
            {
                s.MapGet("/where", ctx => ctx.Response.Text(ThreadName()));
                int port = s.Start(0);
                for (int i = 0; i < 5; i++)
                    Assert.Equal("ember-io", Http.Get(port, "/where").Text, "thread of request " + i);
            }
        }

        [Test]
        public static void A_sleeping_handler_under_auto_does_not_stall_other_connections()
        {
            var started = new ManualResetEventSlim();
            var release = new ManualResetEventSlim();
            var done = new ManualResetEventSlim();
            string where = null;
            HttpResult slept = null;
            // One I/O thread: the sleeper takes it (and the one inline slot); the spare I/O
            // thread must take over the other sockets.
            using (var s = new EmberServer(new EmberOptions { Dispatch = EmberDispatch.Auto, Workers = 1 }))
            {
                s.MapGet("/sleep", ctx =>
                {
                    where = ThreadName();
                    started.Set();
                    // Blocks in Thread.Sleep (as a database call would) until the test has its
                    // answers; the cap only keeps a broken engine from hanging the run.
                    for (int i = 0; i < 6000 && !release.IsSet; i++) Thread.Sleep(10);
                    ctx.Response.Text("slept");
                });
                s.MapGet("/fast", ctx => ctx.Response.Text("fast"));
                int port = s.Start(0);
                var sleeper = new Thread(() => { slept = Http.Get(port, "/sleep"); done.Set(); });
                sleeper.Start();
                try
                {
                    Assert.True(started.Wait(30000), "the sleeping handler never started");
                    Assert.Equal("ember-io", where, "the first request runs inline, on the I/O thread");
                    for (int i = 0; i < 20; i++)
                    {
                        Assert.Equal("fast", Http.Get(port, "/fast").Text, "fast answer " + i);
                        Assert.True(!done.IsSet, "fast answer " + i + " came while the handler slept");
                    }
                }
                finally
                {
                    release.Set();
                    sleeper.Join(60000);
                }
                Assert.Equal(200, slept.Status, "the sleeper's status");
                Assert.Equal("slept", slept.Text, "the sleeper's answer");
            }
        }

        [Test]
        public static void MapPooled_routes_run_on_the_pool_under_auto()
        {
            using (var s = new EmberServer(new EmberOptions()))
            {
                s.MapPooled("GET", "/pooled", ctx => ctx.Response.Text(ThreadName()));
                s.MapGet("/plain", ctx => ctx.Response.Text(ThreadName()));
                int port = s.Start(0);
                Assert.Equal("ember-io", Http.Get(port, "/plain").Text, "plain route");
                string pooled = Http.Get(port, "/pooled").Text;
                Assert.True(pooled.StartsWith("ember-cb-"), "pooled route ran on " + pooled);
            }
        }
    }
}
