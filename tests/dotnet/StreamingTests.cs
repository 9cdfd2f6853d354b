// Streamed answers (EmberResponse.StartStream / EmberResponseStream) and RequestAborted,
// through raw HTTP/1.1 clients and curl over HTTP/2.
using System;
using System.Diagnostics;
using System.IO;
using System.Linq;
using System.Text;
using System.Threading;
using System.Threading.Tasks;
using Ember;

namespace EmberTests
{
    public static class Streaming
    {
        static byte[] Pattern(int i, int size)
        {
            var b = new byte[size];
            for (int j = 0; j < size; j++) b[j] = (byte)('a' + i % 26);
            return b;
        }

        [Test]
        public static void Sync_handler_streams_chunks_and_the_answer_ends_when_it_returns()
        {
            using (var s = new EmberServer())
            {
                s.MapGet("/s", ctx =>
                {
                    ctx.Response.SetHeader("X-Before", "yes");
                    Stream body = ctx.Response.StartStream(201, "text/plain");
                    for (int i = 0; i < 3; i++)
                    {
                        byte[] b = Encoding.ASCII.GetBytes("part" + i + ";");
                        body.Write(b, 0, b.Length);
                    }
                });
                int port = s.Start(0);
                using (var c = new RawClient(port))
                {
                    c.Get("/s");
                    Assert.Equal(201, c.ReadHead(), "status");
                    Assert.Equal("chunked", c.Headers["transfer-encoding"], "chunked");
                    Assert.Equal("yes", c.Headers["x-before"], "headers set before the start");
                    Assert.Equal("text/plain", c.Headers["content-type"], "type");
                    Assert.Equal("part0;", Encoding.ASCII.GetString(c.ReadChunk()), "first chunk is one write");
                    Assert.Equal("part0;part1;part2;".Substring(6), Encoding.ASCII.GetString(c.ReadBody()), "rest");
                    // keep-alive still works after a streamed answer
                    c.Get("/s");
                    Assert.Equal(201, c.ReadHead(), "second status");
                    Assert.Equal("part0;part1;part2;", Encoding.ASCII.GetString(c.ReadBody()), "second body");
                }
            }
        }

        [Test]
        public static void Chunks_reach_the_client_while_the_handler_still_writes()
        {
            using (var s = new EmberServer())
            {
                var release = new ManualResetEventSlim();
                s.MapGet("/s", async ctx =>
                {
                    using (var body = ctx.Response.StartStream(200, "text/plain"))
                    {
                        await body.WriteAsync(Encoding.ASCII.GetBytes("first"), 0, 5);
                        await Task.Run(() => release.Wait(10000));
                        await body.WriteAsync(Encoding.ASCII.GetBytes("second"), 0, 6);
                    }
                });
                int port = s.Start(0);
                using (var c = new RawClient(port))
                {
                    c.Get("/s");
                    c.ReadHead();
                    Assert.Equal("first", Encoding.ASCII.GetString(c.ReadChunk()), "first chunk before the handler goes on");
                    release.Set();
                    Assert.Equal("second", Encoding.ASCII.GetString(c.ReadChunk()), "second");
                    Assert.True(c.ReadChunk() == null, "end");
                }
            }
        }

        [Test]
        public static void WriteAsync_waits_for_a_slow_reader_and_loses_nothing()
        {
            // The client reads nothing for a while: WriteAsync must stop at the engine's queue
            // limit (plus the socket buffers), not run ahead through all 32 MiB.
            const int pieces = 128, size = 256 * 1024;   // 32 MiB
            long written = 0;
            using (var s = new EmberServer(new EmberOptions { StreamQueueBytes = 256 * 1024 }))
            {
                s.MapGet("/big", async ctx =>
                {
                    using (var body = ctx.Response.StartStream(200, "application/octet-stream"))
                    {
                        for (int i = 0; i < pieces; i++)
                        {
                            await body.WriteAsync(Pattern(i, size), 0, size);
                            Interlocked.Add(ref written, size);
                        }
                    }
                });
                int port = s.Start(0);
                using (var c = new RawClient(port, receiveBuffer: 65536, timeoutMs: 20000))
                {
                    c.Get("/big");
                    c.ReadHead();
                    Thread.Sleep(800);
                    long stalled = Interlocked.Read(ref written);
                    // the queue (256 KiB) + one piece + the kernel's socket buffers (loopback
                    // autotuning takes up to tcp_wmem's 4 MiB), far below the 32 MiB it would otherwise write
                    Assert.True(stalled < 12L << 20, "the writer ran ahead of the client: " + stalled + " bytes");
                    Assert.True(EmberDiagnostics.EventRegistrations >= 1, "a refused write listens for the writable notice");
                    byte[] body = c.ReadBody();
                    Assert.Equal(pieces * size, body.Length, "length");
                    for (int i = 0; i < pieces; i++)
                        Assert.True(body[i * size] == (byte)('a' + i % 26) && body[i * size + size - 1] == (byte)('a' + i % 26), "piece " + i);
                }
                Assert.True(Wait.Until(() => EmberDiagnostics.EventRegistrations == 0), "the registration ends with the answer");
            }
        }

