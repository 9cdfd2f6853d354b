// Streamed request bodies (streamBody routes, EmberRequestBodyStream) and RequestAborted.
using System;
using System.IO;
using System.Linq;
using System.Net;
using System.Security.Cryptography;
using System.Text;
using System.Threading;
using System.Threading.Tasks;
using Ember;

namespace EmberTests
{
    public static class BodyStreams
    {
        static string Sha(byte[] b)
        {
            using (var sha = SHA256.Create()) return BitConverter.ToString(sha.ComputeHash(b)).Replace("-", "").ToLowerInvariant();
        }

        static string HashStream(Stream s, ref long total)
        {
            var buf = new byte[7000];
            using (var sha = SHA256.Create())
            {
                int n;
                while ((n = s.Read(buf, 0, buf.Length)) > 0)
                {
                    sha.TransformBlock(buf, 0, n, null, 0);
                    total += n;
                }
                sha.TransformFinalBlock(buf, 0, 0);
                return BitConverter.ToString(sha.Hash).Replace("-", "").ToLowerInvariant();
            }
        }

        static void MapHashers(EmberServer s)
        {
            s.MapPost("/sync", ctx =>
            {
                long total = 0;
                string h = HashStream(ctx.Request.BodyStream, ref total);
                ctx.Response.Text(total + " " + h + " " + (ctx.Request.ContentLength.HasValue ? ctx.Request.ContentLength.Value.ToString() : "none"));
            }, streamBody: true);
            s.MapPost("/async", async ctx =>
            {
                var buf = new byte[5000];
                long total = 0;
                using (var sha = SHA256.Create())
                {
                    int n;
                    while ((n = await ctx.Request.BodyStream.ReadAsync(buf, 0, buf.Length)) > 0)
                    {
                        sha.TransformBlock(buf, 0, n, null, 0);
                        total += n;
                    }
                    sha.TransformFinalBlock(buf, 0, 0);
                    ctx.Response.Text(total + " " + BitConverter.ToString(sha.Hash).Replace("-", "").ToLowerInvariant());
                }
            }, streamBody: true);
        }

        [Test]
        public static void Blocking_Read_and_ReadAsync_see_the_whole_body_with_content_length_and_chunked()
        {
            var body = new byte[3 << 20];
            new Random(3).NextBytes(body);
            string want = body.Length + " " + Sha(body);
            using (var s = new EmberServer())
            {
                MapHashers(s);
                int port = s.Start(0);
                Assert.Equal(want + " " + body.Length, Http.Send(port, "POST", "/sync", body).Text, "sync, Content-Length");
                Assert.Equal(want, Http.Send(port, "POST", "/async", body).Text, "async, Content-Length");
                using (var c = new RawClient(port))
                {
                    c.Send("POST /sync HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n");
                    for (int off = 0; off < body.Length; off += 100000)
                    {
                        int n = Math.Min(100000, body.Length - off);
                        c.Send(n.ToString("x") + "\r\n");
                        c.Send(body, off, n);
                        c.Send("\r\n");
                    }
                    c.Send("0\r\n\r\n");
                    c.ReadHead();
                    Assert.Equal(want + " none", Encoding.ASCII.GetString(c.ReadBody()), "sync, chunked: no declared length");
                }
            }
        }

        [Test]
        public static void Inline_dispatch_ReadAsync_works_and_a_blocking_Read_is_refused()
        {
            var body = Encoding.ASCII.GetBytes(new string('x', 200000));
            using (var s = new EmberServer(new EmberOptions { Dispatch = EmberDispatch.Inline }))
            {
                MapHashers(s);
                int errors = 0;
                Exception seen = null;
                s.Error += (o, e) => { Interlocked.Increment(ref errors); seen = e.Exception; };
                int port = s.Start(0);
                Assert.Equal(body.Length + " " + Sha(body), Http.Send(port, "POST", "/async", body).Text, "async in inline");
                // A blocking read that finds nothing yet: the body comes late.
                using (var c = new RawClient(port))
                {
                    c.Send("POST /sync HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\n");
                    c.ReadHead();
                    Assert.Equal(500, c.Status, "the handler's InvalidOperationException answers 500");
                }
                Assert.True(seen is InvalidOperationException, "InvalidOperationException, got " + seen);
            }
        }

