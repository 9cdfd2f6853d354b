using System;
using System.Collections.Generic;
using System.Threading;
using Ember.Interop;

namespace Ember
{
    /// <summary>One request and its answer. Answered exactly once: automatically when the
    /// handler returns (sync) or its Task completes (async), or earlier by <see cref="Respond"/>.</summary>
    public sealed class EmberContext
    {
        readonly EmberServer _server;
        readonly EmberRequest _request;
        readonly EmberResponse _response = new EmberResponse();
        int _answered;   // 0 = not yet, 1 = sent (or being sent)
        IDictionary<object, object> _items;

        internal EmberContext(EmberServer server, EmberRequest request)
        {
            _server = server;
            _request = request;
        }

        public EmberRequest Request { get { return _request; } }
        public EmberResponse Response { get { return _response; } }
        public EmberServer Server { get { return _server; } }

        /// <summary>Per-request state for your own code.</summary>
        public IDictionary<object, object> Items
        {
            get { return _items ?? (_items = new Dictionary<object, object>()); }
        }

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
            if (Interlocked.Exchange(ref _answered, 1) != 0) return;
            Send();
        }

        /// <summary>A handler threw: report it, answer 500 unless already answered.</summary>
        internal void Fail(Exception ex)
        {
            string method = null, path = null;
            try { method = _request.Method; path = _request.Path; }
            catch (InvalidOperationException) { }
            _server.RaiseError(ex, method, path);
            if (Interlocked.Exchange(ref _answered, 1) != 0) return;
            _response.Reset();
            _response.Text("Internal Server Error", 500);
            Send();
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
                    // The engine answered already (handler timeout / stop) or the client left.
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
