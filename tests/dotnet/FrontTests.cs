// The engine's own features through the .NET binding: static mounts, compression, the output
// cache (CacheFor, PurgeCache, GetCacheStats), CORS and request filters, and bad settings.
using System;
using System.IO;
using System.IO.Compression;
using System.Threading;
using Ember;

namespace EmberTests
{
    public static class Front
    {
        static string TempSite()
        {
            string dir = Path.Combine(Path.GetTempPath(), "ember-net-site-" + Guid.NewGuid().ToString("N"));
            Directory.CreateDirectory(Path.Combine(dir, "docs"));
            File.WriteAllText(Path.Combine(dir, "index.html"), "<h1>home</h1>");
            File.WriteAllText(Path.Combine(dir, "docs", "index.html"), "<h1>docs</h1>");
            File.WriteAllText(Path.Combine(dir, "big.txt"), new string('z', 60000));
            File.WriteAllText(Path.Combine(dir, ".secret"), "hidden");
            return dir;
        }

        [Test]
        public static void Static_files_are_served_by_the_engine()
        {
            string dir = TempSite();
            try
            {
                using (var s = new EmberServer())
                {
                    s.MapStatic("/www", dir, new EmberStaticOptions { CacheControl = "max-age=30" });
                    s.UseCompression(gzip: true, brotli: false, minBytes: 100);
                    int port = s.Start(0);
                    var r = Http.Get(port, "/www/");
                    Assert.Equal(200, r.Status, "index status");
                    Assert.Equal("<h1>home</h1>", r.Text, "index body");
                    Assert.Equal("max-age=30", r.Headers["Cache-Control"], "cache-control");
                    Assert.Equal(301, Http.Get(port, "/www/docs").Status, "folder redirect");
                    Assert.Equal(304, Http.Get(port, "/www/", "If-None-Match: " + r.Headers["ETag"]).Status, "304");
                    r = Http.Get(port, "/www/big.txt", "Range: bytes=59990-");
                    Assert.Equal(206, r.Status, "range");
                    Assert.Equal("zzzzzzzzzz", r.Text, "range body");
                    Assert.Equal(416, Http.Get(port, "/www/big.txt", "Range: bytes=200000-").Status, "416");
                    Assert.Equal(404, Http.Get(port, "/www/.secret").Status, "dotfile");
                    Assert.Equal(403, Http.Get(port, "/www/%2e%2e/%2e%2e/etc/passwd").Status, "traversal");
                    r = Http.Get(port, "/www/big.txt", "Accept-Encoding: gzip");
                    Assert.Equal("gzip", r.Headers["Content-Encoding"], "compressed on the fly");
                    using (var gz = new GZipStream(new MemoryStream(r.Body), CompressionMode.Decompress))
                    using (var reader = new StreamReader(gz))
                        Assert.Equal(60000, reader.ReadToEnd().Length, "gunzipped length");
                    // zstd is asked for by default (UseCompression's zstd: true) and sent only by
                    // a library built with it; the default build answers a zstd-only client as is.
                    bool zstd = (EmberServer.CompressionCodings & EmberCompression.Zstd) != 0;
                    Assert.True((EmberServer.CompressionCodings & EmberCompression.Gzip) != 0, "gzip built");
                    r = Http.Get(port, "/www/big.txt", "Accept-Encoding: zstd");
                    Assert.Equal(zstd, r.Headers.ContainsKey("Content-Encoding") && r.Headers["Content-Encoding"] == "zstd", "zstd only when built");
                    if (!zstd) Assert.Equal(60000, r.Body.Length, "sent as it is");
                }
            }
            finally { Directory.Delete(dir, true); }
        }

