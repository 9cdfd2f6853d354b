using System;
using System.Collections.Generic;
using System.Globalization;
using System.IO;
using System.Text;
using System.Threading;
using System.Web;
using Ember.Interop;

namespace Ember.AspNet
{
    /// <summary>
    /// One request handed to HttpRuntime.ProcessRequest: System.Web reads the request through
    /// these members and sends its answer through them. It lives in the application's domain;
    /// the request's fields are read once from the engine's request info (a pointer into native
    /// memory, valid in every domain until the request is answered), the answer leaves through
    /// <see cref="ResponseSink"/>.
    /// </summary>
    internal sealed unsafe class EmberWorkerRequest : HttpWorkerRequest
    {
        readonly AppHost _host;
        readonly ulong _req;
        readonly string _verb, _protocol, _rawPath, _query, _remoteIp;
        readonly int _remotePort;
        readonly string[] _known = new string[RequestHeaderMaximum];
        readonly string[][] _unknown;
        readonly RequestBody _body;
        readonly ResponseSink _sink;
        string _uriPath, _filePath, _pathInfo;
        byte[] _queryBytes;
        bool _closeConnection;
        EndOfSendNotification _endOfSend;
        object _endOfSendData;
        int _ended;
        int _claim;          // 0: untouched, 1: System.Web has it, 2: the host took it back (Handback)
        internal volatile Handback Parked;   // set while System.Web holds it queued
        IntPtr _abortCell;   // AbortCell: the engine's abort notice, once IsClientConnected was asked

        internal EmberWorkerRequest(AppHost host, ulong req, EmberRequestInfo* info)
        {
            _host = host;
            _req = req;
            _sink = new ResponseSink(req);
            _verb = Utf8.Method(info->Method);
            _rawPath = Utf8.FromView(info->Path);
            _query = Utf8.FromView(info->Query);
            uint v = info->HttpVersion;
            _protocol = v == 10 ? "HTTP/1.0" : v == 20 ? "HTTP/2.0" : "HTTP/1.1";
            SplitEndPoint(Utf8.FromView(info->RemoteAddr), out _remoteIp, out _remotePort);

            int n = (int)info->HeaderCount.ToUInt64();
            List<string[]> unknown = null;
            EmberHeader* h = info->Headers;
            for (int i = 0; i < n; i++)
            {
                string name = Utf8.FromView(h[i].Name);
                string value = Utf8.FromView(h[i].Value);
                int k = KnownIndex(name);
                if (k >= 0)
                {
                    string prev = _known[k];
                    _known[k] = prev == null ? value : prev + (k == HeaderCookie ? "; " : ", ") + value;
                }
                else
                {
                    // Repeats become one comma-joined field, as IIS hands them to System.Web.
                    if (unknown == null) unknown = new List<string[]>();
                    string[] same = null;
                    foreach (string[] u in unknown)
                    {
                        if (string.Equals(u[0], name, StringComparison.OrdinalIgnoreCase)) { same = u; break; }
                    }
                    if (same != null) same[1] = same[1] + ", " + value;
                    else unknown.Add(new[] { name, value });
                }
            }
            _unknown = unknown == null ? NoHeaders : unknown.ToArray();
            _body = new RequestBody(this, req, info);
            // System.Web sizes its input by Content-Length: it gets the declared length, or the
            // real one of a chunked body (de-chunked by the engine, see RequestBody).
            if (_body.Total > 0 || _known[HeaderContentLength] != null)
                _known[HeaderContentLength] = _body.Total.ToString(CultureInfo.InvariantCulture);
            _known[HeaderTransferEncoding] = null;
        }

        static readonly string[][] NoHeaders = new string[0][];

        internal ulong RequestToken { get { return _req; } }
        internal ResponseSink Sink { get { return _sink; } }

