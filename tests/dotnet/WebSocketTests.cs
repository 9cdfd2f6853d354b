// WebSocket endpoints (MapWebSocket, EmberWebSocket, Broadcast) through Mono's
// System.Net.WebSockets.ClientWebSocket and raw sockets.
using System;
using System.Collections.Generic;
using System.IO;
using System.Linq;
using System.Net.WebSockets;
using System.Text;
using System.Threading;
using System.Threading.Tasks;
using Ember;

namespace EmberTests
{
    static class Ws
    {
        public static ClientWebSocket Connect(int port, string path, params string[] subProtocols)
        {
            var ws = new ClientWebSocket();
            foreach (string p in subProtocols) ws.Options.AddSubProtocol(p);
            ws.ConnectAsync(new Uri("ws://127.0.0.1:" + port + path), CancellationToken.None).Wait(10000);
            return ws;
        }

        public static void Send(ClientWebSocket ws, string text)
        {
            var b = Encoding.UTF8.GetBytes(text);
            Assert.True(ws.SendAsync(new ArraySegment<byte>(b), WebSocketMessageType.Text, true, CancellationToken.None).Wait(10000), "send");
        }

        public static void Send(ClientWebSocket ws, byte[] b)
        {
            Assert.True(ws.SendAsync(new ArraySegment<byte>(b), WebSocketMessageType.Binary, true, CancellationToken.None).Wait(10000), "send");
        }

        /// <summary>One whole message: (type, bytes); Close with the status in CloseStatus.</summary>
        public static KeyValuePair<WebSocketMessageType, byte[]> Receive(ClientWebSocket ws, int timeoutMs = 10000)
        {
            var all = new MemoryStream();
            var buf = new byte[65536];
            while (true)
            {
                var t = ws.ReceiveAsync(new ArraySegment<byte>(buf), CancellationToken.None);
                if (!t.Wait(timeoutMs)) throw new TimeoutException("no message in " + timeoutMs + " ms");
                all.Write(buf, 0, t.Result.Count);
                if (t.Result.EndOfMessage || t.Result.MessageType == WebSocketMessageType.Close)
                    return new KeyValuePair<WebSocketMessageType, byte[]>(t.Result.MessageType, all.ToArray());
            }
        }

        public static string ReceiveText(ClientWebSocket ws, int timeoutMs = 10000)
        {
            var m = Receive(ws, timeoutMs);
            Assert.Equal(WebSocketMessageType.Text, m.Key, "text message");
            return Encoding.UTF8.GetString(m.Value);
        }

        public static Func<EmberWebSocket, Task> Echo = async ws =>
        {
            EmberWebSocketMessage m;
            while (!(m = await ws.ReceiveAsync()).IsClose) await ws.SendAsync(m.Data, m.Type);
        };
    }

    public static class WebSockets
    {
        [Test]
        public static void Echo_text_and_binary_in_order_with_ClientWebSocket_in_both_dispatch_modes()
        {
            foreach (var mode in new[] { EmberDispatch.Pool, EmberDispatch.Inline })
            {
                using (var s = new EmberServer(new EmberOptions { Dispatch = mode }))
                {
                    s.MapWebSocket("/ws", Ws.Echo);
                    int port = s.Start(0);
                    using (var ws = Ws.Connect(port, "/ws"))
                    {
                        Ws.Send(ws, "héllo ✓");
                        Assert.Equal("héllo ✓", Ws.ReceiveText(ws), mode + " text");
                        var big = new byte[700 * 1024];
                        new Random(1).NextBytes(big);
                        Ws.Send(ws, big);
                        var got = Ws.Receive(ws);
                        Assert.Equal(WebSocketMessageType.Binary, got.Key, "binary kind");
                        Assert.True(got.Value.SequenceEqual(big), mode + " 700 KiB binary");
                        for (int i = 0; i < 100; i++) Ws.Send(ws, "m" + i);
                        for (int i = 0; i < 100; i++) Assert.Equal("m" + i, Ws.ReceiveText(ws), "order");
                        Ws.Send(ws, new byte[0]);
                        Assert.Equal(0, Ws.Receive(ws).Value.Length, "empty binary");
                        Assert.True(ws.CloseAsync(WebSocketCloseStatus.NormalClosure, "bye", CancellationToken.None).Wait(10000), "close");
                        Assert.Equal(WebSocketCloseStatus.NormalClosure, ws.CloseStatus, "close status");
                    }
                    Assert.True(Wait.Until(() => EmberDiagnostics.OpenWebSockets == 0), "connection forgotten after close");
                }
            }
        }

