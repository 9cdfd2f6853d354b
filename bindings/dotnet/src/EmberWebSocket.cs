using System;
using System.Collections.Generic;
using System.Net.WebSockets;
using System.Text;
using System.Threading;
using System.Threading.Tasks;
using Ember.Interop;

namespace Ember
{
    /// <summary>
    /// One accepted WebSocket connection, handed to the session of
    /// <see cref="EmberServer.MapWebSocket(string, Func{EmberWebSocket, Task})"/>.
    /// <code>
    /// server.MapWebSocket("/ws", async ws =>
    /// {
    ///     EmberWebSocketMessage m;
    ///     while (!(m = await ws.ReceiveAsync()).IsClose)
    ///         await ws.SendAsync(m.Data, m.Type);   // echo
    /// });
    /// </code>
    /// <list type="bullet">
    /// <item>Messages wait in a queue until ReceiveAsync takes them. A peer that sends more than
    /// EmberOptions.WebSocketReceiveQueueBytes that the session has not taken is closed with 1008,
    /// so a session that does not read cannot be flooded.</item>
    /// <item>SendAsync completes once the engine took the message; when the connection's send queue
    /// is full (EmberOptions.WebSocketQueueBytes) it waits for the engine's writable notice, so a
    /// peer that does not read holds the sender back. Any thread; messages are never interleaved.</item>
    /// <item>When the session's Task ends the connection is closed (1000; 1011 if it threw).</item>
    /// <item>Sends on a closed connection throw WebSocketException (InvalidState).</item>
    /// </list>
    /// </summary>
    public sealed class EmberWebSocket
    {
        readonly object _gate = new object();
        readonly NativeInstance _owner;
        readonly long _receiveLimit;
        readonly Queue<EmberWebSocketMessage> _inbox = new Queue<EmberWebSocketMessage>();
        long _inboxBytes;
        bool _overflowed;
        TaskCompletionSource<EmberWebSocketMessage> _receiver;
        TaskCompletionSource<bool> _writable;
        TaskCompletionSource<bool> _ended;
        CancellationTokenSource _closedCts;
        int _state;   // EmberWebSocketState
        int? _closeStatus;
        string _closeDescription;
        IDictionary<object, object> _items;

        internal EmberWebSocket(NativeInstance owner, ulong id, EmberRequest request, string subProtocol, long receiveLimit)
        {
            _owner = owner;
            Id = id;
            Request = request;
            SubProtocol = subProtocol;
            _receiveLimit = receiveLimit;
        }

        /// <summary>The engine's handle of the connection (unique while it is open).</summary>
        public ulong Id { get; private set; }

        /// <summary>The upgrade request (copied: readable for the whole session).</summary>
        public EmberRequest Request { get; private set; }

        /// <summary>The subprotocol agreed at the upgrade, or null.</summary>
        public string SubProtocol { get; private set; }

        public EmberServer Server { get { return _owner.Owner; } }

        /// <summary>Per-connection state for your own code (starts with the upgrade's Items).</summary>
        public IDictionary<object, object> Items
        {
            get { return _items ?? (_items = new Dictionary<object, object>()); }
            internal set { _items = value; }
        }

        public EmberWebSocketState State { get { return (EmberWebSocketState)Volatile.Read(ref _state); } }

        /// <summary>The close code once closed: the peer's (1005 when it gave none), 1006 when the
        /// connection dropped, 1001 when the server stopped, 1009 for a message over the limit.</summary>
        public int? CloseStatus { get { lock (_gate) return _closeStatus; } }

        public string CloseStatusDescription { get { lock (_gate) return _closeDescription; } }

        /// <summary>Cancelled when the connection ends (on the thread pool).</summary>
        public CancellationToken Closed
        {
            get
            {
                lock (_gate)
                {
                    if (_state == (int)EmberWebSocketState.Closed) return new CancellationToken(true);
                    if (_closedCts == null) _closedCts = new CancellationTokenSource();
                    return _closedCts.Token;
                }
            }
        }

