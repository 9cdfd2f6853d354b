// The reference app's routes (tests/REFERENCE_APP.md) written as ordinary ASP.NET handlers and
// mapped in web.config, so the shared conformance suite runs against this application too.
using System;
using System.Globalization;
using System.Text;
using System.Threading;
using System.Threading.Tasks;
using System.Web;

namespace ReferenceHandlers
{
    static class Json
    {
        public static string Quote(string s)
        {
            var sb = new StringBuilder(s.Length + 2).Append('"');
            foreach (char c in s)
            {
                switch (c)
                {
                    case '"': sb.Append("\\\""); break;
                    case '\\': sb.Append("\\\\"); break;
                    case '\n': sb.Append("\\n"); break;
                    case '\r': sb.Append("\\r"); break;
                    case '\t': sb.Append("\\t"); break;
                    default:
                        if (c < 0x20 || c == 0x7f) sb.Append("\\u").Append(((int)c).ToString("x4", CultureInfo.InvariantCulture));
                        else sb.Append(c);
                        break;
                }
            }
            return sb.Append('"').ToString();
        }

        public static void Send(HttpContext ctx, string json, int status = 200)
        {
            ctx.Response.StatusCode = status;
            ctx.Response.ContentType = "application/json";
            ctx.Response.Write(json);
        }
    }

    /// <summary>GET /users/{id} → {"id": "<id>"}.</summary>
    public sealed class Users : IHttpHandler
    {
        public bool IsReusable { get { return true; } }

        public void ProcessRequest(HttpContext ctx)
        {
            string rest = ctx.Request.Path.Substring(ctx.Request.ApplicationPath.TrimEnd('/').Length + "/users/".Length);
            Json.Send(ctx, "{\"id\": " + Json.Quote(rest) + "}");
        }
    }

    /// <summary>POST /echo → the body and its Content-Type back.</summary>
    public sealed class Echo : IHttpHandler
    {
        public bool IsReusable { get { return true; } }

        public void ProcessRequest(HttpContext ctx)
        {
            var input = ctx.Request.InputStream;
            var body = new byte[input.Length];
            int read = 0;
            while (read < body.Length)
            {
                int n = input.Read(body, read, body.Length - read);
                if (n <= 0) break;
                read += n;
            }
            ctx.Response.ContentType = ctx.Request.Headers["Content-Type"] ?? "application/octet-stream";
            if (read > 0) ctx.Response.OutputStream.Write(body, 0, read);   // Mono refuses an empty write
        }
    }

    /// <summary>GET /inspect → method, path, raw query, headers, remote address as JSON.</summary>
    public sealed class Inspect : IHttpHandler
    {
        public bool IsReusable { get { return true; } }

        public void ProcessRequest(HttpContext ctx)
        {
            HttpRequest r = ctx.Request;
            var sb = new StringBuilder(512);
            string raw = r.RawUrl;
            int q = raw.IndexOf('?');
            sb.Append("{\"method\": ").Append(Json.Quote(r.HttpMethod));
            sb.Append(", \"path\": ").Append(Json.Quote(q < 0 ? raw : raw.Substring(0, q)));
            sb.Append(", \"query\": ").Append(Json.Quote(q < 0 ? "" : raw.Substring(q + 1)));
            sb.Append(", \"headers\": {");
            for (int i = 0; i < r.Headers.Count; i++)
            {
                if (i > 0) sb.Append(", ");
                sb.Append(Json.Quote(r.Headers.GetKey(i).ToLowerInvariant())).Append(": ").Append(Json.Quote(r.Headers[i]));
            }
            sb.Append("}, \"remote_addr\": ").Append(Json.Quote(r.UserHostAddress + ":" + r.ServerVariables["REMOTE_PORT"])).Append('}');
            Json.Send(ctx, sb.ToString());
        }
    }

    /// <summary>GET /slow?ms=N: an asynchronous handler, answered from a timer after N ms.</summary>
    public sealed class Slow : HttpTaskAsyncHandler
    {
        public override async Task ProcessRequestAsync(HttpContext ctx)
        {
            int ms;
            string s = ctx.Request.QueryString["ms"];
            if (s == null || s.Length > 9 || !int.TryParse(s, NumberStyles.None, CultureInfo.InvariantCulture, out ms) || ms > 600000)
            {
                Json.Send(ctx, "{\"error\": \"expected ms=0..600000\"}", 400);
                return;
            }
            if (ms > 0) await Task.Delay(ms);
            Json.Send(ctx, "{\"slept_ms\": " + ms.ToString(CultureInfo.InvariantCulture) + "}");
        }
    }

    /// <summary>GET /fail: throws; ASP.NET answers 500 (Error.aspx) and keeps serving.</summary>
    public sealed class Fail : IHttpHandler
    {
        public bool IsReusable { get { return true; } }

        public void ProcessRequest(HttpContext ctx)
        {
            throw new InvalidOperationException("this handler always fails");
        }
    }
}