        [Test]
        public static void Session_sees_the_request_the_peer_close_and_a_plain_get_is_426()
        {
            var seen = new TaskCompletionSource<string>();
            using (var s = new EmberServer())
            {
                s.MapWebSocket("/room/{name}", async ws =>
                {
                    var m = await ws.ReceiveAsync();
                    var end = await ws.ReceiveAsync();
                    var again = await ws.ReceiveAsync();
                    seen.SetResult(ws.Request.GetRouteValue("name") + "|" + ws.Request.Query["x"] + "|" + m.Text + "|" + end.Type + "|" +
                        ws.CloseStatus + "|" + ws.CloseStatusDescription + "|" + again.IsClose + "|" + ws.State + "|" + ws.Closed.IsCancellationRequested);
                });
                int port = s.Start(0);
                using (var ws = Ws.Connect(port, "/room/blue?x=1"))
                {
                    Ws.Send(ws, "hi");
                    ws.CloseAsync((WebSocketCloseStatus)4001, "done here", CancellationToken.None).Wait(10000);
                }
                Assert.True(seen.Task.Wait(10000), "session finished");
                Assert.Equal("blue|1|hi|Close|4001|done here|True|Closed|True", seen.Task.Result, "session view");
                Assert.Equal(426, Http.Get(port, "/room/blue").Status, "plain GET");
            }
        }

        [Test]
        public static void Upgrade_callback_refuses_picks_a_subprotocol_and_passes_items()
        {
            using (var s = new EmberServer())
            {
                s.MapWebSocket("/ws", async ws =>
                {
                    await ws.SendAsync("proto=" + ws.SubProtocol + " user=" + ws.Items["user"]);
                    await ws.ReceiveAsync();
                }, up =>
                {
                    string token = up.Request.Query["token"];
                    if (token != "ok") { up.Reject(403, "no entry"); return; }
                    up.Items["user"] = "ann";
                    if (up.RequestedSubProtocols.Contains("chat.v2")) up.SubProtocol = "chat.v2";
                    up.AddHeader("X-Hello", "there");
                });
                int port = s.Start(0);
                using (var ws = Ws.Connect(port, "/ws?token=ok", "chat.v1", "chat.v2"))
                {
                    Assert.Equal("chat.v2", ws.SubProtocol, "client sees the subprotocol");
                    Assert.Equal("proto=chat.v2 user=ann", Ws.ReceiveText(ws), "session sees it too");
                }
                var r = Http.Get(port, "/ws?token=bad", "Upgrade: websocket", "Connection: Upgrade",
                    "Sec-WebSocket-Version: 13", "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==");
                Assert.Equal(403, r.Status, "refused");
                Assert.Equal("no entry", r.Text, "refusal text");
                using (var raw = new RawClient(port))
                {
                    raw.Get("/ws?token=ok", "Upgrade: websocket", "Connection: Upgrade",
                        "Sec-WebSocket-Version: 13", "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==");
                    Assert.Equal(101, raw.ReadHead(), "accepted");
                    Assert.Equal("there", raw.Headers["x-hello"], "extra 101 header");
                }
            }
        }

        [Test]
        public static void An_upgrade_callback_that_throws_refuses_with_500_and_reports_it()
        {
            int errors = 0;
            using (var s = new EmberServer())
            {
                s.Error += (o, e) => Interlocked.Increment(ref errors);
                s.MapWebSocket("/ws", Ws.Echo, up => { throw new InvalidOperationException("nope"); });
                int port = s.Start(0);
                var r = Http.Get(port, "/ws", "Upgrade: websocket", "Connection: Upgrade",
                    "Sec-WebSocket-Version: 13", "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==");
                Assert.Equal(500, r.Status, "500");
                Assert.Equal(1, errors, "Error raised");
            }
        }

