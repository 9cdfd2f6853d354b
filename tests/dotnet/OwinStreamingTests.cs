// The OWIN server on the streaming ABI: flushes become chunks, large answers stream with
// backpressure, request bodies of POST/PUT stream, owin.CallCancelled follows the client.
using System;
using System.Collections.Generic;
using System.IO;
using System.Security.Cryptography;
using System.Text;
using System.Threading;
using System.Threading.Tasks;
using Ember;

namespace EmberTests
{
    using AppFunc = Func<IDictionary<string, object>, Task>;

    public static class OwinStreaming
    {
        static async Task Text(IDictionary<string, object> env, string text)
        {
            byte[] b = Encoding.UTF8.GetBytes(text);
            await ((Stream)env["owin.ResponseBody"]).WriteAsync(b, 0, b.Length);
        }

        [Test]
        public static void A_large_answer_streams_with_backpressure_and_arrives_whole()
        {
            long written = 0;
            const int pieces = 256, size = 64 * 1024;   // 16 MiB
            AppFunc app = async env =>
            {
                var body = (Stream)env["owin.ResponseBody"];
                for (int i = 0; i < pieces; i++)
                {
                    var b = new byte[size];
                    b[0] = (byte)i;
                    await body.WriteAsync(b, 0, size);
                    Interlocked.Add(ref written, size);
                }
            };
            using (var server = new EmberOwinServer(app))
            {
                int port = server.Start(0);
                using (var c = new RawClient(port, receiveBuffer: 65536, timeoutMs: 20000))
                {
                    c.Get("/");
                    c.ReadHead();
                    Assert.Equal("chunked", c.Headers["transfer-encoding"], "streamed");
                    Thread.Sleep(800);
                    long stalled = Interlocked.Read(ref written);
                    Assert.True(stalled < 10L << 20, "the app ran ahead of the client: " + stalled);
                    byte[] all = c.ReadBody();
                    Assert.Equal(pieces * size, all.Length, "length");
                    for (int i = 0; i < pieces; i++) Assert.Equal((byte)i, all[i * size], "piece " + i);
                }
            }
        }

        [Test]
        public static void A_flush_sends_what_was_written_before_the_app_goes_on()
        {
            var release = new ManualResetEventSlim();
            AppFunc app = async env =>
            {
                ((IDictionary<string, string[]>)env["owin.ResponseHeaders"])["Content-Type"] = new[] { "text/event-stream" };
                await Text(env, "data: 1\n\n");
                await ((Stream)env["owin.ResponseBody"]).FlushAsync();
                await Task.Run(() => release.Wait(10000));
                await Text(env, "data: 2\n\n");
            };
            using (var server = new EmberOwinServer(app))
            {
                int port = server.Start(0);
                using (var c = new RawClient(port))
                {
                    c.Get("/");
                    c.ReadHead();
                    Assert.Equal("text/event-stream", c.Headers["content-type"], "type");
                    Assert.Equal("data: 1\n\n", Encoding.ASCII.GetString(c.ReadChunk()), "first event before the app goes on");
                    release.Set();
                    Assert.Equal("data: 2\n\n", Encoding.ASCII.GetString(c.ReadChunk()), "second");
                    Assert.True(c.ReadChunk() == null, "end");
                }
            }
        }

        [Test]
        public static void Post_bodies_stream_and_get_bodies_stay_buffered()
        {
            AppFunc app = async env =>
            {
                var input = (Stream)env["owin.RequestBody"];
                var buf = new byte[10000];
                long total = 0;
                using (var sha = SHA256.Create())
                {
                    int n;
                    while ((n = await input.ReadAsync(buf, 0, buf.Length)) > 0) { sha.TransformBlock(buf, 0, n, null, 0); total += n; }
                    sha.TransformFinalBlock(buf, 0, 0);
                    await Text(env, (input is MemoryStream ? "buffered " : "streamed ") + total + " " + BitConverter.ToString(sha.Hash).Replace("-", ""));
                }
            };
            var body = new byte[5 << 20];
            new Random(9).NextBytes(body);
            string hash;
            using (var sha = SHA256.Create()) hash = BitConverter.ToString(sha.ComputeHash(body)).Replace("-", "");
            using (var server = new EmberOwinServer(app, new EmberOptions { MaxBodyBytes = 1 << 20 }))
            {
                int port = server.Start(0);
                Assert.Equal("streamed " + body.Length + " " + hash, Http.Send(port, "POST", "/up", body).Text, "POST streams past the buffered limit");
                Assert.Equal("buffered 3 ", Http.Send(port, "GET", "/x", new byte[] { 1, 2, 3 }).Text.Substring(0, 11), "GET keeps the buffered body");
            }
        }

