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

        static void OnExit(object sender, EventArgs e)
        {
            s_exiting = true;
            foreach (NativeInstance inst in NativeInstance.Snapshot())
            {
                try { inst.Owner.StopForExit(); } catch { }
                try { inst.Free(); } catch { }
            }
        }
    }
}
