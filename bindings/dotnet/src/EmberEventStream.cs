using System;
using System.Text;
using System.Threading;
using System.Threading.Tasks;

namespace Ember
{
    /// <summary>
    /// Server-Sent Events (text/event-stream) over a streamed answer.
    /// <code>
    /// server.MapGet("/events", async ctx =>
    /// {
    ///     using (var sse = new EmberEventStream(ctx, TimeSpan.FromSeconds(15), retryMs: 1000))
    ///     {
    ///         int n = int.TryParse(sse.LastEventId, out n) ? n : 0;   // a reconnecting browser says where it was
    ///         while (!ctx.RequestAborted.IsCancellationRequested)
    ///         {
    ///             n++;
    ///             await sse.SendAsync("{\"n\": " + n + "}", eventName: "tick", id: n.ToString());
    ///             await Task.Delay(1000);
    ///         }
    ///     }
    /// });
    /// </code>
    /// <list type="bullet">
    /// <item>The constructor starts the answer: 200, <c>Content-Type: text/event-stream</c>,
    /// <c>Cache-Control: no-cache</c> (plus headers set on the response before), and a
    /// <c>retry:</c> field when <paramref name="retryMs"/> is given.</item>
    /// <item>Each event is one write: <c>id:</c>, <c>event:</c>, then one <c>data:</c> line per line of
    /// the data (CR, LF and CRLF all split), then a blank line.</item>
    /// <item>A comment (<c>: keep-alive</c>) goes out when nothing was sent for the keep-alive
    /// interval, so proxies and browsers keep the connection.</item>
    /// <item>Sends are serialized (the keep-alive timer and several producers may share it); they
    /// wait for room like <see cref="EmberResponseStream"/> and throw
    /// <see cref="EmberStreamException"/> once the client left.</item>
    /// <item>Dispose (or the handler's end) ends the stream.</item>
    /// </list>
    /// </summary>
    public sealed class EmberEventStream : IDisposable
    {
        static readonly byte[] KeepAliveComment = Encoding.ASCII.GetBytes(": keep-alive\n\n");

        readonly EmberContext _ctx;
        readonly EmberResponseStream _stream;
        readonly SemaphoreSlim _lock = new SemaphoreSlim(1, 1);
        readonly Timer _timer;
        readonly string _lastEventId;
        int _sentSinceTick;
        int _disposed;

        /// <summary>Starts the event stream with a keep-alive comment every 15 s.</summary>
        public EmberEventStream(EmberContext context) : this(context, TimeSpan.FromSeconds(15)) { }

        /// <param name="context">The request to answer.</param>
        /// <param name="keepAliveInterval">Idle time before a keep-alive comment; Zero or
        /// Timeout.InfiniteTimeSpan for none.</param>
        /// <param name="retryMs">Sent first as <c>retry:</c> (the client's reconnection delay), or null.</param>
        public EmberEventStream(EmberContext context, TimeSpan keepAliveInterval, int? retryMs = null)
        {
            if (context == null) throw new ArgumentNullException("context");
            if (retryMs.HasValue && retryMs.Value < 0) throw new ArgumentOutOfRangeException("retryMs");
            _ctx = context;
            _lastEventId = context.Request.GetHeader("last-event-id");
            EmberResponse r = context.Response;
            r.StatusCode = 200;
            r.ContentType = "text/event-stream";
            r.SetHeader("Cache-Control", "no-cache");
            _stream = r.StartStream();
            if (retryMs.HasValue)
            {
                byte[] retry = Encoding.ASCII.GetBytes("retry: " + retryMs.Value + "\n\n");
                _stream.Write(retry, 0, retry.Length);
            }
            if (keepAliveInterval > TimeSpan.Zero && keepAliveInterval != Timeout.InfiniteTimeSpan)
                _timer = new Timer(s => ((EmberEventStream)s).Tick(), this, keepAliveInterval, keepAliveInterval);
        }

        /// <summary>The Last-Event-ID the client sent (a reconnecting EventSource sends the last id
        /// it saw), or null.</summary>
        public string LastEventId { get { return _lastEventId; } }

        public EmberContext Context { get { return _ctx; } }

        /// <summary>The underlying streamed answer (for raw writes; prefer the Send methods).</summary>
        public EmberResponseStream Stream { get { return _stream; } }

