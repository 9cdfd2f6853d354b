using System;
using System.Collections.Generic;
using System.Globalization;
using System.IO;
using System.Text;
using System.Threading;
using System.Threading.Tasks;
using Ember.Interop;

namespace Ember
{
    /// <summary>
    /// One OWIN request: its environment (everything copied out of the engine's memory first,
    /// since an OWIN application awaits), its response stream and headers, and the answer through
    /// <see cref="ResponseSink"/> (the single place that switches to streaming later).
    /// </summary>
    internal sealed unsafe class OwinCall
    {
        readonly ulong _req;
        readonly EmberServer _server;
        readonly ResponseSink _sink;
        IDictionary<string, object> _env;
        Dictionary<string, string[]> _responseHeaders;
        List<KeyValuePair<Action<object>, object>> _onSendingHeaders;
        int _headersSent;
        string _method, _path;

        internal OwinCall(ulong req, EmberServer server)
        {
            _req = req;
            _server = server;
            _sink = new ResponseSink(req);
        }

        internal IDictionary<string, object> Build(EmberRequestInfo* info, string pathBase, CancellationToken cancelled,
            IDictionary<string, object> capabilities)
        {
            _method = Utf8.Method(info->Method);
            string rawPath = Utf8.FromView(info->Path);
            _path = rawPath;
            string path = PercentDecode(rawPath);
            if (pathBase.Length > 0) path = path.Length > pathBase.Length ? path.Substring(pathBase.Length) : string.Empty;

            var headers = new Dictionary<string, string[]>((int)info->HeaderCount.ToUInt64() + 1, StringComparer.OrdinalIgnoreCase);
            int n = (int)info->HeaderCount.ToUInt64();
            EmberHeader* h = info->Headers;
            for (int i = 0; i < n; i++)
            {
                string name = Utf8.FromView(h[i].Name);
                string value = Utf8.FromView(h[i].Value);
                string[] prev;
                if (headers.TryGetValue(name, out prev))
                {
                    var a = new string[prev.Length + 1];
                    prev.CopyTo(a, 0);
                    a[prev.Length] = value;
                    headers[name] = a;
                }
                else headers[name] = new[] { value };
            }

            string remoteIp, remotePort;
            SplitEndPoint(Utf8.FromView(info->RemoteAddr), out remoteIp, out remotePort);
            uint v = info->HttpVersion;
            _responseHeaders = new Dictionary<string, string[]>(StringComparer.OrdinalIgnoreCase);
            string localPort = _server.Port.ToString(CultureInfo.InvariantCulture);
            string localIp = _server.Options.Host ?? "127.0.0.1";

            var env = new Dictionary<string, object>(32, StringComparer.Ordinal)
            {
                { "owin.Version", "1.0" },
                { "owin.RequestMethod", _method },
                { "owin.RequestScheme", "http" },
                { "owin.RequestPathBase", pathBase },
                { "owin.RequestPath", path },
                { "owin.RequestQueryString", Utf8.FromView(info->Query) },
                { "owin.RequestProtocol", v == 10 ? "HTTP/1.0" : v == 20 ? "HTTP/2.0" : "HTTP/1.1" },
                { "owin.RequestHeaders", headers },
                // STREAMING HOOK (request bodies): the engine buffered the body; with streamed
                // bodies this becomes a stream over ember_request_read.
                { "owin.RequestBody", new MemoryStream(Utf8.ToArray(info->Body), false) },
                { "owin.RequestId", info->Id.ToString("x", CultureInfo.InvariantCulture) },
                { "owin.ResponseHeaders", _responseHeaders },
                { "owin.ResponseBody", new OwinResponseStream(this) },
                // ABORT HOOK: cancelled when the server stops; with the engine's abort notice
                // (EMBER_EVENT_ABORTED) also when this client goes away.
                { "owin.CallCancelled", cancelled },
                { "server.RemoteIpAddress", remoteIp },
                { "server.RemotePort", remotePort },
                { "server.LocalIpAddress", localIp },
                { "server.LocalPort", localPort },
                { "server.IsLocal", remoteIp == "127.0.0.1" || remoteIp == "::1" },
                { "server.OnSendingHeaders", new Action<Action<object>, object>(OnSendingHeaders) },
                { "server.Capabilities", capabilities },
                { "host.OnAppDisposing", cancelled },
                { "host.TraceOutput", Console.Error },
            };
            _env = env;
            return env;
        }

        void OnSendingHeaders(Action<object> callback, object state)
        {
            if (callback == null) throw new ArgumentNullException("callback");
            if (Volatile.Read(ref _headersSent) != 0) throw new InvalidOperationException("the response headers were already sent");
            if (_onSendingHeaders == null) _onSendingHeaders = new List<KeyValuePair<Action<object>, object>>(2);
            _onSendingHeaders.Add(new KeyValuePair<Action<object>, object>(callback, state));
        }

        /// <summary>Fixes the head (status, reason, headers) once: runs server.OnSendingHeaders
        /// callbacks (last registered first, as Katana does) and copies the headers out.</summary>
        void SendHeaders()
        {
            if (Interlocked.Exchange(ref _headersSent, 1) != 0) return;
            var callbacks = _onSendingHeaders;
            if (callbacks != null)
            {
                for (int i = callbacks.Count - 1; i >= 0; i--) callbacks[i].Key(callbacks[i].Value);
            }
            object status;
            int code = 200;
            if (_env.TryGetValue("owin.ResponseStatusCode", out status) && status != null)
                code = Convert.ToInt32(status, CultureInfo.InvariantCulture);
            if (code < 200 || code > 999) throw new InvalidOperationException("owin.ResponseStatusCode " + code + " is not a final status");
            _sink.SetStatus(code);
            foreach (KeyValuePair<string, string[]> h in _responseHeaders)
            {
                if (h.Value == null) continue;
                foreach (string value in h.Value) _sink.AddHeader(h.Key, value);
            }
        }

