// The plain way to serve an ASP.NET application on the .NET Framework without IIS or Ember:
// System.Net.HttpListener hands each request to HttpRuntime.ProcessRequest through a small
// HttpWorkerRequest (what Hearth does on HTTP.sys, and the classic "host ASP.NET in your own
// process" sample). A bench target: the Ember ASP.NET host is measured against it on the same
// application (bench/aspnet/site).
// Usage: mono SITE/bin/HttpListenerAspNet.exe SITE PORT [accept-loops]
// It must sit in SITE/bin: ApplicationHost.CreateApplicationHost loads the host type from the
// application's own folders (the harness copies it there). First stdout line:
// "listening on http://127.0.0.1:PORT". Stops on SIGTERM/SIGINT.
using System;
using System.Collections.Generic;
using System.IO;
using System.Net;
using System.Threading;
using System.Threading.Tasks;
using System.Web;
using System.Web.Hosting;
using Mono.Unix;
using Mono.Unix.Native;

static class HttpListenerAspNet
{
    static int Main(string[] args)
    {
        if (args.Length < 2) { Console.Error.WriteLine("usage: HttpListenerAspNet.exe SITE PORT [loops]"); return 2; }
        string site = Path.GetFullPath(args[0]);
        int port = int.Parse(args[1]);
        int loops = args.Length > 2 ? int.Parse(args[2]) : Environment.ProcessorCount * 4;
        var host = (ListenerHost)ApplicationHost.CreateApplicationHost(typeof(ListenerHost), "/", site);
        try { host.Start(port, loops); }
        catch (Exception e) { Console.Error.WriteLine("start failed: " + e.Message); return 1; }
        Console.Out.WriteLine("listening on http://127.0.0.1:" + port);
        Console.Out.Flush();
        var signals = new UnixSignal[] { new UnixSignal(Signum.SIGTERM), new UnixSignal(Signum.SIGINT) };
        UnixSignal.WaitAny(signals);
        try { host.Stop(); } catch (Exception) { }
        Environment.Exit(0);
        return 0;
    }
}

/// <summary>Lives in the application's domain and owns the listener there (no per-request
/// crossing, the most favourable layout for this host).</summary>
public sealed class ListenerHost : MarshalByRefObject
{
    HttpListener _listener;

    public override object InitializeLifetimeService() { return null; }

    public void Start(int port, int loops)
    {
        ThreadPool.SetMinThreads(Math.Max(loops, 8), 8);
        _listener = new HttpListener();
        _listener.Prefixes.Add("http://127.0.0.1:" + port + "/");
        _listener.Start();
        for (int i = 0; i < loops; i++) Task.Run(() => AcceptLoop());
    }

    public void Stop()
    {
        try { _listener.Abort(); } catch (Exception) { }
    }

    async Task AcceptLoop()
    {
        while (_listener.IsListening)
        {
            HttpListenerContext ctx;
            try { ctx = await _listener.GetContextAsync().ConfigureAwait(false); }
            catch (Exception) { if (!_listener.IsListening) return; continue; }
            var wr = new ListenerWorkerRequest(ctx);
            try
            {
                HttpRuntime.ProcessRequest(wr);
            }
            catch (Exception)
            {
                try { ctx.Response.StatusCode = 500; ctx.Response.Close(); } catch (Exception) { }
            }
        }
    }
}

sealed class ListenerWorkerRequest : HttpWorkerRequest
{
    readonly HttpListenerContext _ctx;
    readonly HttpListenerRequest _rq;
    readonly HttpListenerResponse _rs;
    readonly MemoryStream _body = new MemoryStream();
    readonly string _path;
    bool _headersSent, _done;
    EndOfSendNotification _endOfSend;
    object _endOfSendData;

    public ListenerWorkerRequest(HttpListenerContext ctx)
    {
        _ctx = ctx;
        _rq = ctx.Request;
        _rs = ctx.Response;
        _path = Uri.UnescapeDataString(_rq.Url.AbsolutePath);
    }

