// Behind a load balancer through the .NET binding: the health path, Drain, trusted proxies.
using System;
using Ember;

namespace EmberTests
{
    public static class Fleet
    {
        [Test]
        public static void Health_path_answers_503_once_draining()
        {
            var o = new EmberOptions { HealthPath = "/healthz" };
            using (var s = new EmberServer(o))
            {
                s.MapGet("/x", c => c.Response.Text("x"));
                int port = s.Start(0);
                var r = Http.Get(port, "/healthz");
                Assert.Equal(200, r.Status, "healthy");
                Assert.Equal("{\"status\": \"ok\"}", r.Text, "health body");
                s.Drain();
                s.Drain();
                Assert.Equal(503, Http.Get(port, "/healthz").Status, "draining");
                r = Http.Get(port, "/x");
                Assert.Equal(200, r.Status, "still served");
                // (Http.Get asks for Connection: close itself; the Python binding's test checks
                // that a keep-alive request is answered with close while draining.)
            }
            using (var s = new EmberServer())
            {
                bool threw = false;
                try { s.Drain(); } catch (InvalidOperationException) { threw = true; }
                Assert.True(threw, "Drain before Start");
            }
        }

        [Test]
        public static void Forwarded_for_is_believed_only_from_a_trusted_proxy()
        {
            foreach (var trusted in new[] { "127.0.0.1", "10.0.0.0/8" })
            {
                var o = new EmberOptions();
                o.TrustedProxies.Add(trusted);
                using (var s = new EmberServer(o))
                {
                    s.MapGet("/who", c => c.Response.Text(c.Request.RemoteAddress));
                    int port = s.Start(0);
                    string who = Http.Get(port, "/who", "X-Forwarded-For: 203.0.113.7").Text;
                    string want = trusted == "127.0.0.1" ? "203.0.113.7" : "127.0.0.1";
                    Assert.True(who.StartsWith(want, StringComparison.Ordinal), trusted + ": " + who);
                }
            }
        }
    }
}
