using System;
using System.Collections.Generic;
using System.Threading;
using System.Threading.Tasks;
using Ember.Interop;

namespace Ember
{
    /// <summary>A registered route (managed side; survives start/stop cycles).</summary>
    internal sealed class RouteEntry
    {
        internal string Method;     // null = any
        internal string Pattern;
        internal Action<EmberContext> Sync;
        internal Func<EmberContext, Task> Async;
        internal RawHandler Raw;    // adapters (System.Web, OWIN): they answer by themselves
        internal bool StreamBody;   // EMBER_ROUTE_STREAM_BODY
        internal bool Pool;         // EMBER_ROUTE_POOL (MapPooled)
        internal WebSocketRoute WebSocket;   // a WebSocket endpoint instead of a handler
    }

    /// <summary>An adapter's handler: the request token and the engine's ember_request_info*,
    /// valid until the request is answered. It must answer (now or later), and never throw
    /// for an ordinary failure: an exception answers 500.</summary>
    internal delegate void RawHandler(ulong req, IntPtr info);

    /// <summary>
    /// One native server from Start to free. It owns the three delegates handed to the engine
    /// (handler, release, log) and stays rooted in <see cref="s_live"/> until the native server
    /// was freed AND every route's release callback has come, so no callback can ever reach a
    /// collected delegate. user_data of a route is its index in <see cref="Routes"/>.
    /// </summary>
    internal sealed unsafe partial class NativeInstance
    {
        static readonly object s_lock = new object();
        static readonly HashSet<NativeInstance> s_live = new HashSet<NativeInstance>();

        [ThreadStatic] internal static NativeInstance t_inHandler;

        internal readonly EmberServer Owner;
        internal readonly RouteEntry[] Routes;
        internal readonly EmberServerHandle Handle;
        internal readonly EmberHandlerFn HandlerThunk;
        internal readonly EmberReleaseFn ReleaseThunk;
        internal readonly EmberLogFn LogThunk;
        readonly int[] _registered;   // 1 = engine holds user_data i
        int _pendingReleases;
        int _freed;

        internal NativeInstance(EmberServer owner, RouteEntry[] routes, EmberServerHandle handle)
        {
            Owner = owner;
            Routes = routes;
            Handle = handle;
            _registered = new int[routes.Length];
            HandlerThunk = OnRequest;
            ReleaseThunk = OnRelease;
            LogThunk = OnLog;
            lock (s_lock) s_live.Add(this);
        }

        internal static int LiveCount { get { lock (s_lock) return s_live.Count; } }

        internal static NativeInstance[] Snapshot()
        {
            lock (s_lock)
            {
                var a = new NativeInstance[s_live.Count];
                s_live.CopyTo(a);
                return a;
            }
        }

        internal void Register(int i)
        {
            RouteEntry r = Routes[i];
            Interlocked.Increment(ref _pendingReleases);
            Volatile.Write(ref _registered[i], 1);
            int rc;
            if (r.WebSocket != null)
            {
                var handlers = WsHandlers();
                rc = NativeMethods.ember_server_websocket(Handle, Utf8.Z(r.Pattern), ref handlers, new IntPtr(i), ReleaseThunk);
            }
            else if (r.StreamBody || r.Raw != null || r.Pool)
            {
                // Adapters (System.Web, OWIN) may block on their own streamed answer (a flush
                // waits for room the connection's I/O thread must make): under Auto dispatch
                // they always get a pool thread.
                uint flags = (r.StreamBody ? NativeMethods.EMBER_ROUTE_STREAM_BODY : 0u)
                    | (r.Raw != null || r.Pool ? NativeMethods.EMBER_ROUTE_POOL : 0u);
                rc = NativeMethods.ember_server_route_flags(Handle, Utf8.Z(r.Method), Utf8.Z(r.Pattern),
                    flags, HandlerThunk, new IntPtr(i), ReleaseThunk);
            }
            else
                rc = NativeMethods.ember_server_route(Handle, Utf8.Z(r.Method), Utf8.Z(r.Pattern),
                    HandlerThunk, new IntPtr(i), ReleaseThunk);
            if (rc != NativeMethods.EMBER_OK)
            {
                var err = Native.Error(rc, "ember_server_route(" + (r.Method ?? "*") + " " + r.Pattern + ")");
                // On failure the engine took nothing.
                Volatile.Write(ref _registered[i], 0);
                Interlocked.Decrement(ref _pendingReleases);
                throw err;
            }
        }

        // ---------------- callbacks from the engine (must never throw) ----------------