        /// <summary>A write to owin.ResponseBody (the head is fixed by the first one).</summary>
        internal void Write(byte[] buffer, int offset, int count)
        {
            SendHeaders();
            _sink.Write(buffer, offset, count);
        }

        /// <summary>A flush of owin.ResponseBody: today it fixes the head (see ResponseSink).</summary>
        internal void Flush()
        {
            SendHeaders();
            _sink.Flush(false);
        }

        internal bool Answered { get { return _sink.Done; } }

        /// <summary>The application's Task ended (null = nothing to wait for).</summary>
        internal void Complete(Task t)
        {
            if (t != null && (t.IsFaulted || t.IsCanceled))
            {
                Exception ex = t.IsFaulted ? t.Exception.InnerExceptions.Count == 1 ? t.Exception.InnerExceptions[0] : t.Exception
                                           : new TaskCanceledException(t);
                Fail(ex);
                return;
            }
            try
            {
                SendHeaders();
            }
            catch (Exception ex)
            {
                Fail(ex);
                return;
            }
            Answer();
        }

        /// <summary>The application threw: 500 unless the head went out already (a flush; then
        /// the response ends with what was written).</summary>
        internal void Fail(Exception ex)
        {
            try { _server.RaiseError(ex, _method, _path); } catch { }
            Interlocked.Exchange(ref _headersSent, 1);
            if (_sink.HeadFixed)
            {
                Answer();
                return;
            }
            var fresh = new ResponseSink(_req);
            fresh.SetStatus(500);
            fresh.AddHeader("Content-Type", "text/plain; charset=utf-8");
            byte[] m = Encoding.ASCII.GetBytes("Internal Server Error");
            fresh.Write(m, 0, m.Length);
            Report(fresh.Flush(true));
        }

        void Answer()
        {
            Report(_sink.Flush(true));
        }

        void Report(int rc)
        {
            if (rc != NativeMethods.EMBER_OK)
                _server.RaiseLog(EmberLogLevel.Debug, "OWIN answer not sent: " + Native.ResultName(rc), null);
        }

        static void SplitEndPoint(string s, out string ip, out string port)
        {
            ip = s;
            port = "0";
            int colon = s.LastIndexOf(':');
            if (colon <= 0) return;
            port = s.Substring(colon + 1);
            ip = s.Substring(0, colon).Trim('[', ']');
        }

        /// <summary>Percent-decoding as UTF-8 (owin.RequestPath is the unescaped path).</summary>
        internal static string PercentDecode(string s)
        {
            if (s.IndexOf('%') < 0) return s;
            var bytes = new byte[s.Length * 3];
            int n = 0;
            for (int i = 0; i < s.Length; i++)
            {
                char c = s[i];
                int hi, lo;
                if (c == '%' && i + 2 < s.Length && (hi = Hex(s[i + 1])) >= 0 && (lo = Hex(s[i + 2])) >= 0)
                {
                    bytes[n++] = (byte)(hi * 16 + lo);
                    i += 2;
                }
                else if (c < 0x80) bytes[n++] = (byte)c;
                else n += Encoding.UTF8.GetBytes(s, i, 1, bytes, n);
            }
            return Encoding.UTF8.GetString(bytes, 0, n);
        }

        static int Hex(char c)
        {
            if (c >= '0' && c <= '9') return c - '0';
            if (c >= 'a' && c <= 'f') return c - 'a' + 10;
            if (c >= 'A' && c <= 'F') return c - 'A' + 10;
            return -1;
        }
    }

    /// <summary>owin.ResponseBody: write-only; writes and flushes go to the call's sink.</summary>
    internal sealed class OwinResponseStream : Stream
    {
        readonly OwinCall _call;

        internal OwinResponseStream(OwinCall call) { _call = call; }

        public override bool CanRead { get { return false; } }
        public override bool CanSeek { get { return false; } }
        public override bool CanWrite { get { return true; } }
        public override long Length { get { throw new NotSupportedException(); } }
        public override long Position { get { throw new NotSupportedException(); } set { throw new NotSupportedException(); } }
        public override int Read(byte[] buffer, int offset, int count) { throw new NotSupportedException(); }
        public override long Seek(long offset, SeekOrigin origin) { throw new NotSupportedException(); }
        public override void SetLength(long value) { throw new NotSupportedException(); }

        public override void Write(byte[] buffer, int offset, int count)
        {
            if (buffer == null) throw new ArgumentNullException("buffer");
            if (offset < 0 || count < 0 || offset > buffer.Length - count) throw new ArgumentOutOfRangeException("count");
            if (_call.Answered) throw new ObjectDisposedException("owin.ResponseBody", "the response has ended");
            _call.Write(buffer, offset, count);
        }

        public override Task WriteAsync(byte[] buffer, int offset, int count, CancellationToken cancellationToken)
        {
            Write(buffer, offset, count);
            return Task.CompletedTask;
        }

        public override void Flush() { _call.Flush(); }

        public override Task FlushAsync(CancellationToken cancellationToken)
        {
            Flush();
            return Task.CompletedTask;
        }
    }
}
