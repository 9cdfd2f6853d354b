// Server-Sent Events (EmberEventStream) through raw clients and curl, and the reference app's
// 1 GiB upload with its RSS watched.
using System;
using System.Diagnostics;
using System.IO;
using System.Net.Sockets;
using System.Text;
using System.Threading;
using System.Threading.Tasks;
using Ember;

namespace EmberTests
{
    public static class Sse
    {
        static string ReadAll(RawClient c)
        {
            var sb = new StringBuilder();
            byte[] chunk;
            while ((chunk = c.ReadChunk()) != null) sb.Append(Encoding.UTF8.GetString(chunk));
            return sb.ToString();
        }

        [Test]
        public static void Events_are_framed_per_the_standard_with_multi_line_data_and_retry_first()
        {
            using (var s = new EmberServer())
            {
                s.MapGet("/sse", async ctx =>
                {
                    using (var sse = new EmberEventStream(ctx, TimeSpan.Zero, retryMs: 2500))
                    {
                        await sse.SendAsync("one");
                        await sse.SendAsync("a\nb\r\nc\rd", eventName: "multi", id: "7");
                        await sse.SendAsync("", id: "8");
                        await sse.CommentAsync("note");
                        sse.Send("{\"sync\": true}", "s");
                    }
                });
                int port = s.Start(0);
                using (var c = new RawClient(port))
                {
                    c.Get("/sse");
                    Assert.Equal(200, c.ReadHead(), "status");
                    Assert.Equal("text/event-stream", c.Headers["content-type"], "type");
                    Assert.Equal("no-cache", c.Headers["cache-control"], "cache");
                    Assert.Equal("chunked", c.Headers["transfer-encoding"], "streamed");
                    Assert.Equal("retry: 2500\n\n", Encoding.ASCII.GetString(c.ReadChunk()), "retry first, alone");
                    Assert.Equal("data: one\n\n", Encoding.ASCII.GetString(c.ReadChunk()), "one event = one write");
                    Assert.Equal("id: 7\nevent: multi\ndata: a\ndata: b\ndata: c\ndata: d\n\nid: 8\ndata: \n\n: note\n\nevent: s\ndata: {\"sync\": true}\n\n",
                        ReadAll(c), "rest");
                }
            }
        }

        [Test]
        public static void Bad_field_values_are_refused()
        {
            Assert.Throws<ArgumentException>(() => EmberEventStream_Format("x", "bad\nname", null), "newline in event");
            Assert.Throws<ArgumentException>(() => EmberEventStream_Format("x", null, "1\r2"), "CR in id");
            Assert.Throws<ArgumentException>(() => EmberEventStream_Format("x", null, "a\0b"), "NUL in id");
        }

        static void EmberEventStream_Format(string data, string ev, string id)
        {
            // Through a real stream: the check happens before anything is written.
            using (var s = new EmberServer())
            {
                Exception seen = null;
                s.MapGet("/", async ctx =>
                {
                    using (var sse = new EmberEventStream(ctx))
                    {
                        try { await sse.SendAsync(data, ev, id); } catch (Exception e) { seen = e; }
                    }
                });
                int port = s.Start(0);
                Http.Get(port, "/");
                if (seen != null) throw seen;
            }
        }

        [Test]
        public static void A_keep_alive_comment_goes_out_while_idle_and_Last_Event_ID_is_readable()
        {
            string lastId = null;
            using (var s = new EmberServer())
            {
                s.MapGet("/idle", async ctx =>
                {
                    using (var sse = new EmberEventStream(ctx, TimeSpan.FromMilliseconds(100)))
                    {
                        lastId = sse.LastEventId;
                        await Task.Delay(700);
                        await sse.SendAsync("late");
                    }
                });
                int port = s.Start(0);
                using (var c = new RawClient(port))
                {
                    c.Get("/idle", "Last-Event-ID: 41");
                    c.ReadHead();
                    string all = ReadAll(c);
                    Assert.True(all.StartsWith(": keep-alive\n\n", StringComparison.Ordinal), "keep-alive first: " + all);
                    Assert.True(all.EndsWith("data: late\n\n", StringComparison.Ordinal), "then the event: " + all);
                }
            }
            Assert.Equal("41", lastId, "Last-Event-ID");
        }

