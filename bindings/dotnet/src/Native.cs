using System;
using Ember.Interop;

namespace Ember
{
    /// <summary>Result-code helpers around NativeMethods.</summary>
    internal static unsafe class Native
    {
        internal static void Check(int rc, string call)
        {
            if (rc != NativeMethods.EMBER_OK) throw Error(rc, call);
        }

        /// <summary>Must run on the thread that made the failed call, before any other ember_ call.</summary>
        internal static EmberException Error(int rc, string call)
        {
            string msg = LastError();
            string text = call + " failed: " + ResultName(rc) + (msg.Length > 0 ? ": " + msg : string.Empty);
            return new EmberException((EmberResult)rc, text);
        }

        internal static string LastError()
        {
            try { return Utf8.FromCString(NativeMethods.ember_last_error()); }
            catch (Exception) { return string.Empty; }
        }

        internal static string ResultName(int rc)
        {
            try { return Utf8.FromCString(NativeMethods.ember_result_name(rc)); }
            catch (Exception) { return "EMBER_RESULT(" + rc + ")"; }
        }
    }
}
