// Imports for TLS listeners, the access log and the metrics (include/ember.h), kept apart from
// NativeMethods.cs so that work on other parts of the ABI does not collide with them.
using System;
using System.Runtime.InteropServices;

namespace Ember.Interop
{
    internal static unsafe partial class NativeMethods
    {
        internal const int EMBER_ERR_BUFFER_TOO_SMALL = -11;
        internal const int EMBER_LOG_ACCESS = 5;
        internal const int EMBER_ACCESS_LOG_OFF = 0;
        internal const int EMBER_ACCESS_LOG_COMBINED = 1;
        internal const int EMBER_ACCESS_LOG_JSON = 2;
        internal const uint EMBER_LISTEN_REUSE_PORT = 1;
        internal const uint EMBER_LISTEN_PROXY_PROTOCOL = 2;

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int ember_tls_config_new(out IntPtr config);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int ember_tls_config_free(IntPtr config);

        /// <summary>serverName: NULL for the default certificate.</summary>
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int ember_tls_config_add_cert_files(IntPtr config, byte[] serverName, byte[] certPath, byte[] keyPath);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int ember_tls_config_add_cert_pem(IntPtr config, byte[] serverName,
            byte[] certPem, UIntPtr certLen, byte[] keyPem, UIntPtr keyLen);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int ember_server_listen_tls(EmberServerHandle server, byte[] address, uint flags, IntPtr config);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int ember_server_tls_reload(EmberServerHandle server);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int ember_server_tls_set(EmberServerHandle server, UIntPtr index, IntPtr config);

        /// <summary>path: NULL sends the lines to the log callback (level EMBER_LOG_ACCESS).</summary>
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int ember_server_set_access_log(EmberServerHandle server, int format, byte[] path);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int ember_server_reopen_access_log(EmberServerHandle server);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int ember_server_set_metrics(EmberServerHandle server, byte[] path);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int ember_server_metrics(EmberServerHandle server, byte[] buf, UIntPtr cap, out UIntPtr outLen);
    }
}