        [Test]
        public static void Cached_answers_skip_the_handler_until_purged()
        {
            int calls = 0;
            using (var s = new EmberServer())
            {
                s.UseOutputCache(8L << 20);
                s.MapGet("/c", ctx => { Interlocked.Increment(ref calls); ctx.Response.CacheFor(TimeSpan.FromSeconds(30)).Text("v" + calls); });
                s.MapGet("/nocache", ctx => { Interlocked.Increment(ref calls); ctx.Response.CacheFor(TimeSpan.FromSeconds(30)); ctx.Response.AddHeader("Set-Cookie", "a=1"); ctx.Response.Text("c"); });
                int port = s.Start(0);
                for (int i = 0; i < 3; i++)
                {
                    var r = Http.Get(port, "/c");
                    Assert.Equal("v1", r.Text, "cached body");
                    Assert.True(!r.Headers.ContainsKey("Ember-Cache"), "marker removed");
                }
                Assert.Equal(1, calls, "handler ran once");
                Http.Get(port, "/nocache");
                Http.Get(port, "/nocache");
                Assert.Equal(3, calls, "Set-Cookie answers are not kept");
                EmberCacheStats st = s.GetCacheStats();
                Assert.Equal(2L, st.Hits, "hits");
                Assert.Equal(1L, st.Entries, "entries");
                Assert.Equal(1L, s.PurgeCache("/c"), "purged");
                Assert.Equal("v4", Http.Get(port, "/c").Text, "after purge");
            }
        }

        [Test]
        public static void Cors_and_filters_answer_before_the_handler()
        {
            int calls = 0;
            using (var s = new EmberServer())
            {
                s.UseCors("/api", new EmberCorsPolicy { Origins = "https://a.example", Methods = "GET", MaxAge = TimeSpan.FromMinutes(1) });
                s.AllowMethods("GET, HEAD, OPTIONS");
                s.DenyPath("/api/internal/*");
                s.MaxUrlBytes(200);
                s.MapGet("/api/{*rest}", ctx => { Interlocked.Increment(ref calls); ctx.Response.Text("api"); });
                int port = s.Start(0);
                var r = Http.Send(port, "OPTIONS", "/api/x", null, "Origin: https://a.example", "Access-Control-Request-Method: GET");
                Assert.Equal(204, r.Status, "preflight");
                Assert.Equal("https://a.example", r.Headers["Access-Control-Allow-Origin"], "allow origin");
                Assert.Equal("60", r.Headers["Access-Control-Max-Age"], "max age");
                r = Http.Get(port, "/api/x", "Origin: https://a.example");
                Assert.Equal("https://a.example", r.Headers["Access-Control-Allow-Origin"], "actual request");
                Assert.Equal(405, Http.Send(port, "DELETE", "/api/x", null).Status, "method filter");
                Assert.Equal(404, Http.Get(port, "/api/internal/x").Status, "path filter");
                Assert.Equal(414, Http.Get(port, "/api/" + new string('a', 300)).Status, "url length");
                Assert.Equal(1, calls, "only the actual request reached .NET");
            }
        }

        [Test]
        public static void Bad_settings_fail_start_with_the_engine_message()
        {
            using (var s = new EmberServer())
            {
                s.MapStatic("/s", "/no/such/folder");
                var e = Assert.Throws<EmberException>(() => s.Start(0), "missing folder");
                Assert.Equal(EmberResult.InvalidArg, e.Result, "result");
                Assert.True(e.Message.Contains("/no/such/folder"), "message names the folder: " + e.Message);
                Assert.True(!s.IsRunning, "not running");
            }
            using (var s = new EmberServer())
            {
                s.DenyIp("not-an-ip");
                Assert.Equal(EmberResult.InvalidArg, Assert.Throws<EmberException>(() => s.Start(0), "bad ip").Result, "ip result");
            }
            using (var s = new EmberServer())
            {
                s.MapGet("/", ctx => ctx.Response.Text("x"));
                s.Start(0);
                Assert.Throws<InvalidOperationException>(() => s.UseCompression(), "after start");
                Assert.Equal(EmberResult.State, Assert.Throws<EmberException>(() => s.GetCacheStats(), "the cache is off").Result, "stats result");
            }
        }
    }
}