        [Test]
        public static void Blocking_Write_waits_in_pool_dispatch_and_times_out_on_a_client_that_never_reads()
        {
            Exception seen = null;
            int errors = 0;
            long written = 0;
            using (var s = new EmberServer(new EmberOptions { Dispatch = EmberDispatch.Pool, StreamQueueBytes = 64 * 1024 }))
            {
                s.Error += (o, e) => Interlocked.Increment(ref errors);
                var done = new ManualResetEventSlim();
                s.MapGet("/block", ctx =>
                {
                    var body = ctx.Response.StartStream();
                    body.WriteTimeout = 500;
                    var chunk = new byte[64 * 1024];
                    try
                    {
                        for (int i = 0; i < 1024; i++)
                        {
                            body.Write(chunk, 0, chunk.Length);
                            Interlocked.Add(ref written, chunk.Length);
                        }
                    }
                    catch (Exception e) { seen = e; throw; }
                    finally { done.Set(); }
                });
                int port = s.Start(0);
                using (var c = new RawClient(port, receiveBuffer: 16384))
                {
                    c.Get("/block");
                    Assert.True(done.Wait(20000), "the write gave up");
                    var se = seen as EmberStreamException;
                    Assert.True(se != null, "EmberStreamException, got " + seen);
                    Assert.Equal(EmberResult.TimedOut, se.Result, "result");
                    Assert.True(Interlocked.Read(ref written) < 64L << 20, "stopped early: " + written);
                    // a cut answer: the connection ends without the last chunk
                    Assert.True(c.ClosedByServer(), "the cut answer closes the connection");
                }
                Thread.Sleep(100);
                Assert.Equal(0, errors, "a client that stalls is not the handler's error");
            }
        }

        [Test]
        public static void Inline_dispatch_refuses_a_blocking_Write_on_a_full_queue_but_WriteAsync_works()
        {
            Exception seen = null;
            using (var s = new EmberServer(new EmberOptions { Dispatch = EmberDispatch.Inline, StreamQueueBytes = 16 * 1024 }))
            {
                var done = new ManualResetEventSlim();
                s.MapGet("/sync", ctx =>
                {
                    var body = ctx.Response.StartStream();
                    var chunk = new byte[16 * 1024];
                    try { for (int i = 0; i < 64; i++) body.Write(chunk, 0, chunk.Length); }
                    catch (Exception e) { seen = e; }
                    done.Set();
                });
                s.MapGet("/async", async ctx =>
                {
                    using (var body = ctx.Response.StartStream())
                    {
                        for (int i = 0; i < 64; i++) await body.WriteAsync(Pattern(i, 16 * 1024), 0, 16 * 1024);
                    }
                });
                int port = s.Start(0);
                using (var c = new RawClient(port, receiveBuffer: 8192))
                {
                    c.Get("/sync");
                    Assert.True(done.Wait(10000), "handler returned");
                    Assert.True(seen is InvalidOperationException, "InvalidOperationException, got " + seen);
                }
                using (var c = new RawClient(port))
                {
                    c.Get("/async");
                    c.ReadHead();
                    byte[] body = c.ReadBody();
                    Assert.Equal(64 * 16 * 1024, body.Length, "async length");
                    Assert.Equal((byte)('a' + 63 % 26), body[body.Length - 1], "last piece");
                }
            }
        }

        [Test]
        public static void A_handler_that_throws_mid_stream_cuts_the_answer_and_is_reported()
        {
            int errors = 0;
            using (var s = new EmberServer())
            {
                s.Error += (o, e) => Interlocked.Increment(ref errors);
                s.MapGet("/broken", ctx =>
                {
                    var body = ctx.Response.StartStream();
                    body.Write(new byte[] { 1, 2, 3 }, 0, 3);
                    throw new InvalidOperationException("producer failed");
                });
                int port = s.Start(0);
                using (var c = new RawClient(port))
                {
                    c.Get("/broken");
                    // A cut drops what is still queued, possibly the head too: then the client
                    // sees the connection close with no answer, never a clean end.
                    int status = 0;
                    try { status = c.ReadHead(); }
                    catch (IOException) { }
                    if (status != 0)
                    {
                        Assert.Equal(200, status, "head went out");
                        var got = new MemoryStream();
                        Assert.True(c.ReadUntilCut(got), "no last chunk: the answer is visibly cut");
                        Assert.True(got.Length == 0 || got.Length == 3, "at most what was written: " + got.Length);
                    }
                }
                Assert.True(Wait.Until(() => Volatile.Read(ref errors) == 1), "Error raised once");
                Assert.Equal("ok", Http.Get(port, "/nope").Status == 404 ? "ok" : "no", "server goes on");
            }
        }