        [Test]
        public static void Expect_100_continue_is_answered_at_the_first_read()
        {
            var reading = new ManualResetEventSlim();
            var go = new ManualResetEventSlim();
            using (var s = new EmberServer())
            {
                s.MapPost("/up", ctx =>
                {
                    reading.Set();
                    go.Wait(10000);
                    var sr = new StreamReader(ctx.Request.BodyStream);
                    ctx.Response.Text("got " + sr.ReadToEnd());
                }, streamBody: true);
                int port = s.Start(0);
                using (var c = new RawClient(port, timeoutMs: 300))
                {
                    c.Send("POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n");
                    Assert.True(reading.Wait(5000), "the handler runs once the head is in");
                    Assert.Throws<IOException>(() => c.ReadHead(), "no 100 Continue before the handler reads");
                }
                using (var c = new RawClient(port, timeoutMs: 10000))
                {
                    go.Set();
                    c.Send("POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n");
                    Assert.Equal(100, c.ReadHead(), "100 Continue at the first read");
                    c.Send("hello");
                    Assert.Equal(200, c.ReadHead(), "final status");
                    Assert.Equal("got hello", Encoding.ASCII.GetString(c.ReadBody()), "body");
                }
            }
        }

        [Test]
        public static void A_body_over_the_stream_limit_is_413_and_the_handler_is_not_blamed()
        {
            int errors = 0;
            Exception seen = null;
            var done = new ManualResetEventSlim();
            using (var s = new EmberServer(new EmberOptions { MaxStreamBodyBytes = 100000, MaxBodyBytes = 10 }))
            {
                s.Error += (o, e) => Interlocked.Increment(ref errors);
                s.MapPost("/up", async ctx =>
                {
                    var buf = new byte[4096];
                    try { while (await ctx.Request.BodyStream.ReadAsync(buf, 0, buf.Length) > 0) { } }
                    catch (Exception e) { seen = e; done.Set(); throw; }
                    ctx.Response.Text("all read");
                    done.Set();
                }, streamBody: true);
                int port = s.Start(0);
                // Declared over the limit: refused before the handler runs.
                Assert.Equal(413, Http.Send(port, "POST", "/up", new byte[100001]).Status, "declared");
                // At the limit it is fine (the stream limit, not MaxBodyBytes, applies).
                Assert.Equal("all read", Http.Send(port, "POST", "/up", new byte[100000]).Text, "at the limit");
                done.Reset();
                using (var c = new RawClient(port))
                {
                    c.Send("POST /up HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n");
                    var piece = new byte[30000];
                    try
                    {
                        for (int i = 0; i < 5; i++) { c.Send("7530\r\n"); c.Send(piece); c.Send("\r\n"); }
                    }
                    catch (IOException) { }
                    Assert.Equal(413, c.ReadHead(), "chunked over the limit");
                }
                Assert.True(done.Wait(5000), "handler ended");
                var se = seen as EmberStreamException;
                // TooLarge; AlreadyAnswered from engines before the 413 kept the request for the
                // host's next call (the binding still knows the engine answered, not the handler).
                Assert.True(se != null && (se.Result == EmberResult.TooLarge || se.Result == EmberResult.AlreadyAnswered), "TooLarge, got " + seen);
                Thread.Sleep(100);
                Assert.Equal(0, errors, "the engine's 413 is not the handler's error");
            }
        }

