// The NuGet consume test's app (scripts/nuget.sh): starts an Ember server on a free port, asks
// it over HTTP, prints the answer. A failure to load the engine is printed as "error: ...".
using System;
using System.Net;
using Ember;

static class App
{
    static int Main()
    {
        try
        {
            using (var server = new EmberServer())
            {
                server.MapGet("/", ctx => ctx.Response.Text("Hello from Ember"));
                int port = server.Start(0);
                Console.WriteLine("native: " + EmberServer.NativeLibraryPath + " (ABI " + EmberServer.NativeAbiVersion + ")");
                using (var web = new WebClient())
                    Console.WriteLine("answer: " + web.DownloadString("http://127.0.0.1:" + port + "/"));
                server.Stop(TimeSpan.FromSeconds(5));
            }
            return 0;
        }
        catch (Exception e)
        {
            Console.WriteLine("error: " + e.GetType().Name + ": " + e.Message);
            return 1;
        }
    }
}
