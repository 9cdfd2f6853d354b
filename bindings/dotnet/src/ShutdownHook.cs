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

        /// <summary>How long process exit waits for servers to stop (handlers blocked for longer
        /// are abandoned: the process ends around them).</summary>
        const int ExitBudgetMs = 3000;

        static void OnExit(object sender, EventArgs e)
        {
            s_exiting = true;
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
            t.Join(ExitBudgetMs);
        }
    }
}