        /// <summary>Bytes queued to send and not yet written (0 once closed).</summary>
        public long BufferedAmount
        {
            get
            {
                UIntPtr n;
                return NativeMethods.ember_ws_buffered(Id, out n) == NativeMethods.EMBER_OK ? (long)n.ToUInt64() : 0;
            }
        }

        // ---------------- receiving ----------------

        /// <summary>The next message, in order; a Close message once the connection ended (and on
        /// every call after). One ReceiveAsync at a time.</summary>
        public Task<EmberWebSocketMessage> ReceiveAsync()
        {
            return ReceiveAsync(CancellationToken.None);
        }

        public Task<EmberWebSocketMessage> ReceiveAsync(CancellationToken cancellationToken)
        {
            TaskCompletionSource<EmberWebSocketMessage> tcs;
            lock (_gate)
            {
                if (_receiver != null) throw new InvalidOperationException("a ReceiveAsync is already pending on this WebSocket");
                if (_inbox.Count > 0)
                {
                    EmberWebSocketMessage m = _inbox.Dequeue();
                    _inboxBytes -= m.Data.Length;
                    return Task.FromResult(m);
                }
                if (_state == (int)EmberWebSocketState.Closed) return Task.FromResult(EmberWebSocketMessage.Closed);
                if (cancellationToken.IsCancellationRequested) return CanceledMessage(cancellationToken);
                // No RunContinuationsAsynchronously: the session's code after this await runs
                // inside the engine's on_message, so what it sends for the message is queued
                // before the engine answers a close that came right behind it (the engine
                // holds its close reply until on_message returned).
                tcs = new TaskCompletionSource<EmberWebSocketMessage>();
                _receiver = tcs;
            }
            if (cancellationToken.CanBeCanceled)
            {
                CancellationTokenRegistration reg = cancellationToken.Register(() =>
                {
                    lock (_gate)
                    {
                        if (_receiver != tcs) return;   // a message got there first
                        _receiver = null;
                    }
                    tcs.TrySetCanceled(cancellationToken);
                });
                tcs.Task.ContinueWith(_ => reg.Dispose(), TaskContinuationOptions.ExecuteSynchronously);
            }
            return tcs.Task;
        }

        static Task<EmberWebSocketMessage> CanceledMessage(CancellationToken ct)
        {
            var t = new TaskCompletionSource<EmberWebSocketMessage>();
            t.SetCanceled();
            return t.Task;
        }

        /// <summary>From the engine (one connection's callbacks never overlap).</summary>
        internal void Deliver(int kind, byte[] data)
        {
            var m = new EmberWebSocketMessage((EmberWebSocketMessageType)kind, data);
            TaskCompletionSource<EmberWebSocketMessage> waiter;
            bool overflow = false;
            lock (_gate)
            {
                if (_state == (int)EmberWebSocketState.Closed || _overflowed) return;
                waiter = _receiver;
                _receiver = null;
                if (waiter == null)
                {
                    if (_inbox.Count > 0 && _inboxBytes + data.Length > _receiveLimit)
                    {
                        _overflowed = true;
                        overflow = true;
                    }
                    else
                    {
                        _inbox.Enqueue(m);
                        _inboxBytes += data.Length;
                    }
                }
            }
            if (waiter != null) waiter.TrySetResult(m);
            else if (overflow)
            {
                _owner.Owner.RaiseLog(EmberLogLevel.Warn, "WebSocket " + Request.Path + ": the session left more than " + _receiveLimit +
                    " bytes of messages unread; closing with 1008", null);
                Close(1008, "receive queue full");
            }
        }

