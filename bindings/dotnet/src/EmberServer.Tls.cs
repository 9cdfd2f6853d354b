using System;
using System.Collections.Generic;
using System.Text;
using Ember.Interop;

namespace Ember
{
    public sealed partial class EmberServer
    {
        int[] _tlsPorts = new int[0];

        /// <summary>Bound ports of Options.TlsListeners, in order (empty before Start).</summary>
        public IReadOnlyList<int> TlsPorts { get { return (int[])_tlsPorts.Clone(); } }

        /// <summary>Reads every TLS listener's certificate files again, for new connections (open
        /// ones keep theirs). All or nothing: a bad file throws, naming it, and changes nothing.</summary>
        public void ReloadTls()
        {
            Running(h => Native.Check(NativeMethods.ember_server_tls_reload(h), "ember_server_tls_reload"));
        }

        /// <summary>Gives the <paramref name="index"/>-th TLS listener other certificates.</summary>
        public void SetTls(int index, EmberTlsConfig tls)
        {
            if (tls == null) throw new ArgumentNullException("tls");
            int plain = _ports.Length;
            if (index < 0 || index >= _tlsPorts.Length) throw new ArgumentOutOfRangeException("index");
            Running(h =>
            {
                IntPtr cfg = tls.Build();
                try { Native.Check(NativeMethods.ember_server_tls_set(h, (UIntPtr)(uint)(plain + index), cfg), "ember_server_tls_set"); }
                finally { EmberTlsConfig.Free(cfg); }
            });
        }

        /// <summary>Closes the access log file and opens it again by its path (after logrotate moved it).</summary>
        public void ReopenAccessLog()
        {
            Running(h => Native.Check(NativeMethods.ember_server_reopen_access_log(h), "ember_server_reopen_access_log"));
        }

        /// <summary>The metrics in the Prometheus text format (Options.MetricsPath must be set).</summary>
        public string GetMetrics()
        {
            string text = null;
            Running(h =>
            {
                int size = 8192;
                for (;;)
                {
                    var buf = new byte[size];
                    UIntPtr need;
                    int rc = NativeMethods.ember_server_metrics(h, buf, (UIntPtr)buf.Length, out need);
                    if (rc == NativeMethods.EMBER_ERR_BUFFER_TOO_SMALL) { size = (int)need + 1024; continue; }
                    Native.Check(rc, "ember_server_metrics");
                    text = Encoding.UTF8.GetString(buf, 0, (int)need);
                    return;
                }
            });
            return text;
        }

        void Running(Action<EmberServerHandle> call)
        {
            NativeInstance inst;
            lock (_gate) inst = _running;
            if (inst == null) throw new InvalidOperationException("The server is not running.");
            call(inst.Handle);
        }
    }
}
