// Mono System.Net.HttpListener hello server for the Ember benchmark suite: what PicoServer and
// Hearth run on. Usage: mono HttpListenerHello.exe [port] [accept-loops]
// (port 0 = the harness should pass a free port: HttpListener cannot report a port it picked).
// First stdout line: "listening on http://127.0.0.1:PORT". Stops on SIGTERM/SIGINT.
using System;
using System.Net;
using System.Text;
using System.Threading;
using System.Threading.Tasks;
using Mono.Unix;
using Mono.Unix.Native;

static class HttpListenerHello
{
    static readonly byte[] Body = Encoding.UTF8.GetBytes("{\"code\": 1, \"msg\": \"Hello WebAPI\"}");

    static int Main(string[] args)
    {
        int port = args.Length > 0 ? int.Parse(args[0]) : 8080;
        int loops = args.Length > 1 ? int.Parse(args[1]) : 0;
        if (loops <= 0) loops = Environment.ProcessorCount * 4;
        ThreadPool.SetMinThreads(Math.Max(loops, 8), 8);

        var listener = new HttpListener();
        listener.Prefixes.Add("http://127.0.0.1:" + port + "/");
        try { listener.Start(); }
        catch (Exception e) { Console.Error.WriteLine("start failed: " + e.Message); return 1; }
        Console.Out.WriteLine("listening on http://127.0.0.1:" + port);
        Console.Out.Flush();

        // Several outstanding GetContextAsync loops, as a typical HttpListener server runs.
        for (int i = 0; i < loops; i++) Task.Run(() => AcceptLoop(listener));

        var signals = new UnixSignal[] { new UnixSignal(Signum.SIGTERM), new UnixSignal(Signum.SIGINT) };
        UnixSignal.WaitAny(signals);
        try { listener.Abort(); } catch (Exception) { }
        Environment.Exit(0); // do not wait for the accept loops' tasks
        return 0;
    }

    static async Task AcceptLoop(HttpListener listener)
    {
        while (listener.IsListening)
        {
            HttpListenerContext ctx;
            try { ctx = await listener.GetContextAsync().ConfigureAwait(false); }
            catch (Exception) { if (!listener.IsListening) return; continue; }
            try
            {
                var resp = ctx.Response;
                resp.StatusCode = 200;
                resp.ContentType = "application/json";
                resp.ContentLength64 = Body.Length;
                resp.KeepAlive = true;
                resp.OutputStream.Write(Body, 0, Body.Length);
                resp.Close();
            }
            catch (Exception) { try { ctx.Response.Abort(); } catch (Exception) { } }
        }
    }
}
