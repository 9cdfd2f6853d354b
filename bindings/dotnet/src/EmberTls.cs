using System;
using System.Collections.Generic;
using System.Runtime.CompilerServices;
using System.Text;
using Ember.Interop;

namespace Ember
{
    /// <summary>
    /// The certificates of a TLS listener. Each is a PEM certificate chain (leaf first) with its
    /// private key, from files or from PEM text, for one SNI server name ("example.com",
    /// "*.example.com") or as the default (serverName null: clients that send no name or one no
    /// certificate has; without a default the first certificate serves them). Every certificate
    /// is checked when added: a file that cannot be read, holds no certificate or key, or a key
    /// that does not belong to its certificate throws an <see cref="EmberException"/> naming the
    /// file. <see cref="EmberServer.ReloadTls"/> reads the files again.
    /// </summary>
    public sealed class EmberTlsConfig
    {
        sealed class Entry
        {
            public string ServerName;
            public string CertPath, KeyPath;
            public byte[] CertPem, KeyPem;
        }

        readonly List<Entry> _entries = new List<Entry>();

        // Before any method of this class is compiled: Mono binds a P/Invoke when it compiles
        // its caller, and the engine must be loaded by full path first.
        // A failure is thrown again, with its own type, by the EnsureLoaded in AddFiles/AddPem.
        static EmberTlsConfig()
        {
            try { NativeLoader.EnsureLoaded(); }
            catch (Exception) { }
        }

        public EmberTlsConfig() { }

        /// <summary>A configuration with one default certificate from PEM files.</summary>
        public EmberTlsConfig(string certPath, string keyPath) { AddFiles(certPath, keyPath); }

        public int Count { get { lock (_entries) return _entries.Count; } }

        /// <summary>Adds a certificate and key from PEM files.</summary>
        public EmberTlsConfig AddFiles(string certPath, string keyPath, string serverName = null)
        {
            if (certPath == null) throw new ArgumentNullException("certPath");
            if (keyPath == null) throw new ArgumentNullException("keyPath");
            NativeLoader.EnsureLoaded();
            return Add(new Entry { ServerName = serverName, CertPath = certPath, KeyPath = keyPath });
        }

        /// <summary>Adds a certificate and key given as PEM text.</summary>
        public EmberTlsConfig AddPem(string certPem, string keyPem, string serverName = null)
        {
            if (certPem == null) throw new ArgumentNullException("certPem");
            if (keyPem == null) throw new ArgumentNullException("keyPem");
            NativeLoader.EnsureLoaded();
            return Add(new Entry { ServerName = serverName, CertPem = Encoding.ASCII.GetBytes(certPem), KeyPem = Encoding.ASCII.GetBytes(keyPem) });
        }

        [MethodImpl(MethodImplOptions.NoInlining)]
        EmberTlsConfig Add(Entry e)
        {
            // Checked now, so a wrong path fails where it was written.
            Free(Build(new[] { e }));
            lock (_entries) _entries.Add(e);
            return this;
        }

        /// <summary>An ember_tls_config* the caller frees with <see cref="Free"/>.</summary>
        internal IntPtr Build()
        {
            Entry[] entries;
            lock (_entries) entries = _entries.ToArray();
            if (entries.Length == 0) throw new InvalidOperationException("The EmberTlsConfig has no certificate.");
            return Build(entries);
        }

        static IntPtr Build(Entry[] entries)
        {
            IntPtr cfg;
            Native.Check(NativeMethods.ember_tls_config_new(out cfg), "ember_tls_config_new");
            try
            {
                foreach (var e in entries)
                {
                    byte[] name = e.ServerName == null ? null : Utf8.Z(e.ServerName);
                    if (e.CertPath != null)
                        Native.Check(NativeMethods.ember_tls_config_add_cert_files(cfg, name, Utf8.Z(e.CertPath), Utf8.Z(e.KeyPath)),
                            "ember_tls_config_add_cert_files");
                    else
                        Native.Check(NativeMethods.ember_tls_config_add_cert_pem(cfg, name, e.CertPem, (UIntPtr)e.CertPem.Length,
                            e.KeyPem, (UIntPtr)e.KeyPem.Length), "ember_tls_config_add_cert_pem");
                }
            }
            catch
            {
                Free(cfg);
                throw;
            }
            return cfg;
        }

        internal static void Free(IntPtr cfg) { NativeMethods.ember_tls_config_free(cfg); }
    }

    /// <summary>A TLS listener of <see cref="EmberOptions.TlsListeners"/>.</summary>
    public sealed class EmberTlsListener
    {
        public EmberTlsListener(string address, EmberTlsConfig tls)
        {
            if (address == null) throw new ArgumentNullException("address");
            if (tls == null) throw new ArgumentNullException("tls");
            Address = address;
            Tls = tls;
        }

        /// <summary>"127.0.0.1:8443", "[::1]:0" (port 0 picks a free one: see <see cref="EmberServer.TlsPorts"/>).</summary>
        public string Address { get; private set; }
        public EmberTlsConfig Tls { get; private set; }
        /// <summary>SO_REUSEPORT.</summary>
        public bool ReusePort { get; set; }
        /// <summary>Behind a balancer that sends a PROXY protocol header (v1 or v2, before the TLS
        /// handshake) naming the client, which becomes the request's RemoteAddress; connections
        /// without one are closed.</summary>
        public bool ProxyProtocol { get; set; }
    }

    /// <summary>The access log's line format.</summary>
    public enum EmberAccessLogFormat
    {
        /// <summary>Apache's Combined Log Format (times in UTC).</summary>
        Combined = 1,
        /// <summary>One JSON object per line.</summary>
        Json = 2,
    }

    /// <summary>Sets up TLS listeners, the access log and the metrics on a native server.</summary>
    internal static class TlsSetup
    {
        internal static void Configure(EmberServerHandle h, EmberOptions o)
        {
            if (o.AccessLogPath != null || o.AccessLogToLogEvent)
            {
                byte[] path = o.AccessLogPath == null ? null : Utf8.Z(o.AccessLogPath);
                Native.Check(NativeMethods.ember_server_set_access_log(h, (int)o.AccessLogFormat, path), "ember_server_set_access_log");
            }
            if (o.MetricsPath != null)
                Native.Check(NativeMethods.ember_server_set_metrics(h, Utf8.Z(o.MetricsPath)), "ember_server_set_metrics");
            foreach (var l in o.TlsListeners)
            {
                IntPtr cfg = l.Tls.Build();
                try
                {
                    uint flags = (l.ReusePort ? NativeMethods.EMBER_LISTEN_REUSE_PORT : 0) | (l.ProxyProtocol ? NativeMethods.EMBER_LISTEN_PROXY_PROTOCOL : 0);
                    Native.Check(NativeMethods.ember_server_listen_tls(h, Utf8.Z(l.Address), flags, cfg),
                        "ember_server_listen_tls(" + l.Address + ")");
                }
                finally { EmberTlsConfig.Free(cfg); }
            }
        }

        /// <summary>The TLS listeners' ports: they come after the plain listeners.</summary>
        internal static int[] Ports(EmberServerHandle h, int plain, EmberOptions o)
        {
            var ports = new int[o.TlsListeners.Count];
            for (int i = 0; i < ports.Length; i++)
            {
                ushort p;
                Native.Check(NativeMethods.ember_server_port(h, (UIntPtr)(uint)(plain + i), out p), "ember_server_port");
                ports[i] = p;
            }
            return ports;
        }
    }
}
