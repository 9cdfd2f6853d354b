// The smallest Ember program: mono Hello.exe [port]  (port 0 picks a free one)
using System;
using System.Threading.Tasks;
using Ember;

static class Hello
{
    static int Main(string[] args)
    {
        int port = args.Length > 0 ? int.Parse(args[0]) : 8080;
        using (var server = new EmberServer())
        {
            server.MapGet("/", ctx => ctx.Response.Text("Hello from Ember\n"));
            server.MapGet("/hello/{name}", ctx =>
                ctx.Response.Json("{\"hello\": \"" + ctx.Request.GetRouteValue("name") + "\"}"));
            server.MapGet("/later", async ctx =>
            {
                await Task.Delay(100);   // no engine thread is held while waiting
                ctx.Response.Text("done\n");
            });
            server.Error += (s, e) => Console.Error.WriteLine("handler failed: " + e.Exception);

            port = server.Start(port);
            Console.WriteLine("listening on http://127.0.0.1:" + port);
            Console.WriteLine("press Enter to stop");
            Console.ReadLine();
            server.Stop(TimeSpan.FromSeconds(5));
        }
        return 0;
    }
}