        /// <summary>
        /// Marks the request as System.Web's, at the first thing System.Web does with it beyond
        /// reading its fields (HttpRuntime.Process sets the end-of-send notification before the
        /// pipeline runs; the queue manager's 503 starts with SendStatus). False when the host
        /// took it back first (<see cref="Handback"/>): then nothing System.Web does reaches the
        /// engine, which another domain or the host answers.
        /// </summary>
        internal bool Claim()
        {
            int c = Volatile.Read(ref _claim);
            if (c == 0)
            {
                c = Interlocked.CompareExchange(ref _claim, 1, 0);
                if (c == 0)
                {
                    Handback h = Parked;
                    if (h != null) h.Unpark(this);
                    return true;
                }
            }
            return c == 1;
        }

        /// <summary>System.Web has not started on it.</summary>
        internal bool Untouched { get { return Volatile.Read(ref _claim) == 0; } }

        /// <summary>The host takes an untouched request back; false if System.Web has it.</summary>
        internal bool TakeBack() { return Interlocked.CompareExchange(ref _claim, 2, 0) == 0; }

        /// <summary>Part of a streamed body was read: it cannot go to another domain.</summary>
        internal bool BodyPulled { get { return _body.Pulled; } }

        /// <summary>True while the engine's request memory may be read (until the answer).</summary>
        internal bool RequestViewsLive { get { return !_sink.Done; } }

        // ---------------- paths ----------------

        void ResolvePaths()
        {
            if (_uriPath != null) return;
            string path = PercentDecode(_rawPath);
            string file = path, info = string.Empty;
            // "/handler.ashx/extra": the file part ends at the first segment that names a file.
            int dot = path.IndexOf('.');
            if (dot >= 0 && path.IndexOf('/', dot) >= 0)
            {
                int start = 0;
                while (true)
                {
                    int slash = path.IndexOf('/', start + 1);
                    if (slash < 0) break;
                    string candidate = path.Substring(0, slash);
                    if (candidate.LastIndexOf('.') > candidate.LastIndexOf('/') && File.Exists(MapPath(candidate)))
                    {
                        file = candidate;
                        info = path.Substring(slash);
                        break;
                    }
                    start = slash;
                }
            }
            else if (path.EndsWith("/", StringComparison.Ordinal))
            {
                string doc = _host.DefaultDocument(MapPath(path));
                if (doc != null) file = path + doc;
            }
            _uriPath = path;
            _filePath = file;
            _pathInfo = info;
        }

        /// <summary>"/dir" naming a folder: System.Web would not find a handler, IIS redirects.</summary>
        internal string DirectoryRedirect()
        {
            ResolvePaths();
            if (_uriPath.EndsWith("/", StringComparison.Ordinal) || _pathInfo.Length > 0) return null;
            int lastSlash = _uriPath.LastIndexOf('/');
            if (_uriPath.IndexOf('.', lastSlash + 1) >= 0) return null;
            if (!Directory.Exists(MapPath(_uriPath))) return null;
            return _rawPath + "/" + (_query.Length > 0 ? "?" + _query : string.Empty);
        }

        static string PercentDecode(string s)
        {
            if (s.IndexOf('%') < 0) return s;
            var bytes = new List<byte>(s.Length);
            for (int i = 0; i < s.Length; i++)
            {
                char c = s[i];
                int hi, lo;
                if (c == '%' && i + 2 < s.Length && (hi = Hex(s[i + 1])) >= 0 && (lo = Hex(s[i + 2])) >= 0)
                {
                    bytes.Add((byte)(hi * 16 + lo));
                    i += 2;
                }
                else if (c < 0x80) bytes.Add((byte)c);
                else bytes.AddRange(Encoding.UTF8.GetBytes(c.ToString()));
            }
            return Encoding.UTF8.GetString(bytes.ToArray());
        }

        static int Hex(char c)
        {
            if (c >= '0' && c <= '9') return c - '0';
            if (c >= 'a' && c <= 'f') return c - 'a' + 10;
            if (c >= 'A' && c <= 'F') return c - 'A' + 10;
            return -1;
        }

        public override string GetUriPath() { ResolvePaths(); return _uriPath; }
        public override string GetFilePath() { ResolvePaths(); return _filePath; }
        public override string GetPathInfo() { ResolvePaths(); return _pathInfo; }
        public override string GetFilePathTranslated() { return MapPath(GetFilePath()); }
        public override string GetRawUrl() { return _query.Length > 0 ? _rawPath + "?" + _query : _rawPath; }
        public override string GetQueryString() { return _query; }