        [Test]
        public static void Misuse_start_twice_respond_after_start_write_after_end_and_bad_status()
        {
            string log = "";
            var twiceDone = new ManualResetEventSlim();
            using (var s = new EmberServer())
            {
                s.MapGet("/twice", ctx =>
                {
                    EmberResponseStream body;
                    using (body = ctx.Response.StartStream())
                    {
                        try { ctx.Response.StartStream(); } catch (InvalidOperationException) { log += "start2;"; }
                        log += "respond=" + ctx.Respond() + ";";
                    }
                    try { body.Write(new byte[1], 0, 1); } catch (ObjectDisposedException) { log += "disposed;"; }
                    twiceDone.Set();
                });
                s.MapGet("/answered", ctx =>
                {
                    ctx.Response.Text("done");
                    ctx.Respond();
                    try { ctx.Response.StartStream(); } catch (InvalidOperationException) { log += "answered;"; }
                });
                s.MapGet("/status", ctx =>
                {
                    try { ctx.Response.StartStream(150); } catch (EmberException e) { log += "status:" + e.Result + ";"; }
                });
                int port = s.Start(0);
                Assert.Equal(200, Http.Get(port, "/twice").Status, "twice");
                // The client has the whole answer once the stream is disposed, maybe before the
                // handler's last line ran.
                Assert.True(twiceDone.Wait(5000), "the /twice handler finished");
                Assert.Equal("done", Http.Get(port, "/answered").Text, "answered");
                Assert.Equal(500, Http.Get(port, "/status").Status, "a refused head answers 500");
            }
            Assert.Equal("start2;respond=AlreadyAnswered;disposed;answered;status:InvalidArg;", log, "misuse");
        }

        [Test]
        public static void Write_after_dispose_throws_ObjectDisposedException()
        {
            Exception seen = null;
            using (var s = new EmberServer())
            {
                s.MapGet("/", ctx =>
                {
                    var body = ctx.Response.StartStream();
                    body.Dispose();
                    try { body.Write(new byte[1], 0, 1); } catch (Exception e) { seen = e; }
                    Assert.True(!body.CanWrite, "CanWrite false after end");
                });
                int port = s.Start(0);
                Assert.Equal(200, Http.Get(port, "/").Status, "status");
            }
            Assert.True(seen is ObjectDisposedException, "ObjectDisposedException, got " + seen);
        }

        [Test]
        public static void Content_length_set_before_the_start_sends_a_length_delimited_body()
        {
            using (var s = new EmberServer())
            {
                s.MapGet("/cl", ctx =>
                {
                    ctx.Response.SetHeader("Content-Length", "10");
                    using (var body = ctx.Response.StartStream())
                    {
                        body.Write(Encoding.ASCII.GetBytes("01234"), 0, 5);
                        body.Write(Encoding.ASCII.GetBytes("56789"), 0, 5);
                    }
                });
                int port = s.Start(0);
                using (var c = new RawClient(port))
                {
                    c.Get("/cl");
                    c.ReadHead();
                    Assert.Equal("10", c.Headers["content-length"], "length");
                    Assert.True(!c.Headers.ContainsKey("transfer-encoding"), "not chunked");
                    Assert.Equal("0123456789", Encoding.ASCII.GetString(c.ReadBody()), "body");
                }
            }
        }

        [Test]
        public static void Head_of_a_streamed_get_has_no_body()
        {
            using (var s = new EmberServer())
            {
                s.MapGet("/s", ctx =>
                {
                    using (var body = ctx.Response.StartStream()) body.Write(new byte[100], 0, 100);
                });
                int port = s.Start(0);
                var r = Http.Send(port, "HEAD", "/s", null);
                Assert.Equal(200, r.Status, "status");
                Assert.Equal(0, r.Body.Length, "no body");
            }
        }

        [Test]
        public static void Streams_over_http2_through_curl()
        {
            using (var s = new EmberServer())
            {
                s.MapGet("/s", async ctx =>
                {
                    using (var body = ctx.Response.StartStream(200, "application/octet-stream"))
                        for (int i = 0; i < 40; i++) await body.WriteAsync(Pattern(i, 100000), 0, 100000);
                });
                int port = s.Start(0);
                var r = Curl.Run("--http2-prior-knowledge", "-sS", "-o", "-", "-w", "%{http_version}", "http://127.0.0.1:" + port + "/s");
                Assert.Equal(0, r.Exit, "curl exit: " + r.Err);
                Assert.Equal(4000000 + 1, r.Out.Length, "body + http version digit");
                Assert.Equal((byte)'2', r.Out[r.Out.Length - 1], "HTTP/2");
                Assert.Equal((byte)('a' + 39 % 26), r.Out[3999999], "last piece");
            }
        }

