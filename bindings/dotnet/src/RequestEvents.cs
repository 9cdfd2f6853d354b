using System;
using System.Collections.Concurrent;
using System.Runtime.InteropServices;
using System.Threading;
using System.Threading.Tasks;
using Ember.Interop;

namespace Ember
{
    /// <summary>
    /// One request's engine events (writable, readable, and the final aborted / completed),
    /// registered with ember_request_on_event only when something needs them: RequestAborted,
    /// or a streamed write or read that found its queue full or empty. A plain request never
    /// pays for it.
    ///
    /// The engine gets one static callback and a small integer key (never a pointer or a
    /// GCHandle): a late or repeated event finds no entry and is ignored, so nothing the engine
    /// does can reach freed memory. The entry goes at the final event.
    /// Waiters are completed with RunContinuationsAsynchronously and cancellation runs on the
    /// thread pool, so no user code ever runs on an engine thread from here.
    /// </summary>
    internal sealed class RequestEvents
    {
        // Static: lives as long as the AppDomain, so the engine can always call it.
        static readonly EmberEventFn s_fn = OnEvent;
        static readonly IntPtr s_fnPtr = Marshal.GetFunctionPointerForDelegate(s_fn);
        static readonly ConcurrentDictionary<int, RequestEvents> s_live = new ConcurrentDictionary<int, RequestEvents>();
        static int s_next;

        readonly ulong _req;
        readonly EmberServer _server;
        readonly object _gate = new object();
        int _final;   // 0, EMBER_EVENT_ABORTED or EMBER_EVENT_COMPLETED
        int _endCode; // why registering found the request ended (0 if it did not)
        TaskCompletionSource<bool> _writable, _readable;
        CancellationTokenSource _aborted;

        RequestEvents(ulong req, EmberServer server)
        {
            _req = req;
            _server = server;
        }

        /// <summary>Live registrations (tests: they must all go away).</summary>
        internal static int LiveCount { get { return s_live.Count; } }

        /// <summary>Registers for the request's events. When the request already ended, the
        /// returned object is final at once (aborted for a timeout or a departed client).</summary>
        internal static RequestEvents Register(ulong req, EmberServer server)
        {
            var ev = new RequestEvents(req, server);
            int key;
            do { key = Interlocked.Increment(ref s_next); } while (key == 0 || !s_live.TryAdd(key, ev));
            int rc = NativeMethods.ember_request_on_event(req, s_fnPtr, new IntPtr(key));
            if (rc != NativeMethods.EMBER_OK)
            {
                RequestEvents gone;
                s_live.TryRemove(key, out gone);
                ev._endCode = rc;
                // Answered normally (or already streamed to the end): nothing to cancel.
                ev.End(rc == NativeMethods.EMBER_ERR_ALREADY_ANSWERED ? NativeMethods.EMBER_EVENT_COMPLETED : NativeMethods.EMBER_EVENT_ABORTED);
            }
            return ev;
        }

        /// <summary>True once the engine said the client left, the handler timeout answered, or
        /// the server stopped.</summary>
        internal bool IsAborted { get { return Volatile.Read(ref _final) == NativeMethods.EMBER_EVENT_ABORTED; } }

        /// <summary>Whether a handler's exception is the consequence of the client leaving or
        /// of the engine answering for the handler (timeout), not a fault of the handler.
        /// <paramref name="endedByEngine"/>: the caller saw the engine end the request;
        /// <paramref name="events"/>: the request's events, if any were asked for.</summary>
        internal static bool EndedByEngine(Exception ex, bool endedByEngine, RequestEvents events)
        {
            var se = ex as EmberStreamException;
            if (se != null) return se.EndedByEngine;
            if (ex is OperationCanceledException)
                return endedByEngine || (events != null && events.IsAborted);
            return false;
        }

        internal bool IsEnded { get { return Volatile.Read(ref _final) != 0; } }

        /// <summary>The result code registering returned when the request had already ended.</summary>
        internal int EndCode { get { return _endCode; } }

        /// <summary>Cancelled when the request is aborted.</summary>
        internal CancellationToken Aborted
        {
            get
            {
                lock (_gate)
                {
                    if (_final == NativeMethods.EMBER_EVENT_ABORTED) return new CancellationToken(true);
                    if (_final != 0) return CancellationToken.None;
                    if (_aborted == null) _aborted = new CancellationTokenSource();
                    return _aborted.Token;
                }
            }
        }

        /// <summary>Completes at the next writable notice or the end. Take it BEFORE retrying
        /// the refused write: a notice that comes in between then still completes it.</summary>
        internal Task Writable() { return Waiter(ref _writable); }

        /// <summary>Completes at the next readable notice or the end (same rule).</summary>
        internal Task Readable() { return Waiter(ref _readable); }

        Task Waiter(ref TaskCompletionSource<bool> slot)
        {
            lock (_gate)
            {
                if (_final != 0) return s_done;
                if (slot == null) slot = new TaskCompletionSource<bool>(TaskCreationOptions.RunContinuationsAsynchronously);
                return slot.Task;
            }
        }

        static readonly Task s_done = Task.FromResult(true);

        static void OnEvent(IntPtr userData, ulong req, int evt)
        {
            try
            {
                ThreadHooks.NoteCallback();
                RequestEvents ev;
                int key = userData.ToInt32();
                if (!s_live.TryGetValue(key, out ev) || ev._req != req) return;
                switch (evt)
                {
                    case NativeMethods.EMBER_EVENT_WRITABLE: ev.Wake(ref ev._writable); break;
                    case NativeMethods.EMBER_EVENT_READABLE: ev.Wake(ref ev._readable); break;
                    case NativeMethods.EMBER_EVENT_ABORTED:
                    case NativeMethods.EMBER_EVENT_COMPLETED:
                        RequestEvents gone;
                        s_live.TryRemove(key, out gone);
                        ev.End(evt);
                        break;
                }
            }
            catch
            {
                // never let an exception cross into native code
            }
        }

        void Wake(ref TaskCompletionSource<bool> slot)
        {
            TaskCompletionSource<bool> t;
            lock (_gate)
            {
                t = slot;
                slot = null;
            }
            if (t != null) t.TrySetResult(true);
        }

        void End(int evt)
        {
            TaskCompletionSource<bool> w, r;
            CancellationTokenSource cts;
            lock (_gate)
            {
                if (_final != 0) return;
                _final = evt;
                w = _writable; r = _readable; cts = _aborted;
                _writable = null; _readable = null;
            }
            // Waiters retry their call and read the engine's reason from it.
            if (w != null) w.TrySetResult(true);
            if (r != null) r.TrySetResult(true);
            if (cts != null && evt == NativeMethods.EMBER_EVENT_ABORTED)
            {
                // Token callbacks are user code: never on an engine thread, never unguarded.
                EmberServer server = _server;
                ThreadPool.UnsafeQueueUserWorkItem(state =>
                {
                    try { ((CancellationTokenSource)state).Cancel(); }
                    catch (Exception ex)
                    {
                        if (server != null) server.RaiseLog(EmberLogLevel.Error, "a RequestAborted callback threw: " + ex.Message, ex);
                    }
                }, cts);
            }
        }
    }
}
