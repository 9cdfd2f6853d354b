using System;
using System.Collections.Generic;
using System.Threading;
using Ember.Interop;

namespace Ember
{
    /// <summary>One request and its answer. Answered exactly once: automatically when the
    /// handler returns (sync) or its Task completes (async), or earlier by <see cref="Respond"/>.</summary>
    public sealed class EmberContext : IRequestOwner
    {
        readonly EmberServer _server;
        readonly EmberRequest _request;
        readonly EmberResponse _response;
        int _answered;   // 0 = not yet, 1 = sent, being sent, or streaming
        IDictionary<object, object> _items;
        EmberResponseStream _stream;
        RequestEvents _events;
        volatile bool _endedByEngine;

        static readonly object s_registerLock = new object();

        internal EmberContext(EmberServer server, EmberRequest request)
        {
            _server = server;
            _request = request;
            _response = new EmberResponse(this);
            request.Context = this;
        }

        public EmberRequest Request { get { return _request; } }
        public EmberResponse Response { get { return _response; } }
        public EmberServer Server { get { return _server; } }

        /// <summary>Per-request state for your own code.</summary>
        public IDictionary<object, object> Items
        {
            get { return _items ?? (_items = new Dictionary<object, object>()); }
        }

        /// <summary>
        /// Cancelled when the client leaves, the handler timeout answers for the handler, or the
        /// server stops, before the answer is complete (also while a streamed answer is being
        /// written). The first read registers for the engine's notice (a plain request that never
        /// reads it pays nothing); cancellation callbacks run on the thread pool.
        /// </summary>
        public CancellationToken RequestAborted { get { return Events.Aborted; } }

        /// <summary>The request's engine events, registered at first use.</summary>
        RequestEvents IRequestOwner.Events { get { return Events; } }

        internal RequestEvents Events
        {
            get
            {
                RequestEvents e = Volatile.Read(ref _events);
                if (e != null) return e;
                lock (s_registerLock)
                {
                    if (_events == null) _events = RequestEvents.Register(_request.Id, _server);
                    return _events;
                }
            }
        }

        /// <summary>The client left or the engine answered for the handler (timeout, 413, 408):
        /// what the handler throws because of it is not its fault.</summary>
        internal void MarkEndedByEngine() { _endedByEngine = true; }

        void IRequestOwner.MarkEndedByEngine() { _endedByEngine = true; }

        /// <summary>The streamed answer ended or was cut: the request's views are gone.</summary>
        internal void StreamEnded() { _request.Close(); }

        /// <summary>Starts a streamed answer with the response's status and headers so far.</summary>
        internal EmberResponseStream StartStream()
        {
            if (Interlocked.Exchange(ref _answered, 1) != 0)
                throw new InvalidOperationException("the response was already sent (or its stream started)");
            int rc = Wire.Begin(_request.Id, _response);
            if (rc == NativeMethods.EMBER_OK)
            {
                var s = new EmberResponseStream(this, _request.Id);
                Volatile.Write(ref _stream, s);
                return s;
            }
            var result = (EmberResult)rc;
            if (result == EmberResult.InvalidArg)
            {
                // The engine refused the head and took nothing: the request still waits.
                var err = Native.Error(rc, "ember_response_begin");
                var r = new EmberResponse();
                r.Text("Internal Server Error", 500);
                Wire.Send(_request.Id, r);
                _request.Close();
                throw err;
            }
            _request.Close();
            if (result == EmberResult.TimedOut || result == EmberResult.ClientGone || result == EmberResult.InvalidHandle)
            {
                MarkEndedByEngine();
                throw new EmberStreamException(result == EmberResult.InvalidHandle ? EmberResult.ClientGone : result,
                    "the streamed answer cannot start: " + (result == EmberResult.TimedOut ? "the handler timeout answered" : "the client left or the server stopped"));
            }
            throw Native.Error(rc, "ember_response_begin");
        }

        /// <summary>The streamed answer, if one was started.</summary>
        internal EmberResponseStream Stream { get { return Volatile.Read(ref _stream); } }

        /// <summary>True once the answer was handed to the engine.</summary>
        public bool HasResponded { get { return Volatile.Read(ref _answered) != 0; } }

        /// <summary>
        /// Sends the response now, from any thread. Later changes to <see cref="Response"/> are
        /// ignored and the automatic answer is skipped. Returns the engine's result:
        /// <see cref="EmberResult.Ok"/>, or e.g. TimedOut / ClientGone when the engine had already
        /// answered (handler timeout) or the client left; AlreadyAnswered if called twice.
        /// </summary>
        public EmberResult Respond()
        {
            if (Interlocked.Exchange(ref _answered, 1) != 0) return EmberResult.AlreadyAnswered;
            return Send();
        }

        /// <summary>Answer if nobody did yet (end of a handler).</summary>
        internal void Finish()
        {
            EmberResponseStream stream = Volatile.Read(ref _stream);
            if (stream != null)
            {
                stream.End();
                return;
            }
            if (Interlocked.Exchange(ref _answered, 1) != 0) return;
            Send();
        }

        /// <summary>A handler threw: report it, answer 500 unless already answered.</summary>
        internal void Fail(Exception ex)
        {
            string method = null, path = null;
            try { method = _request.Method; path = _request.Path; }
            catch (InvalidOperationException) { }
            if (EndedByEngine(ex))
                _server.RaiseLog(EmberLogLevel.Debug, "handler ended early (" + method + " " + path + "): " + ex.Message, ex);
            else _server.RaiseError(ex, method, path);
            EmberResponseStream stream = Volatile.Read(ref _stream);
            if (stream != null)
            {
                // Half an answer must not look whole to the client.
                stream.Abort();
                return;
            }
            if (Interlocked.Exchange(ref _answered, 1) != 0) return;
            _response.Reset();
            _response.Text("Internal Server Error", 500);
            Send();
        }

        /// <summary>The exception is the consequence of the client leaving or of the engine
        /// answering for the handler, not a fault of the handler.</summary>
        bool EndedByEngine(Exception ex)
        {
            return RequestEvents.EndedByEngine(ex, _endedByEngine, Volatile.Read(ref _events));
        }

        EmberResult Send()
        {
            int rc;
            try
            {
                rc = Wire.Send(_request.Id, _response);
            }
            finally
            {
                _request.Close();
            }
            if (rc == NativeMethods.EMBER_OK) return EmberResult.Ok;
            var result = (EmberResult)rc;
            switch (result)
            {
                case EmberResult.TimedOut:
                case EmberResult.ClientGone:
                case EmberResult.AlreadyAnswered:
                case EmberResult.InvalidHandle:
                case EmberResult.TooLarge:
                    // The engine answered already (handler timeout / stop, 413 / 408 / 400 for a
                    // streamed body) or the client left.
                    _server.RaiseLog(EmberLogLevel.Debug, "answer not sent: " + Native.ResultName(rc), null);
                    return result;
            }
            // Rejected (e.g. a header the engine refused): tell, then answer 500 plainly.
            var err = Native.Error(rc, "ember_request_respond");
            _server.RaiseError(err, null, null);
            if (result == EmberResult.InvalidArg)
            {
                var r = new EmberResponse();
                r.Text("Internal Server Error", 500);
                Wire.Send(_request.Id, r);
            }
            return result;
        }
    }
}
