// The reference app's streaming and WebSocket routes (tests/REFERENCE_APP.md): GET /sse,
// GET /stream, POST /upload, /ws and /ws/chat. Every handler here is async: it awaits the
// engine's writable / readable notices instead of blocking a thread, so the same code is right
// under Pool and Inline dispatch.
using System;
using System.Globalization;
using System.IO;
using System.Security.Cryptography;
using System.Text;
using System.Threading.Tasks;
using Ember;

static partial class EmberRef
{
    const int StreamMax = 1048576;

    static void MapStreaming(EmberServer server)
    {
        // Three events 100 ms apart through the SSE helper; a reconnecting client's
        // Last-Event-ID continues after the event it saw (a number past the end ends the
        // stream at once; an id that is not a number starts over).
        server.MapGet("/sse", async ctx =>
        {
            int last = LastEventId(ctx.Request.GetHeader("last-event-id"));
            using (var sse = new EmberEventStream(ctx, TimeSpan.FromSeconds(15), retryMs: 1000))
            {
                for (int n = last + 1; n <= 3; n++)
                {
                    if (n > last + 1) await Task.Delay(100).ConfigureAwait(false);
                    string id = n.ToString(CultureInfo.InvariantCulture);
                    await sse.SendAsync("{\"n\": " + id + "}", "tick", id).ConfigureAwait(false);
                }
            }
        });

        // N writes of S bytes. Each WriteAsync returns once the engine took the bytes; on a full
        // queue it waits for the writable notice, so a slow client holds the loop back and
        // memory stays at one buffer of S bytes.
        server.MapGet("/stream", async ctx =>
        {
            int n, size;
            if (!TryParse(ctx.Request.Query["n"], StreamMax, out n) || !TryParse(ctx.Request.Query["size"], StreamMax, out size) || size < 1)
            {
                ctx.Response.Json("{\"error\": \"expected n=0..1048576&size=1..1048576\"}", 400);
                return;
            }
            var block = new byte[size];
            using (Stream body = ctx.Response.StartStream(200, "application/octet-stream"))
            {
                for (int i = 0; i < n; i++)
                {
                    byte c = (byte)('a' + i % 26);
                    if (i == 0 || block[0] != c)
                    {
                        for (int j = 0; j < size; j++) block[j] = c;
                    }
                    await body.WriteAsync(block, 0, size, ctx.RequestAborted).ConfigureAwait(false);
                }
            }
        });

        // The body read in 64 KiB pieces as it arrives (never whole in memory), counted and hashed.
        server.MapPost("/upload", async ctx =>
        {
            var buf = new byte[65536];
            long total = 0;
            Stream body = ctx.Request.BodyStream;
            using (var sha = SHA256.Create())
            {
                int got;
                while ((got = await body.ReadAsync(buf, 0, buf.Length).ConfigureAwait(false)) > 0)
                {
                    sha.TransformBlock(buf, 0, got, null, 0);
                    total += got;
                }
                sha.TransformFinalBlock(buf, 0, 0);
                ctx.Response.Json("{\"bytes\": " + total.ToString(CultureInfo.InvariantCulture) + ", \"sha256\": \"" + Hex(sha.Hash) + "\"}");
            }
        }, streamBody: true);

        // Echo: each message back as it came, same kind.
        server.MapWebSocket("/ws", async ws =>
        {
            EmberWebSocketMessage m;
            while (!(m = await ws.ReceiveAsync().ConfigureAwait(false)).IsClose)
                await ws.SendAsync(m.Data, m.Type).ConfigureAwait(false);
        });

        // Chat: each message to every connection of /ws/chat (the engine's group for the
        // endpoint), the sender included; encoded once by the engine.
        server.MapWebSocket("/ws/chat", async ws =>
        {
            EmberWebSocketMessage m;
            while (!(m = await ws.ReceiveAsync().ConfigureAwait(false)).IsClose)
                ws.Server.Broadcast("/ws/chat", new ArraySegment<byte>(m.Data), m.Type);
        });
    }

    /// <summary>How many of the three events a reconnecting client saw: its decimal
    /// Last-Event-ID, at most 3 (any larger number too); 0 without one or for anything else.</summary>
    static int LastEventId(string s)
    {
        if (string.IsNullOrEmpty(s)) return 0;
        foreach (char c in s) if (c < '0' || c > '9') return 0;
        int v;
        return TryParse(s, 3, out v) ? v : 3;   // digits only, so a failure means past 3
    }

    static string Hex(byte[] b)
    {
        var sb = new StringBuilder(b.Length * 2);
        foreach (byte x in b) sb.Append(x.ToString("x2", CultureInfo.InvariantCulture));
        return sb.ToString();
    }
}