        [Test]
        public static void Body_on_a_streamed_route_throws_and_BodyStream_on_a_buffered_route_reads_the_buffer()
        {
            string log = "";
            using (var s = new EmberServer())
            {
                s.MapPost("/streamed", ctx =>
                {
                    log += ctx.Request.IsBodyStreamed + ";";
                    try { GC.KeepAlive(ctx.Request.Body); } catch (InvalidOperationException) { log += "Body throws;"; }
                    try { ctx.Request.ReadBodyAsString(); } catch (InvalidOperationException) { log += "ReadBodyAsString throws;"; }
                    log += new StreamReader(ctx.Request.BodyStream).ReadToEnd() + ";";
                    Assert.True(ReferenceEquals(ctx.Request.BodyStream, ctx.Request.BodyStream), "same stream");
                    Assert.True(!ctx.Request.BodyStream.CanSeek && !ctx.Request.BodyStream.CanWrite, "read-only");
                }, streamBody: true);
                s.MapPost("/buffered", ctx =>
                {
                    log += ctx.Request.IsBodyStreamed + ";" + new StreamReader(ctx.Request.BodyStream).ReadToEnd() + ";" + ctx.Request.ContentLength + ";";
                });
                int port = s.Start(0);
                Http.Send(port, "POST", "/streamed", Encoding.ASCII.GetBytes("abc"));
                Http.Send(port, "POST", "/buffered", Encoding.ASCII.GetBytes("xyz"));
            }
            Assert.Equal("True;Body throws;ReadBodyAsString throws;abc;False;xyz;3;", log, "log");
        }

        [Test]
        public static void A_client_that_leaves_mid_body_fails_the_read_with_ClientGone()
        {
            Exception seen = null;
            var done = new ManualResetEventSlim();
            int errors = 0;
            using (var s = new EmberServer())
            {
                s.Error += (o, e) => Interlocked.Increment(ref errors);
                s.MapPost("/up", ctx =>
                {
                    var buf = new byte[4096];
                    try { while (ctx.Request.BodyStream.Read(buf, 0, buf.Length) > 0) { } }
                    catch (Exception e) { seen = e; }
                    done.Set();
                }, streamBody: true);
                int port = s.Start(0);
                var c = new RawClient(port);
                c.Send("POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\n");
                c.Send(new byte[1000]);
                Thread.Sleep(200);
                c.Reset();
                Assert.True(done.Wait(10000), "the read returned");
                var se = seen as EmberStreamException;
                Assert.True(se != null && se.Result == EmberResult.ClientGone, "ClientGone, got " + seen);
                Assert.Equal(0, errors, "no error event");
            }
        }

        [Test]
        public static void ReadTimeout_bounds_a_blocking_Read_on_a_silent_client()
        {
            Exception seen = null;
            var done = new ManualResetEventSlim();
            using (var s = new EmberServer(new EmberOptions { MinBodyRate = 0 }))
            {
                s.MapPost("/up", ctx =>
                {
                    ctx.Request.BodyStream.ReadTimeout = 300;
                    try { ctx.Request.BodyStream.Read(new byte[10], 0, 10); } catch (Exception e) { seen = e; }
                    done.Set();
                }, streamBody: true);
                int port = s.Start(0);
                using (var c = new RawClient(port))
                {
                    c.Send("POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n");
                    Assert.True(done.Wait(10000), "the read gave up");
                }
            }
            var se = seen as EmberStreamException;
            Assert.True(se != null && se.Result == EmberResult.TimedOut, "TimedOut, got " + seen);
        }

        [Test]
        public static void HttpWebRequest_uploads_a_streamed_body()
        {
            var body = new byte[1 << 20];
            new Random(5).NextBytes(body);
            using (var s = new EmberServer())
            {
                MapHashers(s);
                int port = s.Start(0);
                var req = (HttpWebRequest)WebRequest.Create("http://127.0.0.1:" + port + "/async");
                req.Method = "POST";
                req.SendChunked = true;
                req.AllowWriteStreamBuffering = false;
                using (var rs = req.GetRequestStream())
                    for (int off = 0; off < body.Length; off += 65536) rs.Write(body, off, 65536);
                using (var resp = (HttpWebResponse)req.GetResponse())
                using (var sr = new StreamReader(resp.GetResponseStream()))
                    Assert.Equal(body.Length + " " + Sha(body), sr.ReadToEnd(), "hash");
            }
        }
    }

