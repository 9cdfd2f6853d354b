// TLS listeners, the access log and the metrics through the binding: SslStream (Mono's TLS 1.2)
// against a certificate made with the openssl command line, and raw HTTP.
using System;
using System.Diagnostics;
using System.IO;
using System.Net.Security;
using System.Net.Sockets;
using System.Security.Authentication;
using System.Security.Cryptography.X509Certificates;
using System.Text;
using System.Threading;
using Ember;

namespace EmberTests
{
    static class TlsTests
    {
        /// <summary>A self-signed RSA certificate for localhost: (dir, cert path, key path).</summary>
        static string[] MakeCert(string cn)
        {
            string dir = Path.Combine(Path.GetTempPath(), "ember-tls-" + Guid.NewGuid().ToString("N"));
            Directory.CreateDirectory(dir);
            var psi = new ProcessStartInfo("openssl",
                "req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=" + cn + " -keyout key.pem -out cert.pem")
            { WorkingDirectory = dir, UseShellExecute = false, RedirectStandardError = true, RedirectStandardOutput = true };
            using (var p = Process.Start(psi))
            {
                p.StandardError.ReadToEnd();
                p.WaitForExit();
                Assert.Equal(0, p.ExitCode, "openssl req");
            }
            return new[] { dir, Path.Combine(dir, "cert.pem"), Path.Combine(dir, "key.pem") };
        }