        /// <summary>From the engine, exactly once: the connection ended.</summary>
        internal void Ended(int code, string reason)
        {
            TaskCompletionSource<EmberWebSocketMessage> waiter;
            TaskCompletionSource<bool> writable, ended;
            CancellationTokenSource cts;
            lock (_gate)
            {
                if (_state == (int)EmberWebSocketState.Closed) return;
                _state = (int)EmberWebSocketState.Closed;
                _closeStatus = code;
                _closeDescription = reason;
                waiter = _receiver;
                _receiver = null;
                writable = _writable;
                _writable = null;
                ended = _ended;
                cts = _closedCts;
            }
            if (waiter != null) waiter.TrySetResult(EmberWebSocketMessage.Closed);
            if (writable != null) writable.TrySetResult(true);
            if (ended != null) ended.TrySetResult(true);
            if (cts != null)
            {
                EmberServer server = _owner.Owner;
                ThreadPool.UnsafeQueueUserWorkItem(state =>
                {
                    try { ((CancellationTokenSource)state).Cancel(); }
                    catch (Exception ex) { server.RaiseLog(EmberLogLevel.Error, "a WebSocket Closed callback threw: " + ex.Message, ex); }
                }, cts);
            }
        }

        internal void WritableAgain()
        {
            TaskCompletionSource<bool> t;
            lock (_gate)
            {
                t = _writable;
                _writable = null;
            }
            if (t != null) t.TrySetResult(true);
        }

        // ---------------- sending ----------------

        /// <summary>Sends a text message.</summary>
        public Task SendAsync(string text, CancellationToken cancellationToken = default(CancellationToken))
        {
            if (text == null) throw new ArgumentNullException("text");
            byte[] b = Utf8.Encoding.GetBytes(text);
            return SendAsync(new ArraySegment<byte>(b), EmberWebSocketMessageType.Text, cancellationToken);
        }

        /// <summary>Sends a binary message.</summary>
        public Task SendAsync(byte[] data, CancellationToken cancellationToken = default(CancellationToken))
        {
            if (data == null) throw new ArgumentNullException("data");
            return SendAsync(new ArraySegment<byte>(data), EmberWebSocketMessageType.Binary, cancellationToken);
        }

        /// <summary>Sends <paramref name="data"/> as a message of <paramref name="type"/> (Text must be UTF-8).</summary>
        public Task SendAsync(byte[] data, EmberWebSocketMessageType type, CancellationToken cancellationToken = default(CancellationToken))
        {
            if (data == null) throw new ArgumentNullException("data");
            return SendAsync(new ArraySegment<byte>(data), type, cancellationToken);
        }

        public Task SendAsync(ArraySegment<byte> data, EmberWebSocketMessageType type, CancellationToken cancellationToken = default(CancellationToken))
        {
            CheckType(type);
            if (data.Array == null) throw new ArgumentNullException("data");
            int rc = RawSend(data, type);
            if (rc == NativeMethods.EMBER_OK) return s_done;
            if (rc == NativeMethods.EMBER_ERR_WOULD_BLOCK) return SendSlow(data, type, cancellationToken);
            var t = new TaskCompletionSource<bool>();
            t.SetException(SendFailure(rc));
            return t.Task;
        }

        async Task SendSlow(ArraySegment<byte> data, EmberWebSocketMessageType type, CancellationToken cancellationToken)
        {
            while (true)
            {
                Task writable = Writable();
                int rc = RawSend(data, type);   // after listening: a notice in between is not missed
                if (rc == NativeMethods.EMBER_OK) return;
                if (rc != NativeMethods.EMBER_ERR_WOULD_BLOCK) throw SendFailure(rc);
                await EmberResponseStream.Wait(writable, cancellationToken).ConfigureAwait(false);
            }
        }

        /// <summary>Sends without waiting: Ok, WouldBlock (the send queue is full, nothing was
        /// taken) or ClientGone (closed). For fan-out code that would rather skip a slow peer.</summary>
        public EmberResult TrySend(ArraySegment<byte> data, EmberWebSocketMessageType type)
        {
            CheckType(type);
            if (data.Array == null) throw new ArgumentNullException("data");
            int rc = RawSend(data, type);
            if (rc == NativeMethods.EMBER_ERR_INVALID_HANDLE) return EmberResult.ClientGone;
            if (rc == NativeMethods.EMBER_ERR_INVALID_ARG) throw new ArgumentException(Native.LastError(), "data");
            return (EmberResult)rc;
        }