    public static class Aborts
    {
        [Test]
        public static void RequestAborted_fires_when_a_waiting_client_leaves()
        {
            var cancelled = new ManualResetEventSlim();
            int errors = 0;
            using (var s = new EmberServer())
            {
                s.Error += (o, e) => Interlocked.Increment(ref errors);
                s.MapGet("/wait", async ctx =>
                {
                    try { await Task.Delay(30000, ctx.RequestAborted); }
                    finally { cancelled.Set(); }
                });
                int port = s.Start(0);
                var c = new RawClient(port);
                c.Get("/wait");
                Assert.True(Wait.Until(() => EmberDiagnostics.EventRegistrations > 0), "registered");
                c.Reset();
                Assert.True(cancelled.Wait(10000), "cancelled");
                Thread.Sleep(100);
                Assert.Equal(0, errors, "a cancelled wait after the client left is no error");
                Assert.True(Wait.Until(() => EmberDiagnostics.EventRegistrations == 0), "registration gone");
            }
        }

        [Test]
        public static void RequestAborted_cancels_at_the_handler_timeout()
        {
            var timedOut = new ManualResetEventSlim();
            using (var s = new EmberServer(new EmberOptions { HandlerTimeout = TimeSpan.FromMilliseconds(300) }))
            {
                s.MapGet("/t", async ctx =>
                {
                    ctx.RequestAborted.Register(() => timedOut.Set());
                    await Task.Delay(5000);
                });
                int port = s.Start(0);
                Assert.Equal(503, Http.Get(port, "/t").Status, "engine answered");
                Assert.True(timedOut.Wait(5000), "cancelled at the timeout");
            }
        }

        [Test]
        public static void RequestAborted_cancels_when_the_server_stops()
        {
            var cancelled = new ManualResetEventSlim();
            var entered = new ManualResetEventSlim();
            var s = new EmberServer();
            s.MapGet("/w", async ctx =>
            {
                ctx.RequestAborted.Register(() => cancelled.Set());
                entered.Set();
                await Task.Delay(30000, ctx.RequestAborted);
            });
            int port = s.Start(0);
            Task.Run(() => { try { Http.Get(port, "/w"); } catch { } });
            Assert.True(entered.Wait(5000), "entered");
            s.Stop(TimeSpan.FromMilliseconds(200));
            Assert.True(cancelled.Wait(5000), "cancelled at stop");
            s.Dispose();
        }

        [Test]
        public static void A_plain_request_registers_nothing_and_a_normal_answer_never_cancels()
        {
            CancellationToken token = default(CancellationToken);
            using (var s = new EmberServer())
            {
                s.MapGet("/plain", ctx => ctx.Response.Text("x"));
                s.MapGet("/touch", ctx => { token = ctx.RequestAborted; ctx.Response.Text("y"); });
                s.MapGet("/after", ctx =>
                {
                    ctx.Response.Text("z");
                    ctx.Respond();
                    Assert.True(!ctx.RequestAborted.IsCancellationRequested && !ctx.RequestAborted.CanBeCanceled,
                        "after a normal answer the token can never cancel");
                });
                int port = s.Start(0);
                for (int i = 0; i < 20; i++) Http.Get(port, "/plain");
                Assert.Equal(0, EmberDiagnostics.EventRegistrations, "plain requests register nothing");
                Assert.Equal("y", Http.Get(port, "/touch").Text, "touch");
                Assert.True(Wait.Until(() => EmberDiagnostics.EventRegistrations == 0), "the completed event ends the registration");
                Thread.Sleep(100);
                Assert.True(!token.IsCancellationRequested, "a completed request is not aborted");
                Assert.Equal("z", Http.Get(port, "/after").Text, "after");
            }
        }
    }
}