        [Test]
        public static void A_departed_client_stops_the_sender_quietly()
        {
            int errors = 0;
            Exception seen = null;
            var done = new ManualResetEventSlim();
            using (var s = new EmberServer())
            {
                s.Error += (o, e) => Interlocked.Increment(ref errors);
                s.MapGet("/sse", async ctx =>
                {
                    try
                    {
                        using (var sse = new EmberEventStream(ctx, TimeSpan.FromMilliseconds(50)))
                        {
                            while (true)
                            {
                                await sse.SendAsync(new string('x', 1000));
                                await Task.Delay(5, ctx.RequestAborted);
                            }
                        }
                    }
                    catch (Exception e) { seen = e; throw; }
                    finally { done.Set(); }
                });
                int port = s.Start(0);
                var c = new RawClient(port);
                c.Get("/sse");
                c.ReadHead();
                c.ReadChunk();
                c.Reset();
                Assert.True(done.Wait(10000), "the sender stopped");
                Assert.True(seen is EmberStreamException || seen is OperationCanceledException, "stream or cancel exception, got " + seen);
                Thread.Sleep(100);
                Assert.Equal(0, errors, "a departed client is no error");
            }
        }

        [Test]
        public static void Curl_reads_the_event_stream()
        {
            using (var s = new EmberServer())
            {
                s.MapGet("/sse", async ctx =>
                {
                    using (var sse = new EmberEventStream(ctx))
                        for (int i = 1; i <= 3; i++) await sse.SendAsync("{\"n\": " + i + "}", "tick", i.ToString());
                });
                int port = s.Start(0);
                var r = Curl.Run("-sS", "-N", "--max-time", "10", "http://127.0.0.1:" + port + "/sse");
                Assert.Equal(0, r.Exit, "curl: " + r.Err);
                Assert.Equal("id: 1\nevent: tick\ndata: {\"n\": 1}\n\nid: 2\nevent: tick\ndata: {\"n\": 2}\n\nid: 3\nevent: tick\ndata: {\"n\": 3}\n\n",
                    Encoding.UTF8.GetString(r.Out), "body");
            }
        }
    }

    public static class ReferenceApp
    {
        static string Root()
        {
            string d = AppDomain.CurrentDomain.BaseDirectory;
            while (d != null && !File.Exists(Path.Combine(d, "tests", "REFERENCE_APP.md"))) d = Path.GetDirectoryName(d);
            return d;
        }

        static long RssKib(int pid)
        {
            foreach (string line in File.ReadAllLines("/proc/" + pid + "/status"))
                if (line.StartsWith("VmRSS:", StringComparison.Ordinal)) return long.Parse(line.Split(new[] { ' ', '\t' }, StringSplitOptions.RemoveEmptyEntries)[1]);
            return -1;
        }

        [Test]
        public static void A_1_GiB_upload_to_the_reference_app_keeps_its_memory_flat()
        {
            string root = Root();
            string app = root == null ? null : Path.Combine(root, "samples", "dotnet", "EmberRef.exe");
            if (app == null || !File.Exists(app) || !Directory.Exists("/proc")) { Console.WriteLine("  (skipped: no samples/dotnet/EmberRef.exe or /proc)"); return; }
            var psi = new ProcessStartInfo("mono", "\"" + app + "\" 0") { UseShellExecute = false, RedirectStandardOutput = true, RedirectStandardError = true };
            using (var p = Process.Start(psi))
            {
                try
                {
                    string first = p.StandardOutput.ReadLine();
                    int port = int.Parse(first.Substring(first.LastIndexOf(':') + 1));
                    p.ErrorDataReceived += (o, e) => { };
                    p.BeginErrorReadLine();
                    // warm up (JIT, first buffers), then measure
                    Assert.Equal(200, Http.Send(port, "POST", "/upload", new byte[32 << 20]).Status, "warm-up upload");
                    long before = RssKib(p.Id), peak = before;
                    const long total = 1L << 30;
                    var block = new byte[1 << 20];
                    for (int i = 0; i < block.Length; i++) block[i] = (byte)(i * 7);
                    using (var c = new RawClient(port, timeoutMs: 120000))
                    {
                        c.Send("POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: " + total + "\r\n\r\n");
                        for (long sent = 0; sent < total; sent += block.Length)
                        {
                            c.Send(block);
                            if ((sent >> 20) % 64 == 0) peak = Math.Max(peak, RssKib(p.Id));
                        }
                        Assert.Equal(200, c.ReadHead(), "status");
                        string json = Encoding.ASCII.GetString(c.ReadBody());
                        Assert.True(json.StartsWith("{\"bytes\": " + total + ", \"sha256\": \"", StringComparison.Ordinal), json);
                    }
                    peak = Math.Max(peak, RssKib(p.Id));
                    Console.WriteLine("  reference app RSS: " + before + " KiB before, " + peak + " KiB peak during a 1 GiB upload");
                    Assert.True(peak - before < 8 * 1024, "RSS grew by " + (peak - before) + " KiB during a 1 GiB upload");
                }
                finally
                {
                    try { p.Kill(); } catch { }
                    p.WaitForExit(5000);
                }
            }
        }
    }
}
