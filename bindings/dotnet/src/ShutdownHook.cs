using System;
using System.Threading;

namespace Ember
{
    /// <summary>
    /// At process exit (or AppDomain unload) every running server is stopped and freed while the
    /// runtime is still fully alive, so no engine thread calls into a runtime that is going away.
    /// </summary>
    internal static class ShutdownHook
    {
        static int s_installed;
        static volatile bool s_exiting;

        internal static bool ProcessExiting { get { return s_exiting; } }

        internal static void Ensure()
        {
            if (Interlocked.Exchange(ref s_installed, 1) != 0) return;
            AppDomain.CurrentDomain.ProcessExit += OnExit;
            AppDomain.CurrentDomain.DomainUnload += OnExit;
        }

        /// <summary>How long process exit waits for servers to stop before it aborts the
        /// handlers that keep them from stopping.</summary>
        const int ExitBudgetMs = 3000;

        /// <summary>How long it then waits for the aborted handlers to unwind.</summary>
        const int AbortBudgetMs = 2000;

        static void OnExit(object sender, EventArgs e)
        {
            s_exiting = true;   // from now on callbacks run no user code (503, no log events)
            ThreadHooks.Exiting();
            var others = new System.Collections.Generic.List<NativeInstance>();
            foreach (NativeInstance inst in NativeInstance.Snapshot())
            {
                // Environment.Exit inside a handler: that server cannot finish stopping while this
                // thread is in its handler, so only start its stop.
                if (inst.IsCurrentHandlerThread) inst.StopForExitFromHandler();
                else others.Add(inst);
            }
            if (others.Count == 0) return;
            var t = new Thread(() =>
            {
                foreach (NativeInstance inst in others)
                {
                    try { inst.Owner.StopForExit(); } catch { }
                    try { inst.Free(); } catch { }
                }
            });
            t.IsBackground = true;
            t.Start();
            if (t.Join(ExitBudgetMs)) return;

            // A handler still runs (blocked in user code), so its server cannot finish stopping,
            // and once this hook returns the runtime shuts down under the engine's threads.
            // Abort those handlers (the binding resets the abort before it returns to the
            // engine) and wait for the stop to complete, so no engine thread is left to call
            // into the runtime.
            foreach (EngineThread et in ThreadHooks.InHandler())
            {
                if (et.Thread == Thread.CurrentThread) continue;
                try { et.Thread.Abort(); } catch { }
            }
            if (t.Join(AbortBudgetMs)) return;
            try
            {
                Console.Error.WriteLine("ember: at process exit a handler did not return after " +
                    (ExitBudgetMs + AbortBudgetMs) + " ms (blocked outside managed code?); exiting around it");
            }
            catch { }
        }
    }
}