        [Test]
        public static void HttpWebRequest_reads_a_streamed_answer_as_it_comes()
        {
            var release = new ManualResetEventSlim();
            using (var s = new EmberServer())
            {
                s.MapGet("/s", async ctx =>
                {
                    using (var body = ctx.Response.StartStream(200, "text/plain"))
                    {
                        await body.WriteAsync(Encoding.ASCII.GetBytes("early;"), 0, 6);
                        await Task.Run(() => release.Wait(10000));
                        var big = Pattern(1, 1 << 20);
                        await body.WriteAsync(big, 0, big.Length);
                    }
                });
                int port = s.Start(0);
                var req = (System.Net.HttpWebRequest)System.Net.WebRequest.Create("http://127.0.0.1:" + port + "/s");
                using (var resp = (System.Net.HttpWebResponse)req.GetResponse())
                using (var rs = resp.GetResponseStream())
                {
                    Assert.Equal(-1L, resp.ContentLength, "no length: chunked");
                    var first = new byte[6];
                    int got = 0;
                    while (got < 6) got += rs.Read(first, got, 6 - got);
                    Assert.Equal("early;", Encoding.ASCII.GetString(first), "the first write arrives before the handler goes on");
                    release.Set();
                    var rest = new MemoryStream();
                    rs.CopyTo(rest);
                    Assert.Equal(1 << 20, (int)rest.Length, "the rest");
                }
            }
        }

        [Test]
        public static void A_client_that_vanishes_mid_stream_aborts_the_request_without_an_error()
        {
            int errors = 0;
            Exception seen = null;
            var cancelled = new ManualResetEventSlim();
            using (var s = new EmberServer())
            {
                s.Error += (o, e) => Interlocked.Increment(ref errors);
                s.MapGet("/forever", async ctx =>
                {
                    ctx.RequestAborted.Register(() => cancelled.Set());
                    using (var body = ctx.Response.StartStream())
                    {
                        var chunk = new byte[8192];
                        try
                        {
                            while (true) await body.WriteAsync(chunk, 0, chunk.Length);
                        }
                        catch (Exception e) { seen = e; throw; }
                    }
                });
                int port = s.Start(0);
                var c = new RawClient(port);
                c.Get("/forever");
                c.ReadHead();
                c.ReadChunk();
                c.Reset();
                Assert.True(cancelled.Wait(10000), "RequestAborted cancelled");
                Assert.True(Wait.Until(() => seen != null), "the writer stopped");
                var se = seen as EmberStreamException;
                Assert.True(se != null && se.Result == EmberResult.ClientGone, "ClientGone, got " + seen);
                Thread.Sleep(100);
                Assert.Equal(0, errors, "a departed client is not the handler's error");
                Assert.Equal(404, Http.Get(port, "/x").Status, "server goes on");
            }
        }

        [Test]
        public static void Stream_start_after_the_handler_timeout_throws_TimedOut()
        {
            Exception seen = null;
            var done = new ManualResetEventSlim();
            using (var s = new EmberServer(new EmberOptions { HandlerTimeout = TimeSpan.FromMilliseconds(200) }))
            {
                s.MapGet("/late", async ctx =>
                {
                    await Task.Delay(600);
                    try { ctx.Response.StartStream(); } catch (Exception e) { seen = e; }
                    done.Set();
                });
                int port = s.Start(0);
                Assert.Equal(503, Http.Get(port, "/late").Status, "the engine answered");
                Assert.True(done.Wait(5000), "handler ran");
            }
            var se = seen as EmberStreamException;
            Assert.True(se != null && se.Result == EmberResult.TimedOut, "TimedOut, got " + seen);
        }
    }

    static class Curl
    {
        public sealed class Result { public int Exit; public byte[] Out; public string Err; }

        public static Result Run(params string[] args)
        {
            // Arguments without spaces: joined as they are.
            var psi = new ProcessStartInfo("curl", string.Join(" ", args))
            {
                UseShellExecute = false,
                RedirectStandardOutput = true,
                RedirectStandardError = true,
            };
            using (var p = Process.Start(psi))
            {
                var ms = new MemoryStream();
                Task copy = p.StandardOutput.BaseStream.CopyToAsync(ms);
                string err = p.StandardError.ReadToEnd();
                p.WaitForExit(60000);
                copy.Wait(60000);
                return new Result { Exit = p.ExitCode, Out = ms.ToArray(), Err = err };
            }
        }
    }
}
