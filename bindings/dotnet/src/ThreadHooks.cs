using System;
using System.Collections.Concurrent;
using System.Collections.Generic;
using System.Runtime.InteropServices;
using System.Threading;
using Ember.Interop;

namespace Ember
{
    /// <summary>
    /// Under Mono, every engine thread (I/O worker and pool thread) is registered with the
    /// runtime when it starts (a managed start hook: the callback attaches it) and unregistered
    /// before it ends by the native shim libember_mono (bindings/dotnet/native/ember_mono.c),
    /// the stop hook: a thread cannot detach itself from inside a managed callback.
    /// Without it Mono registers a thread implicitly on its first callback and unregisters it
    /// only while the thread is being torn down. The .NET Framework needs no shim (the CLR
    /// tracks native threads itself); when the shim is missing nothing is set.
    /// Engine threads are also recorded here, so process exit can tell which of them are
    /// inside a handler (see <see cref="ShutdownHook"/>).
    /// </summary>
    internal static class ThreadHooks
    {
        [UnmanagedFunctionPointer(CallingConvention.Cdecl)]
        delegate void ManagedFn(int starting);

        [DllImport("ember_mono", CallingConvention = CallingConvention.Cdecl)]
        static extern int ember_mono_init(ManagedFn managed);

        [DllImport("ember_mono", CallingConvention = CallingConvention.Cdecl)]
        static extern IntPtr ember_mono_stop_hook();

        [DllImport("ember_mono", CallingConvention = CallingConvention.Cdecl)]
        static extern void ember_mono_exiting();

        // Static: they live as long as this AppDomain, so the engine and the shim can always call them.
        static readonly ManagedFn s_managed = OnThread;
        static readonly EmberThreadFn s_startFn = userData => OnThread(1);
        static readonly object s_lock = new object();
        // Lock-free: a thread that ends during process exit must never wait for a lock whose
        // holder the runtime has already suspended.
        static readonly ConcurrentDictionary<EngineThread, byte> s_threads = new ConcurrentDictionary<EngineThread, byte>();
        static int s_state;   // 0 = not tried, 1 = shim ready, -1 = unavailable
        static IntPtr s_start, s_stop;
        static long s_attached, s_detached;

        [ThreadStatic] static EngineThread t_engine;

        /// <summary>Engine threads registered / unregistered so far (tests).</summary>
        internal static long Attached { get { return Interlocked.Read(ref s_attached); } }
        internal static long Detached { get { return Interlocked.Read(ref s_detached); } }

        static long s_callbacks, s_foreign;

        /// <summary>Counts an engine callback, and whether it came on a thread the start hook
        /// did not register (with the hooks set, that would be a thread the runtime only attached
        /// implicitly; tests assert it never happens for events and WebSocket callbacks).</summary>
        internal static void NoteCallback()
        {
            if (Volatile.Read(ref s_state) <= 0) return;
            Interlocked.Increment(ref s_callbacks);
            if (t_engine == null) Interlocked.Increment(ref s_foreign);
        }

        internal static long Callbacks { get { return Interlocked.Read(ref s_callbacks); } }
        internal static long ForeignCallbacks { get { return Interlocked.Read(ref s_foreign); } }

        /// <summary>This thread's record when it is an engine thread (null otherwise).</summary>
        internal static EngineThread Current { get { return t_engine; } }

        /// <summary>Sets the hooks on a server before start, when the shim is there.</summary>
        internal static void Apply(EmberServerHandle h)
        {
            if (!Ready()) return;
            Native.Check(NativeMethods.ember_server_set_thread_hooks_native(h, s_start, s_stop, IntPtr.Zero),
                "ember_server_set_thread_hooks");
        }

        static bool Ready()
        {
            int state = Volatile.Read(ref s_state);
            if (state != 0) return state > 0;
            lock (s_lock)
            {
                if (s_state != 0) return s_state > 0;
                s_state = -1;
                if (Type.GetType("Mono.Runtime") == null) return false;
                try
                {
                    if (ember_mono_init(s_managed) != 0) return false;
                    s_stop = ember_mono_stop_hook();
                    s_start = Marshal.GetFunctionPointerForDelegate(s_startFn);
                    s_state = 1;
                }
                catch (DllNotFoundException) { }
                catch (EntryPointNotFoundException) { }
                return s_state > 0;
            }
        }

        /// <summary>Engine threads currently running host code.</summary>
        internal static List<EngineThread> InHandler()
        {
            var list = new List<EngineThread>();
            foreach (EngineThread t in s_threads.Keys)
            {
                if (Volatile.Read(ref t.Depth) > 0) list.Add(t);
            }
            return list;
        }

        /// <summary>Process exit began: from now on an ending engine thread stays in native
        /// code (no managed call, no detach), since entering the runtime while it shuts down can
        /// block for good, and the exit makes the detach moot.</summary>
        internal static void Exiting()
        {
            if (Volatile.Read(ref s_state) <= 0) return;
            try { ember_mono_exiting(); } catch { }
        }

        static void OnThread(int starting)
        {
            try
            {
                if (starting != 0)
                {
                    // Like a thread that enters through a callback: it must not keep the
                    // process alive at exit.
                    Thread.CurrentThread.IsBackground = true;
                    var et = new EngineThread(Thread.CurrentThread);
                    t_engine = et;
                    s_threads[et] = 0;
                    Interlocked.Increment(ref s_attached);
                }
                else
                {
                    EngineThread et = t_engine;
                    t_engine = null;
                    byte unused;
                    if (et != null) s_threads.TryRemove(et, out unused);
                    Interlocked.Increment(ref s_detached);
                }
            }
            catch
            {
                // never let an exception cross into native code
            }
        }
    }

    /// <summary>One engine thread; Depth &gt; 0 while it runs host code.</summary>
    internal sealed class EngineThread
    {
        internal readonly Thread Thread;
        internal int Depth;

        internal EngineThread(Thread thread) { Thread = thread; }
    }
}
