// Prepared answers (EmberAnswer), the Content-Type-only answer path (ember_request_respond_small)
// and what a request still tells after its answer (its info struct is read in place while live).
using System;
using System.Collections.Generic;
using System.Linq;
using System.Text;
using System.Threading.Tasks;
using Ember;

namespace EmberTests
{
    public static class Answers
    {
        [Test]
        public static void A_prepared_answer_serves_many_requests_with_its_status_headers_and_body()
        {
            using (var s = new EmberServer())
            using (var a = new EmberAnswer(201, "application/json", Encoding.UTF8.GetBytes("{\"a\": 1}"),
                new[] { new KeyValuePair<string, string>("X-Prepared", "yes"), new KeyValuePair<string, string>("Cache-Control", "no-store") }))
            {
                s.MapGet("/", ctx => ctx.Response.Answer(a));
                s.MapGet("/async", async ctx => { await Task.Yield(); ctx.Response.Answer(a); });
                int port = s.Start(0);
                var all = Enumerable.Range(0, 40).Select(i => Http.SendAsync(port, "GET", i % 2 == 0 ? "/" : "/async", null)).ToArray();
                Task.WaitAll(all, 20000);
                foreach (var t in all)
                {
                    HttpResult r = t.Result;
                    Assert.Equal(201, r.Status, "status");
                    Assert.Equal("{\"a\": 1}", r.Text, "body");
                    Assert.Equal("application/json", r.Headers["Content-Type"], "content type");
                    Assert.Equal("yes", r.Headers["X-Prepared"], "extra header");
                    Assert.Equal("no-store", r.Headers["Cache-Control"], "second extra header");
                    Assert.Equal("8", r.Headers["Content-Length"], "length");
                }
                HttpResult head = Http.Send(port, "HEAD", "/", null);
                Assert.Equal(201, head.Status, "HEAD status");
                Assert.Equal(0, head.Body.Length, "HEAD has no body");
            }
        }

        [Test]
        public static void The_answers_body_is_a_copy_made_when_it_is_built()
        {
            using (var s = new EmberServer())
            {
                byte[] body = Encoding.ASCII.GetBytes("before");
                var a = EmberAnswer.Text("x");
                using (var b = new EmberAnswer(200, "text/plain", body))
                {
                    body[0] = (byte)'X';   // changing the caller's array afterwards changes nothing
                    s.MapGet("/", ctx => ctx.Response.Answer(b));
                    int port = s.Start(0);
                    Assert.Equal("before", Http.Get(port, "/").Text, "the body as it was");
                    Assert.Equal("text/plain", Http.Get(port, "/").Headers["Content-Type"], "type");
                }
                a.Dispose();
            }
        }

        [Test]
        public static void A_response_changed_after_Answer_is_sent_as_changed()
        {
            using (var s = new EmberServer())
            using (var a = EmberAnswer.Json("{\"prepared\": true}"))
            {
                s.MapGet("/text", ctx => { ctx.Response.Answer(a); ctx.Response.Text("changed", 202); });
                s.MapGet("/header", ctx => { ctx.Response.Answer(a); ctx.Response.AddHeader("X-Late", "1"); });
                s.MapGet("/status", ctx => { ctx.Response.Answer(a); ctx.Response.StatusCode = 203; });
                s.MapGet("/read", ctx =>
                {
                    ctx.Response.Answer(a);
                    // What the response reports is the answer's content.
                    ctx.Response.AddHeader("X-Seen", ctx.Response.StatusCode + " " + ctx.Response.ContentType);
                });
                int port = s.Start(0);
                HttpResult t = Http.Get(port, "/text");
                Assert.Equal(202, t.Status, "text status");
                Assert.Equal("changed", t.Text, "text body");
                HttpResult h = Http.Get(port, "/header");
                Assert.Equal("{\"prepared\": true}", h.Text, "the answer's body kept");
                Assert.Equal("1", h.Headers["X-Late"], "the added header sent");
                Assert.Equal("application/json", h.Headers["Content-Type"], "the answer's type kept");
                HttpResult st = Http.Get(port, "/status");
                Assert.Equal(203, st.Status, "the new status");
                Assert.Equal("{\"prepared\": true}", st.Text, "with the answer's body");
                Assert.Equal("200 application/json", Http.Get(port, "/read").Headers["X-Seen"], "status and type read back");
            }
        }

        [Test]
        public static void A_disposed_answer_is_still_sent_the_ordinary_way()
        {
            using (var s = new EmberServer())
            {
                var a = new EmberAnswer(200, "text/plain; charset=utf-8", Encoding.UTF8.GetBytes("still here"),
                    new[] { new KeyValuePair<string, string>("X-A", "1") });
                s.MapGet("/", ctx => ctx.Response.Answer(a));
                int port = s.Start(0);
                Assert.Equal("still here", Http.Get(port, "/").Text, "prepared");
                a.Dispose();
                a.Dispose();   // twice is fine
                HttpResult r = Http.Get(port, "/");
                Assert.Equal(200, r.Status, "status after dispose");
                Assert.Equal("still here", r.Text, "body after dispose");
                Assert.Equal("1", r.Headers["X-A"], "header after dispose");
            }
        }