        /// <summary>Sends one event; waits (without a thread) while the client is slow.</summary>
        public async Task SendAsync(string data, string eventName = null, string id = null,
            CancellationToken cancellationToken = default(CancellationToken))
        {
            byte[] frame = Format(data, eventName, id);
            await _lock.WaitAsync(cancellationToken).ConfigureAwait(false);
            try
            {
                await _stream.WriteAsync(frame, 0, frame.Length, cancellationToken).ConfigureAwait(false);
                Interlocked.Exchange(ref _sentSinceTick, 1);
            }
            finally { _lock.Release(); }
        }

        /// <summary>Sends one event, blocking while the client is slow (see EmberResponseStream.Write:
        /// not on an I/O thread in Inline dispatch).</summary>
        public void Send(string data, string eventName = null, string id = null)
        {
            byte[] frame = Format(data, eventName, id);
            _lock.Wait();
            try
            {
                _stream.Write(frame, 0, frame.Length);
                Interlocked.Exchange(ref _sentSinceTick, 1);
            }
            finally { _lock.Release(); }
        }

        /// <summary>Sends a comment line (ignored by EventSource; keeps intermediaries awake).</summary>
        public async Task CommentAsync(string text, CancellationToken cancellationToken = default(CancellationToken))
        {
            byte[] frame = Encoding.UTF8.GetBytes(":" + (string.IsNullOrEmpty(text) ? string.Empty : " " + NoNewlines(text, "text")) + "\n\n");
            await _lock.WaitAsync(cancellationToken).ConfigureAwait(false);
            try { await _stream.WriteAsync(frame, 0, frame.Length, cancellationToken).ConfigureAwait(false); }
            finally { _lock.Release(); }
        }

        /// <summary>Tells the client how long to wait before it reconnects.</summary>
        public async Task RetryAsync(int milliseconds, CancellationToken cancellationToken = default(CancellationToken))
        {
            if (milliseconds < 0) throw new ArgumentOutOfRangeException("milliseconds");
            byte[] frame = Encoding.ASCII.GetBytes("retry: " + milliseconds + "\n\n");
            await _lock.WaitAsync(cancellationToken).ConfigureAwait(false);
            try { await _stream.WriteAsync(frame, 0, frame.Length, cancellationToken).ConfigureAwait(false); }
            finally { _lock.Release(); }
        }

        /// <summary>The bytes of one event (exposed for tests and raw writers).</summary>
        internal static byte[] Format(string data, string eventName, string id)
        {
            var sb = new StringBuilder(64 + (data == null ? 0 : data.Length));
            if (id != null)
            {
                if (id.IndexOf('\0') >= 0) throw new ArgumentException("an event id must not contain NUL", "id");
                sb.Append("id: ").Append(NoNewlines(id, "id")).Append('\n');
            }
            if (eventName != null) sb.Append("event: ").Append(NoNewlines(eventName, "eventName")).Append('\n');
            string d = data ?? string.Empty;
            int start = 0;
            for (int i = 0; i <= d.Length; i++)
            {
                if (i < d.Length && d[i] != '\r' && d[i] != '\n') continue;
                sb.Append("data: ").Append(d, start, i - start).Append('\n');
                if (i < d.Length && d[i] == '\r' && i + 1 < d.Length && d[i + 1] == '\n') i++;
                start = i + 1;
            }
            sb.Append('\n');
            return Encoding.UTF8.GetBytes(sb.ToString());
        }

        static string NoNewlines(string s, string name)
        {
            if (s.IndexOf('\n') >= 0 || s.IndexOf('\r') >= 0) throw new ArgumentException(name + " must not contain CR or LF", name);
            return s;
        }

        void Tick()
        {
            try
            {
                if (Volatile.Read(ref _disposed) != 0) return;
                if (Interlocked.Exchange(ref _sentSinceTick, 0) != 0) return;   // not idle
                if (!_lock.Wait(0)) return;   // a send is under way
                Task t;
                try { t = _stream.WriteAsync(KeepAliveComment, 0, KeepAliveComment.Length); }
                catch (Exception) { _lock.Release(); StopTimer(); return; }
                t.ContinueWith((done, state) =>
                {
                    var self = (EmberEventStream)state;
                    self._lock.Release();
                    if (done.IsFaulted) self.StopTimer();   // the client left: nothing more to keep alive
                }, this, CancellationToken.None, TaskContinuationOptions.ExecuteSynchronously, TaskScheduler.Default);
            }
            catch (Exception)
            {
                StopTimer();
            }
        }

        void StopTimer()
        {
            if (_timer != null) _timer.Dispose();
        }

        /// <summary>Stops the keep-alive and ends the stream (what is queued still goes out).</summary>
        public void Dispose()
        {
            if (Interlocked.Exchange(ref _disposed, 1) != 0) return;
            StopTimer();
            _stream.Dispose();
        }
    }
}