        void OnRequest(IntPtr userData, ulong req, IntPtr info)
        {
            EmberContext ctx = null;
            NativeInstance outer = t_inHandler;
            t_inHandler = this;
            EngineThread et = ThreadHooks.Current;
            if (et != null) Interlocked.Increment(ref et.Depth);
            try
            {
                if (ShutdownHook.ProcessExiting)
                {
                    // The runtime is going away: no user code any more.
                    NativeMethods.ember_request_respond(req, 503, null, UIntPtr.Zero, null, UIntPtr.Zero);
                    return;
                }
                RouteEntry route = Routes[userData.ToInt32()];
                if (route.Raw != null)
                {
                    try { route.Raw(req, info); }
                    catch (ThreadAbortException) { throw; }
                    catch (Exception ex)
                    {
                        Owner.RaiseError(ex, null, null);
                        NativeMethods.ember_request_respond(req, 500, null, UIntPtr.Zero, null, UIntPtr.Zero);
                    }
                    return;
                }
                ctx = new EmberContext(Owner, new EmberRequest((EmberRequestInfo*)info, route.Pattern));
                Action<EmberContext> sync = route.Sync;
                if (sync != null)
                {
                    try { sync(ctx); }
                    catch (Exception ex) { ctx.Fail(ex); return; }
                    ctx.Finish();
                    return;
                }
                // Async: copy the request out of engine memory first; after the handler's first
                // await the engine's views may be gone (e.g. the handler timeout answered 503).
                ctx.Request.Materialize();
                Task t;
                s_asyncOwner.Value = this;   // flows into the handler's continuations
                try { t = route.Async(ctx); }
                catch (Exception ex) { ctx.Fail(ex); return; }
                finally { s_asyncOwner.Value = null; }
                if (t == null) { ctx.Finish(); return; }
                if (t.IsCompleted) { Complete(t, ctx); return; }
                t.ContinueWith(s_complete, ctx, CancellationToken.None,
                    TaskContinuationOptions.ExecuteSynchronously, TaskScheduler.Default);
            }
            catch (ThreadAbortException)
            {
                // Process exit aborted a handler that did not return in time (ShutdownHook):
                // the abort must end here, never unwind into the engine.
                try { Thread.ResetAbort(); } catch { }
                try { NativeMethods.ember_request_respond(req, 503, null, UIntPtr.Zero, null, UIntPtr.Zero); } catch { }
            }
            catch (Exception ex)
            {
                // Binding bug or out of memory: still answer, never unwind into native code.
                try
                {
                    if (ctx != null) ctx.Fail(ex);
                    else NativeMethods.ember_request_respond(req, 500, null, UIntPtr.Zero, null, UIntPtr.Zero);
                }
                catch { }
            }
            finally
            {
                if (et != null) Interlocked.Decrement(ref et.Depth);
                t_inHandler = outer;
            }
        }

        static readonly Action<Task, object> s_complete = (t, state) => Complete(t, (EmberContext)state);

        static void Complete(Task t, EmberContext ctx)
        {
            try
            {
                if (t.IsFaulted)
                {
                    Exception ex = t.Exception;
                    if (t.Exception.InnerExceptions.Count == 1) ex = t.Exception.InnerExceptions[0];
                    ctx.Fail(ex);
                }
                else if (t.IsCanceled) ctx.Fail(new TaskCanceledException(t));
                else ctx.Finish();
            }
            catch (Exception ex)
            {
                try { ctx.Server.RaiseError(ex, null, null); } catch { }
            }
        }

        void OnRelease(IntPtr userData)
        {
            try
            {
                long i = userData.ToInt64();
                if (i < 0 || i >= _registered.Length) return;
                if (Interlocked.Exchange(ref _registered[i], 0) == 0) return;   // exactly once
                if (Interlocked.Decrement(ref _pendingReleases) == 0 && Volatile.Read(ref _freed) != 0) Unroot();
            }
            catch { }
        }

        void OnLog(IntPtr userData, int level, IntPtr msg, UIntPtr len)
        {
            try
            {
                if (ShutdownHook.ProcessExiting) return;   // no user code while the runtime goes away
                string text = Utf8.FromView(new EmberStr { Ptr = (byte*)msg, Len = len });
                Owner.RaiseLog((EmberLogLevel)level, text, null);
            }
            catch { }
        }

        // ---------------- shutdown ----------------

        internal bool IsCurrentHandlerThread { get { return t_inHandler == this; } }

        /// <summary>Set while an async handler of this server runs, including after its awaits.</summary>
        static readonly AsyncLocal<NativeInstance> s_asyncOwner = new AsyncLocal<NativeInstance>();

        internal bool IsCurrentAsyncHandler { get { return s_asyncOwner.Value == this; } }

        /// <summary>Graceful stop + free, blocking. Not from inside this server's handler.</summary>
        internal void StopAndFree(uint timeoutMs)
        {
            try
            {
                if (!Handle.IsClosed)
                {
                    int rc = NativeMethods.ember_server_stop(Handle, timeoutMs);
                    if (rc != NativeMethods.EMBER_OK) Owner.RaiseLog(EmberLogLevel.Warn, Native.Error(rc, "ember_server_stop").Message, null);
                }
            }
            catch (ObjectDisposedException) { }
            Free();
        }

        /// <summary>From inside a handler: start the stop now, free on another thread once it is done.</summary>
        internal void StopFromHandler(uint timeoutMs)
        {
            NativeMethods.ember_server_stop(Handle, timeoutMs);
            if (ShutdownHook.ProcessExiting) return;   // nobody may wait now; the process ends anyway
            ThreadPool.QueueUserWorkItem(_ =>
            {
                try
                {
                    // Bounded slices, so a process exit never finds a pool thread stuck in here.
                    while (NativeMethods.ember_server_wait(Handle, 200) != NativeMethods.EMBER_OK)
                    {
                        if (ShutdownHook.ProcessExiting || Handle.IsClosed) return;
                    }
                }
                catch (ObjectDisposedException) { }
                Free();
            });
        }

        /// <summary>Process exit on one of this server's own handler threads (Environment.Exit
        /// in a handler): start the stop; the free is impossible here and the process ends.</summary>
        internal void StopForExitFromHandler()
        {
            try { NativeMethods.ember_server_stop(Handle, 0); } catch (ObjectDisposedException) { }
        }

        internal void Free()
        {
            if (Interlocked.Exchange(ref _freed, 1) != 0) return;
            Handle.Dispose();   // ember_server_free: afterwards no callback runs, releases are done
            if (Volatile.Read(ref _pendingReleases) == 0) Unroot();
            else Owner.RaiseLog(EmberLogLevel.Warn,
                "engine freed the server but " + _pendingReleases + " route release callback(s) did not come; keeping their delegates alive", null);
        }

        void Unroot()
        {
            lock (s_lock) s_live.Remove(this);
        }
    }
}