        [Test]
        public static void Bad_answers_are_refused_when_built()
        {
            Assert.Throws<ArgumentOutOfRangeException>(() => new EmberAnswer(101, null, null), "1xx");
            Assert.Throws<ArgumentOutOfRangeException>(() => new EmberAnswer(1000, null, null), "over 999");
            Assert.Throws<ArgumentException>(() => new EmberAnswer(200, "text/plain\r\nX: y", null), "CR LF in the type");
            Assert.Throws<ArgumentException>(() => new EmberAnswer(200, null, null,
                new[] { new KeyValuePair<string, string>("Bad Name", "v") }), "bad header name");
            Assert.Throws<ArgumentNullException>(() => new EmberResponse().Answer(null), "null answer");
            // A value the binding lets through but the engine refuses: refused at once, too.
            Assert.Throws<EmberException>(() => new EmberAnswer(200, "text/\u0001plain", null), "control character in the type");
        }

        [Test]
        public static void Content_type_only_answers_keep_their_type_status_and_body()
        {
            using (var s = new EmberServer())
            {
                string built = "text/x-" + "built";   // a fresh string each request below
                s.MapGet("/text", ctx => ctx.Response.Text("héllo", 418));
                s.MapGet("/json", ctx => ctx.Response.Json("{}"));
                s.MapGet("/bytes", ctx => ctx.Response.Bytes(new byte[] { 1, 2, 3, 4, 5 }, 1, 3, "application/x-three"));
                s.MapGet("/built", ctx => ctx.Response.Bytes(new byte[] { 65 }, string.Concat("text/x-", "built")));
                s.MapGet("/none", ctx => ctx.Response.Status(204));
                s.MapGet("/notype", ctx => { ctx.Response.Write("plain"); ctx.Response.ContentType = null; });
                s.MapGet("/empty", ctx => ctx.Response.Text(""));
                int port = s.Start(0);
                HttpResult t = Http.Get(port, "/text");
                Assert.Equal(418, t.Status, "text status");
                Assert.Equal("héllo", t.Text, "UTF-8 text");
                Assert.Equal("text/plain; charset=utf-8", t.Headers["Content-Type"], "text type");
                Assert.Equal("application/json", Http.Get(port, "/json").Headers["Content-Type"], "json type");
                HttpResult b = Http.Get(port, "/bytes");
                Assert.Equal("2,3,4", string.Join(",", b.Body), "the slice of the array");
                Assert.Equal("application/x-three", b.Headers["Content-Type"], "bytes type");
                for (int i = 0; i < 20; i++)   // more types than the cache holds, each a new string
                    Assert.Equal(built, Http.Get(port, "/built").Headers["Content-Type"], "built type " + i);
                HttpResult n = Http.Get(port, "/none");
                Assert.Equal(204, n.Status, "status only");
                Assert.True(!n.Headers.ContainsKey("Content-Type"), "no type");
                HttpResult nt = Http.Get(port, "/notype");
                Assert.Equal("plain", nt.Text, "body without a type");
                Assert.True(!nt.Headers.ContainsKey("Content-Type"), "no type sent");
                HttpResult e = Http.Get(port, "/empty");
                Assert.Equal("0", e.Headers["Content-Length"], "empty text");
            }
        }

        [Test]
        public static void A_type_the_engine_refuses_answers_500_and_reports_it()
        {
            using (var s = new EmberServer())
            {
                var errors = new List<Exception>();
                s.Error += (o, e) => { lock (errors) errors.Add(e.Exception); };
                s.MapGet("/", ctx => ctx.Response.Bytes(new byte[] { 1 }, "text/\u0001bad"));
                int port = s.Start(0);
                Assert.Equal(500, Http.Get(port, "/").Status, "500 for a refused type");
                Assert.Equal(500, Http.Get(port, "/").Status, "again");
                lock (errors)
                {
                    Assert.Equal(2, errors.Count, "reported each time");
                    Assert.True(errors[0] is EmberException && ((EmberException)errors[0]).Result == EmberResult.InvalidArg, "InvalidArg: " + errors[0]);
                }
            }
        }

        [Test]
        public static void Fixed_facts_of_a_request_stay_readable_after_its_answer()
        {
            using (var s = new EmberServer())
            {
                string seen = null;
                Exception late = null;
                s.MapPost("/", ctx =>
                {
                    ctx.Respond();
                    seen = ctx.Request.ProtocolVersion + " " + ctx.Request.BodyLength + " " + ctx.Request.ContentLength + " " + ctx.Request.IsBodyStreamed;
                    try { GC.KeepAlive(ctx.Request.GetHeader("host")); GC.KeepAlive(ctx.Request.Body); }
                    catch (Exception e) { late = e; }
                });
                int port = s.Start(0);
                Assert.Equal(200, Http.Send(port, "POST", "/", new byte[7]).Status, "answered");
                Assert.Equal("1.1 7 7 False", seen, "version, body length, declared length, streamed");
                Assert.True(late is InvalidOperationException, "the body is gone: " + late);
            }
        }
    }
}