        [Test]
        public static void Session_end_closes_1000_a_throwing_session_closes_1011_and_CloseAsync_sends_its_code()
        {
            int errors = 0;
            using (var s = new EmberServer())
            {
                s.Error += (o, e) => Interlocked.Increment(ref errors);
                s.MapWebSocket("/done", ws => ws.SendAsync("bye"));
                s.MapWebSocket("/throw", async ws => { await Task.Yield(); throw new InvalidOperationException("session bug"); });
                s.MapWebSocket("/close", async ws =>
                {
                    await ws.CloseAsync(4002, "server says");
                    Assert.True(ws.State == EmberWebSocketState.Closed, "closed once CloseAsync completes");
                });
                int port = s.Start(0);
                using (var ws = Ws.Connect(port, "/done"))
                {
                    Assert.Equal("bye", Ws.ReceiveText(ws), "message before the close");
                    var c = Ws.Receive(ws);
                    Assert.Equal(WebSocketMessageType.Close, c.Key, "close");
                    Assert.Equal(WebSocketCloseStatus.NormalClosure, ws.CloseStatus, "1000");
                }
                using (var ws = Ws.Connect(port, "/throw"))
                {
                    Ws.Receive(ws);
                    Assert.Equal(WebSocketCloseStatus.InternalServerError, ws.CloseStatus, "1011");
                }
                Assert.True(Wait.Until(() => Volatile.Read(ref errors) == 1), "the throwing session is reported");
                using (var ws = Ws.Connect(port, "/close"))
                {
                    Ws.Receive(ws);
                    Assert.Equal(4002, (int)ws.CloseStatus, "CloseAsync's code");
                    Assert.Equal("server says", ws.CloseStatusDescription, "reason");
                    ws.CloseAsync(WebSocketCloseStatus.NormalClosure, "", CancellationToken.None).Wait(5000);
                }
            }
        }

        [Test]
        public static void Misuse_bad_close_code_send_after_close_two_receives_and_map_after_start()
        {
            var log = new TaskCompletionSource<string>();
            using (var s = new EmberServer())
            {
                s.MapWebSocket("/ws", async ws =>
                {
                    string r = "";
                    try { await ws.CloseAsync(1005); } catch (ArgumentException) { r += "1005 refused;"; }
                    try { await ws.SendAsync((string)null); } catch (ArgumentNullException) { r += "null;"; }
                    try { await ws.SendAsync(new byte[1], EmberWebSocketMessageType.Close); } catch (ArgumentOutOfRangeException) { r += "type;"; }
                    var first = ws.ReceiveAsync();
                    try { await ws.ReceiveAsync(); } catch (InvalidOperationException) { r += "two receives;"; }
                    await first;   // the client's close
                    try { await ws.SendAsync("late"); } catch (WebSocketException) { r += "send after close;"; }
                    Assert.Equal(EmberResult.ClientGone, ws.TrySend(new ArraySegment<byte>(new byte[1]), EmberWebSocketMessageType.Binary), "TrySend");
                    ws.Join("g");   // no effect, no error once closed
                    await ws.CloseAsync();   // completes at once
                    log.SetResult(r);
                });
                int port = s.Start(0);
                Assert.Throws<InvalidOperationException>(() => s.MapWebSocket("/x", Ws.Echo), "map after start");
                Assert.Throws<ArgumentNullException>(() => s.Broadcast(null, "x"), "null group");
                using (var ws = Ws.Connect(port, "/ws"))
                {
                    Thread.Sleep(200);
                    ws.CloseAsync(WebSocketCloseStatus.NormalClosure, "", CancellationToken.None).Wait(5000);
                }
                Assert.True(log.Task.Wait(10000), "session done");
                Assert.Equal("1005 refused;null;type;two receives;send after close;", log.Task.Result, "misuse");
            }
        }

        [Test]
        public static void Groups_and_broadcast_reach_members_but_not_the_excepted_one()
        {
            using (var s = new EmberServer())
            {
                var sockets = new List<EmberWebSocket>();
                s.MapWebSocket("/g", async ws =>
                {
                    lock (sockets) sockets.Add(ws);
                    if (ws.Request.Query["team"] == "red") ws.Join("red");
                    EmberWebSocketMessage m;
                    while (!(m = await ws.ReceiveAsync()).IsClose)
                    {
                        if (m.Text == "leave") { ws.Leave("red"); await ws.SendAsync("left"); }
                        else ws.Server.Broadcast("red", "to red: " + m.Text, except: ws);
                    }
                });
                Assert.Equal(0, s.Broadcast("red", "nobody"), "not running: 0");
                int port = s.Start(0);
                using (var a = Ws.Connect(port, "/g?team=red"))
                using (var b = Ws.Connect(port, "/g?team=red"))
                using (var c = Ws.Connect(port, "/g?team=blue"))
                {
                    Assert.True(Wait.Until(() => { lock (sockets) return sockets.Count == 3; }), "three sessions");
                    Thread.Sleep(100);
                    Ws.Send(c, "from blue");
                    Assert.Equal("to red: from blue", Ws.ReceiveText(a), "a");
                    Assert.Equal("to red: from blue", Ws.ReceiveText(b), "b");
                    Ws.Send(a, "from a");
                    Assert.Equal("to red: from a", Ws.ReceiveText(b), "b gets a's");
                    Assert.Equal(3, s.Broadcast("/g", new byte[] { 7 }), "endpoint group has all three");
                    foreach (var w in new[] { a, b, c }) Assert.Equal(7, Ws.Receive(w).Value[0], "binary broadcast");
                    Ws.Send(b, "leave");
                    Assert.Equal("left", Ws.ReceiveText(b), "left");
                    Assert.Equal(1, s.Broadcast("red", "only a"), "one member left");
                    Assert.Equal("only a", Ws.ReceiveText(a), "a");
                    Assert.Throws<TimeoutException>(() => Ws.Receive(b, 300), "b left the group");
                }
            }
        }

