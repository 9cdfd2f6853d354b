// Stop under continuous load, counted on both sides (issue 12 item 7): eight raw-socket clients
// keep sending on keep-alive connections (reconnecting when one closes) while the host stops the
// server. Each request ends as a complete answer (status and all 32 KiB), a clean close before
// any byte of the answer came, or a truncated answer (none allowed). Every handler call must reach
// its client whole, no handler runs once Stop returned, every route's release callback comes.
using System;
using System.IO;
using System.Net.Sockets;
using System.Text;
using System.Threading;
using Ember;

namespace EmberTests
{
    public static class StopLoad
    {
        static readonly byte[] Body = Encoding.ASCII.GetBytes(new string('n', 32768));
        static readonly byte[] Request = Encoding.ASCII.GetBytes("GET /load HTTP/1.1\r\nHost: t\r\n\r\n");

        // 1 complete, 0 clean close before any byte, -1 truncated.
        static int One(NetworkStream s, byte[] buf)
        {
            try { s.Write(Request, 0, Request.Length); }
            catch (IOException) { return 0; }
            int got = 0, want = -1;
            var seen = new MemoryStream();
            for (;;)
            {
                int n;
                try { n = s.Read(buf, 0, buf.Length); }
                catch (IOException) { n = 0; }
                if (n <= 0) return got == 0 ? 0 : -1;
                got += n;
                if (want < 0)
                {
                    seen.Write(buf, 0, n);
                    string text = Encoding.ASCII.GetString(seen.GetBuffer(), 0, (int)seen.Length);
                    int end = text.IndexOf("\r\n\r\n", StringComparison.Ordinal);
                    if (end >= 0)
                    {
                        string head = text.Substring(0, end).ToLowerInvariant();
                        if (!head.StartsWith("http/1.1 200") || !head.Contains("content-length: " + Body.Length)) return -1;
                        want = end + 4 + Body.Length;
                    }
                }
                if (want >= 0 && got >= want) return got == want ? 1 : -1;
            }
        }

        static void StopUnderLoad(EmberDispatch dispatch)
        {
            int before = EmberDiagnostics.LiveNativeServers;
            int calls = 0, after = 0, stopped = 0, done = 0;
            int[,] results = new int[8, 3]; // complete, clean close, truncated
            var server = new EmberServer(new EmberOptions { Dispatch = dispatch });
            server.MapGet("/load", ctx =>
            {
                Interlocked.Increment(ref calls);
                if (Volatile.Read(ref stopped) != 0) Interlocked.Increment(ref after);
                ctx.Response.Bytes(Body, "application/octet-stream");
            });
            int port = server.Start(0);
            var threads = new Thread[8];
            for (int i = 0; i < threads.Length; i++)
            {
                int me = i;
                threads[i] = new Thread(() =>
                {
                    var buf = new byte[65536];
                    TcpClient tcp = null;
                    while (Volatile.Read(ref done) == 0)
                    {
                        if (tcp == null)
                        {
                            try { tcp = new TcpClient(); tcp.NoDelay = true; tcp.Connect("127.0.0.1", port); tcp.GetStream().ReadTimeout = 30000; }
                            catch (SocketException) { tcp.Close(); tcp = null; Thread.Sleep(2); continue; }
                        }
                        int r = One(tcp.GetStream(), buf);
                        if (r == 1) { results[me, 0]++; continue; }
                        results[me, r == 0 ? 1 : 2]++;
                        tcp.Close();
                        tcp = null;
                    }
                    if (tcp != null) tcp.Close();
                });
                threads[i].Start();
            }
            while (Volatile.Read(ref calls) < 500) Thread.Sleep(10);
            server.Stop(TimeSpan.FromSeconds(5));
            Volatile.Write(ref stopped, 1);
            Thread.Sleep(100); // the clients keep trying meanwhile
            Volatile.Write(ref done, 1);
            foreach (var t in threads) t.Join();
            server.Dispose();
            int complete = 0, clean = 0, truncated = 0;
            for (int i = 0; i < 8; i++) { complete += results[i, 0]; clean += results[i, 1]; truncated += results[i, 2]; }
            Console.WriteLine("    " + dispatch + ": " + calls + " calls, " + complete + " complete, " + clean + " clean closes, " + truncated + " truncated");
            Assert.Equal(0, truncated, "truncated answers");
            Assert.Equal(0, after, "handler calls after Stop returned");
            Assert.Equal(calls, complete, "every handler call reached its client whole");
            Assert.Equal(before, EmberDiagnostics.LiveNativeServers, "every route's release callback came");
        }

        [Test]
        public static void Stop_under_load_pool_loses_no_answer() { StopUnderLoad(EmberDispatch.Pool); }

        [Test]
        public static void Stop_under_load_inline_loses_no_answer() { StopUnderLoad(EmberDispatch.Inline); }
    }
}
