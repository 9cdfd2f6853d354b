// Child-process scenarios: process exit with servers still running. The parent test starts
// `mono EmberTests.exe --child <mode>` and expects exit code 0 and no runtime crash output.
using System;
using System.Diagnostics;
using System.Threading;
using System.Threading.Tasks;
using Ember;

namespace EmberTests
{
    static class Children
    {
        public static int Run(string[] args)
        {
            string mode = args.Length > 1 ? args[1] : "";
            switch (mode)
            {
                case "exit-running": return ExitRunning();
                case "exit-inflight": return ExitInFlight();
                case "exit-from-handler-auto": return ExitFromHandler(EmberDispatch.Auto);
                case "exit-from-handler-pool": return ExitFromHandler(EmberDispatch.Pool);
                case "exit-from-handler-inline": return ExitFromHandler(EmberDispatch.Inline);
                case "exit-inflight-inline": return ExitInFlightInline();
                case "exit-blocked-pool": return ExitBlocked(EmberDispatch.Pool);
                case "exit-blocked-inline": return ExitBlocked(EmberDispatch.Inline);
                default: Console.Error.WriteLine("unknown child mode " + mode); return 3;
            }
        }

        /// <summary>Main returns while a server runs (no Stop, no Dispose).</summary>
        static int ExitRunning()
        {
            var s = new EmberServer();
            MarkExitWork();
            s.MapGet("/", ctx => ctx.Response.Text("ok"));
            int port = s.Start(0);
            if (Http.Get(port, "/").Text != "ok") return 4;
            return 0;
        }

        /// <summary>Main returns while handlers are awaiting and while a blocking pool handler runs.</summary>
        static int ExitInFlight()
        {
            var s = new EmberServer();
            MarkExitWork();
            var entered = new CountdownEvent(2);
            s.MapGet("/await", async ctx => { entered.Signal(); await Task.Delay(30000); ctx.Response.Text("late"); });
            s.MapGet("/block", ctx => { entered.Signal(); Thread.Sleep(300); ctx.Response.Text("late"); });
            int port = s.Start(0);
            Task.Run(() => { try { Http.Get(port, "/await"); } catch { } });
            Task.Run(() => { try { Http.Get(port, "/block"); } catch { } });
            if (!entered.Wait(10000)) return 4;
            return 0;
        }

        /// <summary>Same with inline dispatch and a handler hammered by clients during exit.</summary>
        static int ExitInFlightInline()
        {
            var s = new EmberServer(new EmberOptions { Dispatch = EmberDispatch.Inline });
            MarkExitWork();
            s.MapGet("/", ctx => ctx.Response.Text("ok"));
            int port = s.Start(0);
            for (int i = 0; i < 4; i++)
            {
                var t = new Thread(() => { while (true) { try { Http.Get(port, "/"); } catch { } } });
                t.IsBackground = true;
                t.Start();
            }
            Thread.Sleep(300);
            return 0;
        }

        /// <summary>Main returns while a handler is blocked for a minute: process exit must
        /// unwind it (abort) so the server stops and no engine thread is left to call into the
        /// runtime; the handler's finally block tells the parent it was unwound.</summary>
        static int ExitBlocked(EmberDispatch dispatch)
        {
            var s = new EmberServer(new EmberOptions { Dispatch = dispatch, LogLevel = EmberLogLevel.Debug });
            MarkExitWork();
            s.Log += (o, e) => { };   // log callbacks during exit must not reach user code
            var entered = new ManualResetEventSlim();
            s.MapGet("/block", ctx =>
            {
                try { entered.Set(); Thread.Sleep(60000); ctx.Response.Text("late"); }
                finally { Console.Error.WriteLine("handler unwound"); }
            });
            int port = s.Start(0);
            Task.Run(() => { try { Http.Get(port, "/block"); } catch { } });
            if (!entered.Wait(10000)) return 4;
            return 0;
        }

        /// <summary>Environment.Exit called from inside a handler on an engine thread.</summary>
        static int ExitFromHandler(EmberDispatch dispatch)
        {
            var s = new EmberServer(new EmberOptions { Dispatch = dispatch });
            MarkExitWork();
            s.MapGet("/exit", ctx => { Environment.Exit(0); });
            int port = s.Start(0);
            try { Http.Get(port, "/exit"); } catch { }
            Thread.Sleep(10000);
            return 5;   // not reached when Exit worked
        }

        /// <summary>Mono 6.8 can end its shutdown 5 to 60 s late, after ProcessExit, when an idle
        /// thread-pool worker misses its abort (README, "The exit delay under Mono"). So the
        /// parent times the part that is Ember's: this handler, subscribed after the server's
        /// (the binding's hook comes first), says when the exit hooks are done.</summary>
        static void MarkExitWork()
        {
            AppDomain.CurrentDomain.ProcessExit += (o, e) => Console.Error.WriteLine(
                "child: exit hooks done at " + (long)(DateTime.Now - Process.GetCurrentProcess().StartTime).TotalMilliseconds + " ms");
        }

        /// <summary>When the child's exit hooks were done, in ms since it started; -1 if they never were.</summary>
        public static long ExitHooksMs(string output)
        {
            var m = System.Text.RegularExpressions.Regex.Match(output, @"child: exit hooks done at (\d+) ms");
            return m.Success ? long.Parse(m.Groups[1].Value) : -1;
        }

        public static void Spawn(string mode, out int exitCode, out string stderr, out long ms)
        {
            string mono = Process.GetCurrentProcess().MainModule.FileName;
            string exe = typeof(Children).Assembly.Location;
            var psi = new ProcessStartInfo(mono, "\"" + exe + "\" --child " + mode)
            {
                UseShellExecute = false,
                RedirectStandardError = true,
                RedirectStandardOutput = true,
            };
            var sw = Stopwatch.StartNew();
            using (var p = Process.Start(psi))
            {
                Task<string> err = p.StandardError.ReadToEndAsync();
                Task<string> outp = p.StandardOutput.ReadToEndAsync();
                // Past Mono's longest delay (60 s).
                if (!p.WaitForExit(75000))
                {
                    try { p.Kill(); } catch { }
                    exitCode = -999;
                    stderr = "child did not exit within 75 s";
                    ms = sw.ElapsedMilliseconds;
                    return;
                }
                p.WaitForExit();
                exitCode = p.ExitCode;
                stderr = err.Result + outp.Result;
                ms = sw.ElapsedMilliseconds;
            }
        }
    }
}
