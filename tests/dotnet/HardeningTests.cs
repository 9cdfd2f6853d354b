// Issue 13's .NET items: engine threads registered with Mono explicitly, and process exit that
// leaves no engine thread calling into the runtime.
using System;
using System.Reflection;
using System.Threading;
using Ember;

namespace EmberTests
{
    static class HardeningTests
    {
        static long HookCount(string name)
        {
            Type t = typeof(EmberServer).Assembly.GetType("Ember.ThreadHooks", true);
            return (long)t.GetProperty(name, BindingFlags.NonPublic | BindingFlags.Static).GetValue(null, null);
        }

        static void EngineThreadsAttachAndDetach(EmberDispatch dispatch)
        {
            long attached0 = HookCount("Attached"), detached0 = HookCount("Detached");
            bool background = false;
            string name = null;
            using (var s = new EmberServer(new EmberOptions { Dispatch = dispatch, Workers = 2, PoolThreads = 2 }))
            {
                s.MapGet("/", ctx =>
                {
                    background = Thread.CurrentThread.IsBackground;
                    name = dispatch.ToString();
                    ctx.Response.Text("ok");
                });
                int port = s.Start(0);
                for (int i = 0; i < 5; i++) Assert.Equal("ok", Http.Get(port, "/").Text, "answer");
                s.Stop(TimeSpan.FromSeconds(5));
            }
            long attached = HookCount("Attached") - attached0, detached = HookCount("Detached") - detached0;
            // 2 I/O workers (+ 2 pool threads in pool mode), each registered once when it started.
            int expected = dispatch == EmberDispatch.Pool ? 4 : 2;
            Assert.True(attached >= expected, dispatch + ": engine threads registered at start: " + attached);
            Assert.Equal(attached, detached, dispatch + ": every registered engine thread unregistered by Stop");
            Assert.True(background, dispatch + ": engine threads are background threads");
            Assert.True(name != null, "handler ran");
        }

        [Test]
        public static void Engine_threads_register_with_Mono_at_start_and_unregister_before_they_end_pool()
        {
            EngineThreadsAttachAndDetach(EmberDispatch.Pool);
        }

        [Test]
        public static void Engine_threads_register_with_Mono_at_start_and_unregister_before_they_end_inline()
        {
            EngineThreadsAttachAndDetach(EmberDispatch.Inline);
        }

        static void ExpectUnwound(string mode)
        {
            int code;
            string output;
            long ms;
            Children.Spawn(mode, out code, out output, out ms);
            Assert.Equal(0, code, mode + " exit code; output: " + output);
            Assert.True(output.Contains("handler unwound"), mode + ": the blocked handler was not unwound at exit; output: " + output);
            Assert.True(!output.Contains("did not return") && !output.Contains("Native Crash") && !output.Contains("SIGSEGV"),
                mode + ": output: " + output);
            long hooks = Children.ExitHooksMs(output);
            Assert.True(hooks >= 0 && hooks < 20000, mode + ": the exit hooks finished at " + hooks + " ms (the process ended after " + ms + " ms)");
        }

        [Test]
        public static void Process_exit_unwinds_a_blocked_pool_handler_so_the_server_stops()
        {
            ExpectUnwound("exit-blocked-pool");
        }

        [Test]
        public static void Process_exit_unwinds_a_blocked_inline_handler_so_the_server_stops()
        {
            ExpectUnwound("exit-blocked-inline");
        }
    }
}
