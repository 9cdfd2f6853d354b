using System;
using System.Collections.Concurrent;
using System.Runtime.InteropServices;
using System.Threading;
using System.Threading.Tasks;
using Ember.Interop;

namespace Ember
{
    /// <summary>
    /// The WebSocket callbacks of one native server. Their delegates are fields of this instance,
    /// which stays rooted until every route's release callback came (WebSocket endpoints are
    /// routes with user_data = their index, like handlers), so the engine never calls a collected
    /// delegate. Open connections are found by handle in <see cref="_sockets"/>; a callback for a
    /// handle that is not there is ignored.
    /// </summary>
    internal sealed unsafe partial class NativeInstance
    {
        EmberWsOpenFn _wsOpen;
        EmberWsMessageFn _wsMessage;
        EmberWsCloseFn _wsClose;
        EmberWsWritableFn _wsWritable;
        readonly ConcurrentDictionary<ulong, EmberWebSocket> _sockets = new ConcurrentDictionary<ulong, EmberWebSocket>();

        /// <summary>Open WebSocket connections (tests).</summary>
        internal int SocketCount { get { return _sockets.Count; } }

        EmberWsHandlers WsHandlers()
        {
            if (_wsOpen == null)
            {
                _wsOpen = OnWsOpen;
                _wsMessage = OnWsMessage;
                _wsClose = OnWsClose;
                _wsWritable = OnWsWritable;
            }
            return new EmberWsHandlers
            {
                Size = (UIntPtr)Marshal.SizeOf(typeof(EmberWsHandlers)),
                OnOpen = Marshal.GetFunctionPointerForDelegate(_wsOpen),
                OnMessage = Marshal.GetFunctionPointerForDelegate(_wsMessage),
                OnClose = Marshal.GetFunctionPointerForDelegate(_wsClose),
                OnWritable = Marshal.GetFunctionPointerForDelegate(_wsWritable),
            };
        }

        void OnWsOpen(IntPtr userData, ulong ws, IntPtr infoPtr)
        {
            var info = (EmberRequestInfo*)infoPtr;
            ulong req = info->Id;
            NativeInstance outer = t_inHandler;
            t_inHandler = this;
            try
            {
                ThreadHooks.NoteCallback();
                if (ShutdownHook.ProcessExiting)
                {
                    NativeMethods.ember_request_respond(req, 503, null, UIntPtr.Zero, null, UIntPtr.Zero);
                    return;
                }
                RouteEntry route = Routes[userData.ToInt32()];
                var request = new EmberRequest(info, route.Pattern);
                var upgrade = new EmberWebSocketUpgrade(request);
                Action<EmberWebSocketUpgrade> check = route.WebSocket.OnUpgrade;
                if (check != null)
                {
                    try { check(upgrade); }
                    catch (Exception ex)
                    {
                        Owner.RaiseError(ex, "GET", SafePath(request));
                        upgrade.Reject(500, "Internal Server Error");
                    }
                }
                if (upgrade.RejectStatus != 0)
                {
                    var r = new EmberResponse();
                    r.Text(upgrade.RejectText ?? string.Empty, upgrade.RejectStatus);
                    Wire.Send(req, r);
                    return;
                }
                // The session outlives the upgrade request's memory: copy it now.
                request.Materialize();
                var socket = new EmberWebSocket(this, ws, request, upgrade.SubProtocol, Owner.Options.WebSocketReceiveQueueBytes);
                if (upgrade.ItemsOrNull != null) socket.Items = upgrade.ItemsOrNull;
                _sockets[ws] = socket;
                byte[] headers = Utf8.Encoding.GetBytes(upgrade.HeaderBlock());
                int rc;
                fixed (byte* h = headers) rc = NativeMethods.ember_ws_accept(ws, h, (UIntPtr)headers.Length);
                if (rc != NativeMethods.EMBER_OK)
                {
                    // The client left or the handler timeout answered: no connection, no session.
                    EmberWebSocket gone;
                    _sockets.TryRemove(ws, out gone);
                    if (rc == NativeMethods.EMBER_ERR_INVALID_ARG)
                    {
                        Owner.RaiseError(Native.Error(rc, "ember_ws_accept"), "GET", request.Path);
                        NativeMethods.ember_request_respond(req, 500, null, UIntPtr.Zero, null, UIntPtr.Zero);
                    }
                    return;
                }
                // The session starts here, on the engine's thread, up to its first await (like a
                // handler; its messages are delivered once this callback returns): a session
                // started on the thread pool could still be starting when a message and a
                // close arrive, and the engine would answer the close before the echo.
                Func<EmberWebSocket, Task> session = route.WebSocket.Session;
                Task run;
                try { run = session(socket) ?? s_noSession; }
                catch (ThreadAbortException) { throw; }
                catch (Exception ex)
                {
                    var failed = new TaskCompletionSource<bool>();
                    failed.SetException(ex);
                    run = failed.Task;
                }
                run.ContinueWith(s_sessionDone, socket, CancellationToken.None,
                    TaskContinuationOptions.ExecuteSynchronously, TaskScheduler.Default);
            }
            catch (ThreadAbortException)
            {
                try { Thread.ResetAbort(); } catch { }
                try { NativeMethods.ember_request_respond(req, 503, null, UIntPtr.Zero, null, UIntPtr.Zero); } catch { }
            }
            catch (Exception ex)
            {
                try
                {
                    Owner.RaiseError(ex, "GET", null);
                    NativeMethods.ember_request_respond(req, 500, null, UIntPtr.Zero, null, UIntPtr.Zero);
                }
                catch { }
            }
            finally
            {
                t_inHandler = outer;
            }
        }