        [Test]
        public static void CallCancelled_is_registered_only_when_read_and_fires_when_the_client_leaves()
        {
            var cancelled = new ManualResetEventSlim();
            AppFunc app = async env =>
            {
                if ((string)env["owin.RequestPath"] == "/plain") { await Text(env, "plain"); return; }
                var token = (CancellationToken)env["owin.CallCancelled"];
                try { await Task.Delay(30000, token); }
                catch (OperationCanceledException) { cancelled.Set(); throw; }
            };
            int errors = 0;
            using (var server = new EmberOwinServer(app))
            {
                server.Server.Error += (s, e) => Interlocked.Increment(ref errors);
                int port = server.Start(0);
                for (int i = 0; i < 10; i++) Assert.Equal("plain", Http.Get(port, "/plain").Text, "plain");
                Assert.Equal(0, EmberDiagnostics.EventRegistrations, "an app that never reads owin.CallCancelled registers nothing");
                var c = new RawClient(port);
                c.Get("/wait");
                Assert.True(Wait.Until(() => EmberDiagnostics.EventRegistrations == 1), "registered when read");
                c.Reset();
                Assert.True(cancelled.Wait(10000), "cancelled when the client left");
                Assert.True(Wait.Until(() => EmberDiagnostics.EventRegistrations == 0), "registration ended");
                Thread.Sleep(100);
                Assert.Equal(0, errors, "a cancelled call after the client left is no error");
            }
        }

        [Test]
        public static void Under_auto_dispatch_a_blocking_flush_to_a_slow_client_gets_a_pool_thread()
        {
            // Two I/O threads, so auto dispatch would run the request on its own I/O thread,
            // where a blocking Write that must wait is refused. The adapter's routes carry
            // EMBER_ROUTE_POOL: the app blocks on a pool thread and the answer arrives whole.
            const int pieces = 128, size = 64 * 1024;   // 8 MiB
            Exception failed = null;
            AppFunc app = env =>
            {
                var body = (Stream)env["owin.ResponseBody"];
                try
                {
                    for (int i = 0; i < pieces; i++)
                    {
                        var b = new byte[size];
                        b[0] = (byte)i;
                        body.Write(b, 0, size);
                        body.Flush();
                    }
                }
                catch (Exception ex) { failed = ex; throw; }
                return Task.FromResult(0);
            };
            var options = new EmberOptions { Dispatch = EmberDispatch.Auto, Workers = 2 };
            using (var server = new EmberOwinServer(app, options))
            {
                int port = server.Start(0);
                using (var c = new RawClient(port, receiveBuffer: 65536, timeoutMs: 20000))
                {
                    c.Get("/");
                    Assert.Equal(200, c.ReadHead(), "head");
                    Thread.Sleep(500);   // let the queue fill: the app has to wait
                    byte[] all = c.ReadBody();
                    Assert.True(failed == null, "the app's blocking write failed: " + failed);
                    Assert.Equal(pieces * size, all.Length, "length");
                    for (int i = 0; i < pieces; i++) Assert.Equal((byte)i, all[i * size], "piece " + i);
                }
            }
        }

        [Test]
        public static void An_app_that_throws_after_a_flush_cuts_the_answer()
        {
            AppFunc app = async env =>
            {
                await Text(env, "partial");
                await ((Stream)env["owin.ResponseBody"]).FlushAsync();
                throw new InvalidOperationException("broke mid-answer");
            };
            using (var server = new EmberOwinServer(app))
            {
                int port = server.Start(0);
                using (var c = new RawClient(port))
                {
                    c.Get("/");
                    // What was flushed, the head included, may or may not get out before the cut
                    // (a cut drops what is queued); the answer must never end cleanly.
                    int status;
                    try { status = c.ReadHead(); }
                    catch (IOException) { return; }   // cut before the head was written (closed or reset)
                    Assert.Equal(200, status, "head out");
                    var got = new MemoryStream();
                    Assert.True(c.ReadUntilCut(got), "no last chunk: visibly cut");
                    string text = Encoding.ASCII.GetString(got.ToArray());
                    Assert.True(text == "" || text == "partial", "only what was flushed: " + text);
                }
            }
        }
    }
}