        [Test]
        public static void SendAsync_waits_for_a_peer_that_does_not_read_and_delivers_everything_in_order()
        {
            const int count = 64, size = 256 * 1024;   // 16 MiB
            int sent = 0;
            using (var s = new EmberServer(new EmberOptions { WebSocketQueueBytes = 256 * 1024 }))
            {
                s.MapWebSocket("/flood", async ws =>
                {
                    for (int i = 0; i < count; i++)
                    {
                        var b = new byte[size];
                        b[0] = (byte)i;
                        b[size - 1] = (byte)i;
                        await ws.SendAsync(b);
                        Interlocked.Increment(ref sent);
                    }
                    await ws.ReceiveAsync();
                });
                int port = s.Start(0);
                using (var ws = Ws.Connect(port, "/flood"))
                {
                    Thread.Sleep(800);
                    int stalled = Volatile.Read(ref sent);
                    Assert.True(stalled < 48, "SendAsync ran ahead of a peer that reads nothing: " + stalled + " of " + count);
                    for (int i = 0; i < count; i++)
                    {
                        var m = Ws.Receive(ws, 20000);
                        Assert.True(m.Value.Length == size && m.Value[0] == (byte)i && m.Value[size - 1] == (byte)i, "message " + i);
                    }
                    ws.CloseAsync(WebSocketCloseStatus.NormalClosure, "", CancellationToken.None).Wait(5000);
                }
            }
        }

        [Test]
        public static void A_session_that_never_receives_is_closed_1008_instead_of_queueing_without_bound()
        {
            using (var s = new EmberServer(new EmberOptions { WebSocketReceiveQueueBytes = 100000 }))
            {
                var gate = new TaskCompletionSource<bool>();
                s.MapWebSocket("/deaf", ws => gate.Task);
                int port = s.Start(0);
                using (var ws = Ws.Connect(port, "/deaf"))
                {
                    try { for (int i = 0; i < 40; i++) Ws.Send(ws, new byte[10000]); } catch (Exception) { }
                    var m = Ws.Receive(ws);
                    Assert.Equal(WebSocketMessageType.Close, m.Key, "closed");
                    Assert.Equal(WebSocketCloseStatus.PolicyViolation, ws.CloseStatus, "1008");
                }
                gate.SetResult(true);
            }
        }

        [Test]
        public static void Stop_closes_open_sockets_with_1001_and_releases_everything()
        {
            int live = EmberDiagnostics.LiveNativeServers;
            var ended = new TaskCompletionSource<int?>();
            var s = new EmberServer();
            s.MapWebSocket("/ws", async ws =>
            {
                await ws.ReceiveAsync();
                ended.SetResult(ws.CloseStatus);
            });
            int port = s.Start(0);
            var client = Ws.Connect(port, "/ws");
            Assert.True(Wait.Until(() => EmberDiagnostics.OpenWebSockets == 1), "open");
            // The client reads and answers the server's close frame (ClientWebSocket leaves that to
            // the application), echoing its code as RFC 6455 suggests.
            var clientSaw = Task.Run(() =>
            {
                var m = Ws.Receive(client);
                client.CloseOutputAsync(WebSocketCloseStatus.EndpointUnavailable, "", CancellationToken.None).Wait(5000);
                return m;
            });
            s.Stop(TimeSpan.FromSeconds(2));
            Assert.True(ended.Task.Wait(10000), "session saw the end");
            Assert.Equal((int?)1001, ended.Task.Result, "1001 at stop");
            Assert.True(clientSaw.Wait(5000) && clientSaw.Result.Key == WebSocketMessageType.Close, "the client got a close");
            Assert.Equal(WebSocketCloseStatus.EndpointUnavailable, client.CloseStatus, "1001 on the wire");
            Assert.True(Wait.Until(() => EmberDiagnostics.LiveNativeServers == live), "route released, delegates dropped");
            Assert.Equal(0, EmberDiagnostics.OpenWebSockets, "no socket left");
            client.Dispose();
            s.Dispose();
        }