    public override string GetUriPath() { return _path; }
    public override string GetFilePath() { return _path; }
    public override string GetPathInfo() { return string.Empty; }
    public override string GetQueryString() { string q = _rq.Url.Query; return q.Length > 0 ? q.Substring(1) : q; }
    public override string GetRawUrl() { return _rq.RawUrl; }
    public override string GetHttpVerbName() { return _rq.HttpMethod; }
    public override string GetHttpVersion() { return "HTTP/" + _rq.ProtocolVersion; }
    public override string GetRemoteAddress() { return _rq.RemoteEndPoint.Address.ToString(); }
    public override int GetRemotePort() { return _rq.RemoteEndPoint.Port; }
    public override string GetLocalAddress() { return _rq.LocalEndPoint.Address.ToString(); }
    public override int GetLocalPort() { return _rq.LocalEndPoint.Port; }
    public override string GetAppPath() { return HttpRuntime.AppDomainAppVirtualPath; }
    public override string GetAppPathTranslated() { return HttpRuntime.AppDomainAppPath; }
    public override string GetFilePathTranslated() { return MapPath(_path); }

    public override string MapPath(string virtualPath)
    {
        return Path.Combine(HttpRuntime.AppDomainAppPath, (virtualPath ?? string.Empty).TrimStart('/', '~').Replace('/', Path.DirectorySeparatorChar));
    }

    public override string GetKnownRequestHeader(int index) { return _rq.Headers[GetKnownRequestHeaderName(index)]; }
    public override string GetUnknownRequestHeader(string name) { return _rq.Headers[name]; }

    public override string[][] GetUnknownRequestHeaders()
    {
        var list = new List<string[]>();
        foreach (string key in _rq.Headers.AllKeys)
        {
            if (GetKnownRequestHeaderIndex(key) < 0) list.Add(new[] { key, _rq.Headers[key] });
        }
        return list.ToArray();
    }

    public override byte[] GetPreloadedEntityBody() { return null; }
    public override bool IsEntireEntityBodyIsPreloaded() { return false; }
    public override int GetTotalEntityBodyLength() { return (int)Math.Max(0, _rq.ContentLength64); }
    public override int ReadEntityBody(byte[] buffer, int size) { return _rq.InputStream.Read(buffer, 0, size); }

    public override void SendStatus(int statusCode, string statusDescription)
    {
        _rs.StatusCode = statusCode;
        _rs.StatusDescription = statusDescription;
    }

    public override void SendKnownResponseHeader(int index, string value)
    {
        SendUnknownResponseHeader(GetKnownResponseHeaderName(index), value);
    }

    public override void SendUnknownResponseHeader(string name, string value)
    {
        if (_headersSent) return;
        switch (name.ToLowerInvariant())
        {
            case "content-length": case "transfer-encoding": case "connection": case "keep-alive": return;
            case "content-type": _rs.ContentType = value; return;
            default: _rs.AddHeader(name, value); return;
        }
    }

    public override void SendResponseFromMemory(byte[] data, int length) { _body.Write(data, 0, length); }

    public override void SendResponseFromFile(string filename, long offset, long length)
    {
        using (var f = File.OpenRead(filename))
        {
            f.Seek(offset, SeekOrigin.Begin);
            var buf = new byte[Math.Min(length < 0 ? f.Length : length, f.Length - offset)];
            int n = f.Read(buf, 0, buf.Length);
            _body.Write(buf, 0, n);
        }
    }

    public override void SendResponseFromFile(IntPtr handle, long offset, long length)
    {
        throw new NotSupportedException();
    }

    public override bool HeadersSent() { return _headersSent; }

    public override void FlushResponse(bool finalFlush)
    {
        if (!finalFlush || _done) return;
        _done = true;
        _headersSent = true;
        try
        {
            _rs.ContentLength64 = _body.Length;
            _rs.OutputStream.Write(_body.GetBuffer(), 0, (int)_body.Length);
            _rs.Close();
        }
        catch (Exception) { }
    }

    public override void EndOfRequest()
    {
        FlushResponse(true);
        if (_endOfSend != null) _endOfSend(this, _endOfSendData);
    }

    public override void SetEndOfSendNotification(EndOfSendNotification callback, object extraData)
    {
        _endOfSend = callback;
        _endOfSendData = extraData;
    }
}