        /// <summary>GET over TLS 1.2; the answer's body and the certificate's subject.</summary>
        static string[] HttpsGet(int port, string path)
        {
            using (var tcp = new TcpClient("127.0.0.1", port))
            {
                string subject = null;
                using (var ssl = new SslStream(tcp.GetStream(), false, (s, cert, chain, errors) => { subject = cert.Subject; return true; }))
                {
                    ssl.AuthenticateAsClient("localhost", null, SslProtocols.Tls12, false);
                    byte[] req = Encoding.ASCII.GetBytes("GET " + path + " HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
                    ssl.Write(req, 0, req.Length);
                    var ms = new MemoryStream();
                    var buf = new byte[8192];
                    int n;
                    try { while ((n = ssl.Read(buf, 0, buf.Length)) > 0) ms.Write(buf, 0, n); }
                    catch (IOException) { }
                    string text = Encoding.UTF8.GetString(ms.ToArray());
                    int at = text.IndexOf("\r\n\r\n", StringComparison.Ordinal);
                    return new[] { text.Substring(0, text.IndexOf("\r\n", StringComparison.Ordinal)), at < 0 ? "" : text.Substring(at + 4), subject };
                }
            }
        }

        [Test]
        public static void Https_with_a_certificate_from_files_and_a_reload()
        {
            string[] one = MakeCert("first"), two = MakeCert("second");
            var options = new EmberOptions();
            options.TlsListeners.Add(new EmberTlsListener("127.0.0.1:0", new EmberTlsConfig(one[1], one[2])));
            using (var server = new EmberServer(options))
            {
                server.MapGet("/", ctx => ctx.Response.Text("hello tls"));
                int plain = server.Start(0);
                Assert.Equal(1, server.TlsPorts.Count, "one TLS port");
                int port = server.TlsPorts[0];
                Assert.True(port != plain && port > 0, "a port of its own");
                string[] got = HttpsGet(port, "/");
                Assert.Equal("HTTP/1.1 200 OK", got[0], "status line");
                Assert.Equal("hello tls", got[1], "body");
                Assert.Equal("CN=first", got[2], "certificate");
                File.Copy(two[1], one[1], true);
                File.Copy(two[2], one[2], true);
                server.ReloadTls();
                Assert.Equal("CN=second", HttpsGet(port, "/")[2], "after ReloadTls");
                string[] three = MakeCert("third");
                server.SetTls(0, new EmberTlsConfig().AddPem(File.ReadAllText(three[1]), File.ReadAllText(three[2])));
                Assert.Equal("CN=third", HttpsGet(port, "/")[2], "after SetTls");
                Assert.Equal("hello tls", Http.Get(plain, "/").Text, "the plain listener");
            }
            foreach (var d in new[] { one[0], two[0] }) Directory.Delete(d, true);
        }

        [Test]
        public static void A_proxy_protocol_tls_listener_takes_the_client_from_the_header()
        {
            string[] c = MakeCert("localhost");
            var options = new EmberOptions();
            options.TlsListeners.Add(new EmberTlsListener("127.0.0.1:0", new EmberTlsConfig(c[1], c[2])) { ProxyProtocol = true });
            using (var server = new EmberServer(options))
            {
                server.MapGet("/who", ctx => ctx.Response.Text(ctx.Request.RemoteAddress));
                server.Start(0);
                using (var tcp = new TcpClient("127.0.0.1", server.TlsPorts[0]))
                {
                    // The balancer's header comes first, in clear, then the client's handshake.
                    byte[] header = Encoding.ASCII.GetBytes("PROXY TCP4 203.0.113.9 127.0.0.1 4444 443\r\n");
                    tcp.GetStream().Write(header, 0, header.Length);
                    using (var ssl = new SslStream(tcp.GetStream(), false, (s, cert, chain, errors) => true))
                    {
                        ssl.AuthenticateAsClient("localhost", null, SslProtocols.Tls12, false);
                        byte[] req = Encoding.ASCII.GetBytes("GET /who HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
                        ssl.Write(req, 0, req.Length);
                        var ms = new MemoryStream();
                        var buf = new byte[4096];
                        int n;
                        try { while ((n = ssl.Read(buf, 0, buf.Length)) > 0) ms.Write(buf, 0, n); }
                        catch (IOException) { }
                        string text = Encoding.UTF8.GetString(ms.ToArray());
                        Assert.True(text.StartsWith("HTTP/1.1 200", StringComparison.Ordinal) && text.EndsWith("\r\n\r\n203.0.113.9:4444", StringComparison.Ordinal), text);
                    }
                }
                // Without the header the connection is closed: the handshake fails.
                Assert.Throws<Exception>(() => HttpsGet(server.TlsPorts[0], "/who"), "no PROXY header");
            }
            Directory.Delete(c[0], true);
        }

        [Test]
        public static void A_wrong_certificate_path_throws_naming_the_file()
        {
            string missing = Path.Combine(Path.GetTempPath(), "no-such-" + Guid.NewGuid().ToString("N") + ".pem");
            string[] c = MakeCert("x");
            var e = Assert.Throws<EmberException>(() => new EmberTlsConfig(missing, c[2]), "missing file");
            Assert.True(e.Message.Contains(missing), "the message names the file: " + e.Message);
            Assert.True(e.Message.Contains("EMBER_ERR_INVALID_ARG"), e.Message);
            var k = Assert.Throws<EmberException>(() => new EmberTlsConfig(c[1], c[1]), "a certificate as the key");
            Assert.True(k.Message.Contains("holds no private key"), k.Message);
            Directory.Delete(c[0], true);
        }

        [Test]
        public static void Access_log_to_a_file_with_reopen_and_to_the_log_event()
        {
            string dir = Path.Combine(Path.GetTempPath(), "ember-log-" + Guid.NewGuid().ToString("N"));
            Directory.CreateDirectory(dir);
            string log = Path.Combine(dir, "access.log");
            using (var server = new EmberServer(new EmberOptions { AccessLogPath = log }))
            {
                server.MapGet("/", ctx => ctx.Response.Text("x"));
                int port = server.Start(0);
                Http.Get(port, "/?one", "User-Agent: mono");
                WaitFor(() => File.Exists(log) && File.ReadAllText(log).Contains("/?one"), "first line");
                File.Move(log, log + ".1");
                server.ReopenAccessLog();
                Http.Get(port, "/?two");
                WaitFor(() => File.Exists(log) && File.ReadAllText(log).Contains("\"GET /?two HTTP/1.1\" 200 1 "), "line in the new file");
                Assert.True(File.ReadAllText(log + ".1").Contains("\"GET /?one HTTP/1.1\" 200 1 \"-\" \"mono\""), File.ReadAllText(log + ".1"));
            }
            var lines = new System.Collections.Concurrent.ConcurrentQueue<string>();
            var opts = new EmberOptions { AccessLogToLogEvent = true, AccessLogFormat = EmberAccessLogFormat.Json, LogLevel = EmberLogLevel.Error };
            using (var server = new EmberServer(opts))
            {
                server.Log += (s, ev) => { if (ev.Level == EmberLogLevel.Access) lines.Enqueue(ev.Message); };
                int port = server.Start(0);
                Assert.Equal(404, Http.Get(port, "/nothing").Status, "404");
                WaitFor(() => lines.Count > 0, "an access line on the Log event");
            }
            string line;
            lines.TryPeek(out line);
            Assert.True(line.StartsWith("{\"time\":", StringComparison.Ordinal) && line.Contains("\"target\":\"/nothing\",\"version\":\"HTTP/1.1\",\"status\":404"), line);
            Directory.Delete(dir, true);
        }

        [Test]
        public static void Metrics_path_and_GetMetrics()
        {
            using (var server = new EmberServer(new EmberOptions { MetricsPath = "/metrics" }))
            {
                server.MapGet("/", ctx => ctx.Response.Text("x"));
                int port = server.Start(0);
                Http.Get(port, "/");
                var r = Http.Get(port, "/metrics");
                Assert.Equal(200, r.Status, "status");
                Assert.True(r.Headers["Content-Type"].StartsWith("text/plain; version=0.0.4", StringComparison.Ordinal), r.Headers["Content-Type"]);
                Assert.True(r.Text.Contains("ember_responses_total{code=\"200\"} 1\n"), r.Text);
                string text = server.GetMetrics();
                Assert.True(text.Contains("# TYPE ember_request_duration_seconds histogram"), text);
            }
            using (var off = new EmberServer())
            {
                off.Start(0);
                Assert.Throws<EmberException>(() => off.GetMetrics(), "metrics are off");
            }
        }

        static void WaitFor(Func<bool> condition, string what)
        {
            var sw = Stopwatch.StartNew();
            while (!condition())
            {
                if (sw.ElapsedMilliseconds > 5000) throw new AssertionException("timed out waiting for " + what);
                Thread.Sleep(20);
            }
        }
    }
}
