using System;
using System.Runtime.InteropServices;

namespace Ember.Interop
{
    /// <summary>
    /// Owns one native <c>ember_server*</c>. Releasing it calls <c>ember_server_free</c>, which
    /// stops the server (force-closing what is left), waits until no callback runs any more and
    /// calls every route's release callback. SafeHandle guarantees that happens exactly once,
    /// also from the finalizer, and never while another P/Invoke call is using the handle.
    /// </summary>
    internal sealed class EmberServerHandle : SafeHandle
    {
        public EmberServerHandle() : base(IntPtr.Zero, true) { }

        public override bool IsInvalid { get { return handle == IntPtr.Zero; } }

        protected override bool ReleaseHandle()
        {
            // At process exit the runtime finalizes even reachable handles. A server still open
            // then is one whose stop cannot finish (e.g. Environment.Exit inside its own handler):
            // freeing it would wait for that handler forever. The process is ending: leave it.
            if (ShutdownHook.ProcessExiting) return true;
            // EMBER_ERR_STATE only if called from inside one of this server's handlers; the
            // binding never does that (Stop from a handler hands the free to another thread).
            return NativeMethods.ember_server_free(handle) == NativeMethods.EMBER_OK;
        }
    }
}