        Task Writable()
        {
            lock (_gate)
            {
                if (_state == (int)EmberWebSocketState.Closed) return s_done;
                if (_writable == null) _writable = new TaskCompletionSource<bool>(TaskCreationOptions.RunContinuationsAsynchronously);
                return _writable.Task;
            }
        }

        unsafe int RawSend(ArraySegment<byte> data, EmberWebSocketMessageType type)
        {
            fixed (byte* p = data.Array)
                return NativeMethods.ember_ws_send(Id, (int)type, data.Count == 0 ? null : p + data.Offset, (UIntPtr)data.Count);
        }

        static void CheckType(EmberWebSocketMessageType type)
        {
            if (type != EmberWebSocketMessageType.Text && type != EmberWebSocketMessageType.Binary)
                throw new ArgumentOutOfRangeException("type", "send Text or Binary; close with CloseAsync");
        }

        Exception SendFailure(int rc)
        {
            switch (rc)
            {
                case NativeMethods.EMBER_ERR_CLIENT_GONE:
                case NativeMethods.EMBER_ERR_INVALID_HANDLE:
                    return new WebSocketException(WebSocketError.InvalidState, "the WebSocket is closed or closing");
                case NativeMethods.EMBER_ERR_INVALID_ARG:
                    return new ArgumentException(Native.LastError(), "data");
            }
            return Native.Error(rc, "ember_ws_send");
        }

        static readonly Task s_done = Task.FromResult(true);

        // ---------------- closing, groups ----------------

        /// <summary>
        /// Starts the closing handshake (messages already sent go first) and completes when the
        /// connection has ended (the peer answered, or after 5 s). Codes 1000-1003, 1007-1014,
        /// 3000-4999; the reason at most 123 UTF-8 bytes. On a closed connection it completes at once.
        /// </summary>
        public Task CloseAsync(int code = 1000, string reason = null)
        {
            if (code < 0 || code > 65535) throw new ArgumentOutOfRangeException("code");
            int rc = Close(code, reason);
            if (rc == NativeMethods.EMBER_ERR_INVALID_ARG) throw new ArgumentException(Native.LastError(), "code");
            lock (_gate)
            {
                if (_state == (int)EmberWebSocketState.Closed) return s_done;
                if (_ended == null) _ended = new TaskCompletionSource<bool>(TaskCreationOptions.RunContinuationsAsynchronously);
                return _ended.Task;
            }
        }

        unsafe internal int Close(int code, string reason)
        {
            byte[] r = reason == null ? null : Utf8.Encoding.GetBytes(reason);
            int rc;
            fixed (byte* p = r)
                rc = NativeMethods.ember_ws_close(Id, (ushort)code, p, (UIntPtr)(r == null ? 0 : r.Length));
            if (rc == NativeMethods.EMBER_OK)
                Interlocked.CompareExchange(ref _state, (int)EmberWebSocketState.CloseSent, (int)EmberWebSocketState.Open);
            return rc;
        }

        /// <summary>Adds the connection to a group (see <see cref="EmberServer.Broadcast(string, string, EmberWebSocket)"/>).
        /// Every connection is in the group named by its route pattern. No effect once closed.</summary>
        public void Join(string group)
        {
            if (group == null) throw new ArgumentNullException("group");
            int rc = NativeMethods.ember_ws_join(Id, Utf8.Z(group));
            if (rc != NativeMethods.EMBER_OK && rc != NativeMethods.EMBER_ERR_CLIENT_GONE && rc != NativeMethods.EMBER_ERR_INVALID_HANDLE)
                throw Native.Error(rc, "ember_ws_join");
        }

        /// <summary>Removes the connection from a group (no error if it was not in it).</summary>
        public void Leave(string group)
        {
            if (group == null) throw new ArgumentNullException("group");
            int rc = NativeMethods.ember_ws_leave(Id, Utf8.Z(group));
            if (rc != NativeMethods.EMBER_OK && rc != NativeMethods.EMBER_ERR_CLIENT_GONE && rc != NativeMethods.EMBER_ERR_INVALID_HANDLE)
                throw Native.Error(rc, "ember_ws_leave");
        }
    }
}