        [Test]
        public static void Event_and_WebSocket_callbacks_run_on_registered_engine_threads()
        {
            long before = EmberDiagnostics.HookedCallbacks;
            long foreignBefore = EmberDiagnostics.CallbacksOnUnregisteredThreads;
            foreach (var mode in new[] { EmberDispatch.Pool, EmberDispatch.Inline })
            {
                using (var s = new EmberServer(new EmberOptions { Dispatch = mode, StreamQueueBytes = 4096 }))
                {
                    s.MapWebSocket("/ws", Ws.Echo);
                    s.MapGet("/stream", async ctx =>
                    {
                        GC.KeepAlive(ctx.RequestAborted);
                        using (var body = ctx.Response.StartStream())
                            for (int i = 0; i < 50; i++) await body.WriteAsync(new byte[4096], 0, 4096);
                    });
                    int port = s.Start(0);
                    using (var ws = Ws.Connect(port, "/ws"))
                    {
                        for (int i = 0; i < 20; i++) { Ws.Send(ws, "x" + i); Ws.ReceiveText(ws); }
                        ws.CloseAsync(WebSocketCloseStatus.NormalClosure, "", CancellationToken.None).Wait(5000);
                    }
                    using (var c = new RawClient(port, receiveBuffer: 4096))
                    {
                        c.Get("/stream");
                        c.ReadHead();
                        Thread.Sleep(100);
                        Assert.Equal(50 * 4096, c.ReadBody().Length, "stream");
                    }
                }
            }
            if (Type.GetType("Mono.Runtime") == null) return;   // the hooks exist under Mono only
            Assert.True(EmberDiagnostics.HookedCallbacks - before > 40, "callbacks were counted: " + (EmberDiagnostics.HookedCallbacks - before));
            Assert.Equal(foreignBefore, EmberDiagnostics.CallbacksOnUnregisteredThreads, "callbacks on threads the start hook did not register");
        }

        [Test]
        public static void A_thousand_connections_echo_then_close()
        {
            using (var s = new EmberServer())
            {
                s.MapWebSocket("/ws", Ws.Echo);
                int port = s.Start(0);
                var clients = new List<ClientWebSocket>();
                try
                {
                    var connects = new List<Task<ClientWebSocket>>();
                    for (int i = 0; i < 1000; i++)
                    {
                        connects.Add(Task.Run(async () =>
                        {
                            var ws = new ClientWebSocket();
                            await ws.ConnectAsync(new Uri("ws://127.0.0.1:" + port + "/ws"), CancellationToken.None);
                            return ws;
                        }));
                    }
                    Assert.True(Task.WaitAll(connects.ToArray(), 60000), "all connected");
                    clients.AddRange(connects.Select(t => t.Result));
                    Assert.True(Wait.Until(() => EmberDiagnostics.OpenWebSockets == 1000), "1000 open: " + EmberDiagnostics.OpenWebSockets);
                    var echoes = clients.Select(async (ws, i) =>
                    {
                        var b = Encoding.ASCII.GetBytes("c" + i);
                        await ws.SendAsync(new ArraySegment<byte>(b), WebSocketMessageType.Text, true, CancellationToken.None);
                        var buf = new byte[64];
                        var r = await ws.ReceiveAsync(new ArraySegment<byte>(buf), CancellationToken.None);
                        return Encoding.ASCII.GetString(buf, 0, r.Count) == "c" + i;
                    }).ToArray();
                    Assert.True(Task.WaitAll(echoes, 60000), "all echoed");
                    Assert.True(echoes.All(t => t.Result), "every echo right");
                    var closes = clients.Select(ws => ws.CloseAsync(WebSocketCloseStatus.NormalClosure, "", CancellationToken.None)).ToArray();
                    Assert.True(Task.WaitAll(closes, 60000), "all closed");
                    Assert.True(Wait.Until(() => EmberDiagnostics.OpenWebSockets == 0, 20000), "all forgotten");
                }
                finally
                {
                    foreach (var ws in clients) ws.Dispose();
                }
            }
        }
    }
}
