using System;
using System.Runtime.InteropServices;
using System.Threading;
using Ember.Interop;

namespace Ember
{
    /// <summary>
    /// A request's end (aborted or completed) written into 8 bytes of native memory, for code
    /// that runs in an AppDomain which may unload while the engine still holds its registration
    /// (the System.Web host's application domain). The engine calls a function of the server's
    /// domain (<see cref="FunctionPointer"/>, taken there and handed over as an integer), which
    /// only writes the cell; the application's domain reads it. No delegate of the application's
    /// domain is ever given to the engine, so an unloaded domain cannot be called into.
    ///
    /// The cell has two owners: the engine until the final event, the request until it ends;
    /// whoever lets go last frees it. Layout: int state (0, or EMBER_EVENT_ABORTED /
    /// EMBER_EVENT_COMPLETED), int owners.
    /// </summary>
    internal static unsafe class AbortCell
    {
        // Static: lives as long as the domain that made it (the server's), like the engine's registration.
        static readonly EmberEventFn s_fn = OnEvent;

        /// <summary>The engine callback, as a pointer. Take it in the server's domain.</summary>
        internal static IntPtr FunctionPointer { get { return Marshal.GetFunctionPointerForDelegate(s_fn); } }

        static void OnEvent(IntPtr cell, ulong req, int evt)
        {
            try
            {
                if (evt != NativeMethods.EMBER_EVENT_ABORTED && evt != NativeMethods.EMBER_EVENT_COMPLETED) return;
                int* c = (int*)cell;
                Volatile.Write(ref c[0], evt);
                if (Interlocked.Decrement(ref c[1]) == 0) Marshal.FreeHGlobal(cell);
            }
            catch
            {
                // never let an exception cross into native code
            }
        }

        /// <summary>Registers for the request's end; the caller owns the cell until <see cref="Release"/>.</summary>
        internal static IntPtr Watch(ulong req, IntPtr fn)
        {
            IntPtr cell = Marshal.AllocHGlobal(8);
            int* c = (int*)cell;
            c[0] = 0;
            c[1] = 2;
            int rc = NativeMethods.ember_request_on_event(req, fn, cell);
            if (rc != NativeMethods.EMBER_OK)
            {
                // Ended already: the engine will not call, so it is not an owner.
                c[1] = 1;
                c[0] = rc == NativeMethods.EMBER_ERR_ALREADY_ANSWERED ? NativeMethods.EMBER_EVENT_COMPLETED : NativeMethods.EMBER_EVENT_ABORTED;
            }
            return cell;
        }

        internal static bool IsAborted(IntPtr cell)
        {
            return Volatile.Read(ref ((int*)cell)[0]) == NativeMethods.EMBER_EVENT_ABORTED;
        }

        internal static void Release(IntPtr cell)
        {
            if (cell == IntPtr.Zero) return;
            if (Interlocked.Decrement(ref ((int*)cell)[1]) == 0) Marshal.FreeHGlobal(cell);
        }
    }
}