        public override byte[] GetQueryStringRawBytes()
        {
            return _queryBytes ?? (_queryBytes = Encoding.UTF8.GetBytes(_query));
        }

        public override string GetAppPath() { return _host.VirtualPath; }
        public override string GetAppPathTranslated() { return _host.PhysicalPath; }

        public override string MapPath(string virtualPath)
        {
            return _host.MapPath(virtualPath);
        }

        // ---------------- request line, addresses ----------------

        public override string GetHttpVerbName() { return _verb; }
        public override string GetHttpVersion() { return _protocol; }
        public override string GetProtocol() { return "http"; }
        public override bool IsSecure() { return false; }
        public override string GetRemoteAddress() { return _remoteIp; }
        public override int GetRemotePort() { return _remotePort; }
        public override string GetRemoteName() { return _remoteIp; }
        public override string GetLocalAddress() { return _host.LocalAddress; }
        public override int GetLocalPort() { return _host.LocalPort; }

        public override string GetServerName()
        {
            string host = _known[HeaderHost];
            if (string.IsNullOrEmpty(host)) return _host.LocalAddress;
            if (host[0] == '[')
            {
                int close = host.IndexOf(']');
                return close > 0 ? host.Substring(0, close + 1) : host;
            }
            int colon = host.IndexOf(':');
            return colon > 0 ? host.Substring(0, colon) : host;
        }

        public override string GetServerVariable(string name)
        {
            switch (name)
            {
                case "SERVER_SOFTWARE": return AppHost.ServerSoftware;
                case "GATEWAY_INTERFACE": return "CGI/1.1";
                case "HTTPS": return "off";
                case "SERVER_PROTOCOL": return _protocol;
                default: return null;
            }
        }

        static void SplitEndPoint(string s, out string ip, out int port)
        {
            ip = s;
            port = 0;
            int colon = s.LastIndexOf(':');
            if (colon <= 0) return;
            int.TryParse(s.Substring(colon + 1), NumberStyles.None, CultureInfo.InvariantCulture, out port);
            ip = s.Substring(0, colon);
            if (ip.Length > 1 && ip[0] == '[' && ip[ip.Length - 1] == ']') ip = ip.Substring(1, ip.Length - 2);
        }

        // ---------------- headers ----------------

        static readonly Dictionary<string, int> s_known = BuildKnown();

        static Dictionary<string, int> BuildKnown()
        {
            var d = new Dictionary<string, int>(StringComparer.OrdinalIgnoreCase);
            for (int i = 0; i < RequestHeaderMaximum; i++) d[GetKnownRequestHeaderName(i)] = i;
            return d;
        }

        static int KnownIndex(string name)
        {
            int i;
            return s_known.TryGetValue(name, out i) ? i : -1;
        }

        public override string GetKnownRequestHeader(int index)
        {
            return index >= 0 && index < RequestHeaderMaximum ? _known[index] : null;
        }

        public override string GetUnknownRequestHeader(string name)
        {
            foreach (string[] h in _unknown)
            {
                if (string.Equals(h[0], name, StringComparison.OrdinalIgnoreCase)) return h[1];
            }
            return null;
        }

        public override string[][] GetUnknownRequestHeaders() { return _unknown; }

        // ---------------- body ----------------

        public override byte[] GetPreloadedEntityBody() { return Claim() ? _body.Preloaded() : null; }
        public override int GetPreloadedEntityBodyLength() { return _body.PreloadedLength; }

        public override int GetPreloadedEntityBody(byte[] buffer, int offset)
        {
            byte[] p = Claim() ? _body.Preloaded() : null;
            if (p == null) return 0;
            Buffer.BlockCopy(p, 0, buffer, offset, p.Length);
            return p.Length;
        }

        public override bool IsEntireEntityBodyIsPreloaded() { return _body.EntirelyPreloaded; }
        public override int GetTotalEntityBodyLength() { return _body.Total; }
        public override int ReadEntityBody(byte[] buffer, int size) { return Claim() ? _body.ReadMore(buffer, 0, size) : 0; }
        public override int ReadEntityBody(byte[] buffer, int offset, int size) { return Claim() ? _body.ReadMore(buffer, offset, size) : 0; }

