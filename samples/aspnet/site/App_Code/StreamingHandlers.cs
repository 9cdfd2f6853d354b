// Handlers that stream, mapped in web.config: an answer flushed as it is written, an upload read
// in pieces, and a request that watches Response.IsClientConnected.
using System;
using System.Globalization;
using System.Security.Cryptography;
using System.Text;
using System.Threading;
using System.Web;

namespace StreamingHandlers
{
    /// <summary>GET /flush?parts=N&amp;ms=M: N lines, each flushed at once, M ms apart.</summary>
    public sealed class Flush : IHttpHandler
    {
        public bool IsReusable { get { return true; } }

        public void ProcessRequest(HttpContext ctx)
        {
            int parts = int.Parse(ctx.Request.QueryString["parts"] ?? "3", CultureInfo.InvariantCulture);
            int ms = int.Parse(ctx.Request.QueryString["ms"] ?? "0", CultureInfo.InvariantCulture);
            ctx.Response.ContentType = "text/plain";
            for (int i = 0; i < parts; i++)
            {
                if (i > 0 && ms > 0) Thread.Sleep(ms);
                ctx.Response.Write("part " + i + "\n");
                ctx.Response.Flush();
            }
        }
    }

    /// <summary>POST /count: the body read in 64 KiB pieces → {"bytes": n, "sha256": "..."}.</summary>
    public sealed class Count : IHttpHandler
    {
        public bool IsReusable { get { return true; } }

        public void ProcessRequest(HttpContext ctx)
        {
            var input = ctx.Request.InputStream;
            var buf = new byte[65536];
            long total = 0;
            using (var sha = SHA256.Create())
            {
                int n;
                while ((n = input.Read(buf, 0, buf.Length)) > 0)
                {
                    sha.TransformBlock(buf, 0, n, null, 0);
                    total += n;
                }
                sha.TransformFinalBlock(buf, 0, 0);
                var hex = new StringBuilder();
                foreach (byte b in sha.Hash) hex.Append(b.ToString("x2", CultureInfo.InvariantCulture));
                ctx.Response.ContentType = "application/json";
                ctx.Response.Write("{\"bytes\": " + total + ", \"sha256\": \"" + hex + "\"}");
            }
        }
    }

    /// <summary>GET /watch: waits up to 5 s for the client to leave (Response.IsClientConnected)
    /// and records what it saw; GET /watch?result=1 tells it.</summary>
    public sealed class Watch : IHttpHandler
    {
        public bool IsReusable { get { return true; } }

        public void ProcessRequest(HttpContext ctx)
        {
            if (ctx.Request.QueryString["result"] != null)
            {
                ctx.Response.ContentType = "text/plain";
                ctx.Response.Write((ctx.Application["watch"] as string) ?? "pending");
                return;
            }
            ctx.Application["watch"] = "watching";
            DateTime start = DateTime.UtcNow;
            while (ctx.Response.IsClientConnected && DateTime.UtcNow - start < TimeSpan.FromSeconds(5)) Thread.Sleep(20);
            ctx.Application["watch"] = ctx.Response.IsClientConnected ? "still connected" : "client left";
        }
    }
}
