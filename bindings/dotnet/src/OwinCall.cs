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
    /// <see cref="ResponseSink"/> (one call, or a streamed answer once the application flushes).
    /// </summary>
    internal sealed class OwinCall : IRequestOwner
    {
        /// <summary>Collected response bytes beyond this go out as a chunk (the head is fixed then):
        /// an answer up to 1 MiB that is never flushed still goes in one call, with Content-Length.</summary>
        const int AutoFlushBytes = 1 << 20;

        readonly ulong _req;
        readonly EmberServer _server;
        readonly ResponseSink _sink;
        IDictionary<string, object> _env;
        RequestEvents _events;
        CancellationToken _disposing;
        CancellationTokenSource _linked;
        volatile bool _endedByEngine;
        Dictionary<string, string[]> _responseHeaders;
        List<KeyValuePair<Action<object>, object>> _onSendingHeaders;
        int _headersSent;
        string _method, _path;

        internal OwinCall(ulong req, EmberServer server)
        {
            _req = req;
            _server = server;
            _sink = new ResponseSink(req);
            _sink.Events = () => Events;
        }

        /// <summary>The request's engine events, registered at first need (owin.CallCancelled
        /// read, or a flush that found the queue full).</summary>
        public RequestEvents Events
        {
            get
            {
                RequestEvents e = Volatile.Read(ref _events);
                if (e != null) return e;
                lock (_sink)
                {
                    if (_events == null) _events = RequestEvents.Register(_req, _server);
                    return _events;
                }
            }
        }

        public bool HasResponded { get { return _sink.HeadFixed; } }

        public void MarkEndedByEngine() { _endedByEngine = true; }

        /// <summary>owin.CallCancelled, made when the application first reads it: cancelled when
        /// the client leaves, the handler timeout answers, or the server stops.</summary>
        object MakeCallCancelled()
        {
            RequestEvents ev = Events;
            if (ev.IsAborted) return new CancellationToken(true);
            CancellationToken aborted = ev.Aborted;
            if (!aborted.CanBeCanceled) return _disposing;   // the request already ended normally
            _linked = CancellationTokenSource.CreateLinkedTokenSource(_disposing, aborted);
            return _linked.Token;
        }

        internal unsafe IDictionary<string, object> Build(EmberRequestInfo* info, string pathBase, CancellationToken cancelled,
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

            _disposing = cancelled;
            Stream requestBody = (info->Flags & NativeMethods.EMBER_REQUEST_BODY_STREAMED) != 0
                ? (Stream)new EmberRequestBodyStream(this, info->Id, info->ContentLength)
                : new MemoryStream(Utf8.ToArray(info->Body), false);
            var env = new OwinEnvironment(32, "owin.CallCancelled", MakeCallCancelled)
            {
                { "owin.Version", "1.0" },
                { "owin.RequestMethod", _method },
                { "owin.RequestScheme", "http" },
                { "owin.RequestPathBase", pathBase },
                { "owin.RequestPath", path },
                { "owin.RequestQueryString", Utf8.FromView(info->Query) },
                { "owin.RequestProtocol", v == 10 ? "HTTP/1.0" : v == 20 ? "HTTP/2.0" : "HTTP/1.1" },
                { "owin.RequestHeaders", headers },
                // Methods that carry bodies stream them (read as they arrive); GET, HEAD, DELETE
                // and OPTIONS come buffered (see MapOwin).
                { "owin.RequestBody", requestBody },
                { "owin.RequestId", info->Id.ToString("x", CultureInfo.InvariantCulture) },
                { "owin.ResponseHeaders", _responseHeaders },
                { "owin.ResponseBody", new OwinResponseStream(this) },
                // owin.CallCancelled: made on first access (OwinEnvironment, MakeCallCancelled).
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

        /// <summary>A write to owin.ResponseBody (the head is fixed by the first one). Collected until
        /// a flush, the end, or 1 MiB: then it goes out as a chunk (waiting, blocking, while the
        /// client is slow).</summary>
        internal void Write(byte[] buffer, int offset, int count)
        {
            SendHeaders();
            _sink.Write(buffer, offset, count);
            if (_sink.Buffered >= AutoFlushBytes) Check(_sink.Flush(false));
        }

        internal Task WriteAsync(byte[] buffer, int offset, int count)
        {
            SendHeaders();
            _sink.Write(buffer, offset, count);
            if (_sink.Buffered < AutoFlushBytes) return s_done;
            return FlushAsync();
        }

        /// <summary>A flush of owin.ResponseBody: the head and what was written go out now (a
        /// streamed answer from then on).</summary>
        internal void Flush()
        {
            SendHeaders();
            Check(_sink.Flush(false));
        }

        internal async Task FlushAsync()
        {
            SendHeaders();
            Check(await _sink.FlushAsync(false).ConfigureAwait(false));
        }

        static readonly Task s_done = Task.FromResult(true);

        /// <summary>A write that could not go on: the client left (or the engine answered).</summary>
        void Check(int rc)
        {
            if (rc == NativeMethods.EMBER_OK) return;
            throw ResponseEnded(rc);
        }

        internal Exception ResponseEnded(int rc)
        {
            var result = (EmberResult)rc;
            if (result == EmberResult.ClientGone || result == EmberResult.TimedOut || result == EmberResult.InvalidHandle
                || result == EmberResult.TooLarge)
            {
                MarkEndedByEngine();
                return new EmberStreamException(result == EmberResult.InvalidHandle ? EmberResult.ClientGone : result,
                    "the response cannot go on: the client left, the handler timeout answered, or the server stopped");
            }
            return new ObjectDisposedException("owin.ResponseBody", "the response has ended (" + Native.ResultName(rc) + ")");
        }

        internal bool Answered { get { return _sink.Done; } }

        internal int AnswerResult { get { return _sink.Result; } }

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
            try
            {
                if (EndedByEngine(ex)) _server.RaiseLog(EmberLogLevel.Debug, "OWIN call ended early (" + _method + " " + _path + "): " + ex.Message, ex);
                else _server.RaiseError(ex, _method, _path);
            }
            catch { }
            Interlocked.Exchange(ref _headersSent, 1);
            if (_sink.Streaming)
            {
                // Half an answer must not look whole: cut it.
                _sink.Abort();
                Done();
                return;
            }
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
            Done();
        }

        bool EndedByEngine(Exception ex)
        {
            return RequestEvents.EndedByEngine(ex, _endedByEngine, Volatile.Read(ref _events));
        }

        void Answer()
        {
            Task<int> t = _sink.FlushAsync(true);
            if (t.IsCompleted)
            {
                Report(t.Result);
                Done();
                return;
            }
            t.ContinueWith((done, state) =>
            {
                var call = (OwinCall)state;
                call.Report(done.IsFaulted ? NativeMethods.EMBER_ERR_CLIENT_GONE : done.Result);
                call.Done();
            }, this, CancellationToken.None, TaskContinuationOptions.ExecuteSynchronously, TaskScheduler.Default);
        }

        /// <summary>The call is over: the linked token (if made) lets go of the server's.</summary>
        void Done()
        {
            CancellationTokenSource linked = Interlocked.Exchange(ref _linked, null);
            if (linked != null) linked.Dispose();
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

        void Check(byte[] buffer, int offset, int count)
        {
            if (buffer == null) throw new ArgumentNullException("buffer");
            if (offset < 0 || count < 0 || offset > buffer.Length - count) throw new ArgumentOutOfRangeException("count");
            if (_call.Answered) throw _call.ResponseEnded(_call.AnswerResult == NativeMethods.EMBER_OK ? NativeMethods.EMBER_ERR_ALREADY_ANSWERED : _call.AnswerResult);
        }

        public override void Write(byte[] buffer, int offset, int count)
        {
            Check(buffer, offset, count);
            _call.Write(buffer, offset, count);
        }

        public override Task WriteAsync(byte[] buffer, int offset, int count, CancellationToken cancellationToken)
        {
            try
            {
                Check(buffer, offset, count);
                return _call.WriteAsync(buffer, offset, count);
            }
            catch (Exception ex)
            {
                var t = new TaskCompletionSource<bool>();
                t.SetException(ex);
                return t.Task;
            }
        }

        public override void Flush()
        {
            if (_call.Answered) return;
            _call.Flush();
        }

        public override Task FlushAsync(CancellationToken cancellationToken)
        {
            if (_call.Answered) return Task.CompletedTask;
            return _call.FlushAsync();
        }
    }
}