        // ---------------- response ----------------

        public override void SendStatus(int statusCode, string statusDescription)
        {
            if (Claim()) _sink.SetStatus(statusCode);
        }

        public override void SendKnownResponseHeader(int index, string value)
        {
            if (Claim()) _sink.AddHeader(GetKnownResponseHeaderName(index), value);
        }

        public override void SendUnknownResponseHeader(string name, string value)
        {
            if (!Claim()) return;
            if (string.Equals(name, "Connection", StringComparison.OrdinalIgnoreCase))
            {
                // Keep-alive is the engine's business; only a close request is passed on.
                if (value == null || value.IndexOf("close", StringComparison.OrdinalIgnoreCase) < 0) return;
                if (_closeConnection) return;
                _closeConnection = true;
            }
            _sink.AddHeader(name, value);
        }

        public override void SendCalculatedContentLength(int contentLength) { }
        public override void SendCalculatedContentLength(long contentLength) { }
        public override bool HeadersSent() { return _sink.HeadFixed; }

        public override void SendResponseFromMemory(byte[] data, int length)
        {
            if (data == null || !Claim()) return;
            _sink.Write(data, 0, Math.Min(length, data.Length));
        }

        public override void SendResponseFromMemory(IntPtr data, int length)
        {
            if (data == IntPtr.Zero || !Claim()) return;
            _sink.Write((byte*)data, length);
        }

        public override void SendResponseFromFile(string filename, long offset, long length)
        {
            if (!Claim()) return;
            using (var f = new FileStream(filename, FileMode.Open, FileAccess.Read, FileShare.ReadWrite | FileShare.Delete))
                _sink.WriteFile(f, offset, length);
        }

        public override void SendResponseFromFile(IntPtr handle, long offset, long length)
        {
            if (!Claim()) return;
            using (var f = new FileStream(new Microsoft.Win32.SafeHandles.SafeFileHandle(handle, false), FileAccess.Read))
                _sink.WriteFile(f, offset, length);
        }

        public override void FlushResponse(bool finalFlush)
        {
            if (!Claim()) return;
            int rc = _sink.Flush(finalFlush);
            if (finalFlush && rc != NativeMethods.EMBER_OK) _host.Refused(rc);
        }

        public override void CloseConnection()
        {
            if (Claim() && !_closeConnection && !_sink.HeadFixed)
            {
                _closeConnection = true;
                _sink.AddHeader("Connection", "close");
            }
        }

        /// <summary>
        /// False once the client left (or the handler timeout answered, or the server stops): the
        /// engine's abort notice, registered at the first call (a request that never asks pays
        /// nothing) and written into native memory (AbortCell), since this domain may unload
        /// before the engine's last word. After the answer: whether it was taken.
        /// </summary>
        public override bool IsClientConnected()
        {
            if (_sink.Done) return _sink.Result == NativeMethods.EMBER_OK;
            if (_body.Failed) return false;
            if (_abortCell == IntPtr.Zero)
            {
                if (_host.AbortFn == IntPtr.Zero) return true;
                _abortCell = AbortCell.Watch(_req, _host.AbortFn);
            }
            return !AbortCell.IsAborted(_abortCell);
        }

        public override void SetEndOfSendNotification(EndOfSendNotification callback, object extraData)
        {
            if (!Claim()) return;
            _endOfSend = callback;
            _endOfSendData = extraData;
        }

        public override void EndOfRequest()
        {
            if (!Claim() || Interlocked.Exchange(ref _ended, 1) != 0) return;
            // A request that ends without a final flush still gets what it sent.
            if (!_sink.Done) FlushResponse(true);
            IntPtr cell = _abortCell;
            _abortCell = IntPtr.Zero;
            AbortCell.Release(cell);
            EndOfSendNotification cb = _endOfSend;
            if (cb != null)
            {
                try { cb(this, _endOfSendData); } catch { }
            }
        }

        public override string MachineConfigPath { get { return null; } }
        public override string MachineInstallDirectory { get { return null; } }
        public override Guid RequestTraceIdentifier { get { return Guid.Empty; } }
    }
}