        static string SafePath(EmberRequest r)
        {
            try { return r.Path; } catch { return null; }
        }

        static readonly Task s_noSession = Task.FromResult(0);

        static readonly Action<Task, object> s_sessionDone = (t, state) =>
        {
            var socket = (EmberWebSocket)state;
            try
            {
                if (t.IsFaulted || t.IsCanceled)
                {
                    Exception ex = t.IsFaulted ? (t.Exception.InnerExceptions.Count == 1 ? t.Exception.InnerExceptions[0] : t.Exception)
                                               : new TaskCanceledException(t);
                    bool peerGone = socket.State == EmberWebSocketState.Closed &&
                        (ex is System.Net.WebSockets.WebSocketException || ex is OperationCanceledException);
                    if (peerGone) socket.Server.RaiseLog(EmberLogLevel.Debug, "WebSocket session ended with the connection: " + ex.Message, ex);
                    else socket.Server.RaiseError(ex, "GET", socket.Request.Path);
                    socket.Close(1011, "internal error");
                }
                else socket.Close(1000, null);
            }
            catch (Exception ex)
            {
                try { socket.Server.RaiseLog(EmberLogLevel.Error, "closing a WebSocket failed: " + ex.Message, ex); } catch { }
            }
        };

        void OnWsMessage(IntPtr userData, ulong ws, int kind, IntPtr data, UIntPtr len)
        {
            try
            {
                ThreadHooks.NoteCallback();
                EmberWebSocket socket;
                if (!_sockets.TryGetValue(ws, out socket)) return;
                int n = checked((int)len.ToUInt64());
                var copy = new byte[n];
                if (n > 0) Marshal.Copy(data, copy, 0, n);
                socket.Deliver(kind, copy);
            }
            catch (Exception ex)
            {
                // Out of memory or a binding bug: the connection cannot be served correctly.
                try
                {
                    Owner.RaiseLog(EmberLogLevel.Error, "WebSocket message dropped: " + ex.Message, ex);
                    NativeMethods.ember_ws_close(ws, 1011, null, UIntPtr.Zero);
                }
                catch { }
            }
        }

        void OnWsClose(IntPtr userData, ulong ws, ushort code, IntPtr reason, UIntPtr len)
        {
            try
            {
                ThreadHooks.NoteCallback();
                EmberWebSocket socket;
                if (!_sockets.TryRemove(ws, out socket)) return;
                string text = Utf8.FromView(new EmberStr { Ptr = (byte*)reason, Len = len });
                socket.Ended(code, text);
            }
            catch { }
        }

        void OnWsWritable(IntPtr userData, ulong ws)
        {
            try
            {
                ThreadHooks.NoteCallback();
                EmberWebSocket socket;
                if (_sockets.TryGetValue(ws, out socket)) socket.WritableAgain();
            }
            catch { }
        }

        /// <summary>ember_server_ws_broadcast; 0 when the server is not running.</summary>
        internal int Broadcast(string group, ArraySegment<byte> data, EmberWebSocketMessageType type, ulong except)
        {
            UIntPtr sent;
            int rc;
            try
            {
                fixed (byte* p = data.Array)
                    rc = NativeMethods.ember_server_ws_broadcast(Handle, Utf8.Z(group), (int)type,
                        data.Count == 0 ? null : p + data.Offset, (UIntPtr)data.Count, except, out sent);
            }
            catch (ObjectDisposedException) { return 0; }
            if (rc == NativeMethods.EMBER_ERR_STATE) return 0;
            if (rc == NativeMethods.EMBER_ERR_INVALID_ARG) throw new ArgumentException(Native.LastError());
            if (rc != NativeMethods.EMBER_OK) throw Native.Error(rc, "ember_server_ws_broadcast");
            return (int)sent.ToUInt64();
        }
    }
}
