using System;
using System.Collections.Generic;
using System.Threading;
using Ember.Interop;

namespace Ember
{
    /// <summary>
    /// A response made once and answered with many times: its status, headers and body are
    /// checked and copied into the engine when it is made (<c>ember_answer_new</c>), and each
    /// answer is then one short engine call with nothing to encode, copy or parse
    /// (<c>ember_request_respond_answer</c>; the body is shared, not copied).
    /// <code>
    /// static readonly EmberAnswer Hello = new EmberAnswer(200, "application/json", Encoding.UTF8.GetBytes("{\"hello\": 1}"));
    /// server.MapGet("/", ctx => ctx.Response.Answer(Hello));
    /// </code>
    /// Make it once (a static field), not per request: making one costs more than an ordinary
    /// answer. Thread-safe. Dispose (or the finalizer) frees the engine's copy; a response still
    /// answered with it afterwards is sent the ordinary way, with the same content.
    /// </summary>
    public sealed unsafe class EmberAnswer : IDisposable
    {
        readonly EmberResponse _content;   // detached; also what a freed answer is sent as
        long _handle;                      // the engine's ember_answer; 0 once freed

        /// <summary>A status (200..999), a Content-Type (null = none) and a body (copied; null = empty).</summary>
        public EmberAnswer(int statusCode, string contentType, byte[] body)
            : this(statusCode, contentType, body, null) { }

        /// <summary>Also with extra header lines (checked as <see cref="EmberResponse.AddHeader"/> does).</summary>
        public EmberAnswer(int statusCode, string contentType, byte[] body, IEnumerable<KeyValuePair<string, string>> headers)
        {
            if (statusCode < 200 || statusCode > 999)
                throw new ArgumentOutOfRangeException("statusCode", "a prepared answer's status must be 200..999");
            NativeLoader.EnsureLoaded();
            var r = new EmberResponse();
            r.StatusCode = statusCode;
            r.ContentType = contentType;
            if (headers != null)
            {
                foreach (var h in headers) r.AddHeader(h.Key, h.Value);
            }
            byte[] copy = body == null ? Utf8.Empty : (byte[])body.Clone();
            r.Bytes(copy, 0, copy.Length, r.ContentType);
            _content = r;
            _handle = (long)Wire.Prepare(r);
        }

        /// <summary>UTF-8 text, "text/plain; charset=utf-8".</summary>
        public static EmberAnswer Text(string text, int statusCode = 200)
        {
            return new EmberAnswer(statusCode, EmberResponse.TextPlain, Utf8.Encoding.GetBytes(text ?? string.Empty));
        }

        /// <summary>A JSON document already serialized, "application/json".</summary>
        public static EmberAnswer Json(string json, int statusCode = 200)
        {
            return new EmberAnswer(statusCode, EmberResponse.ApplicationJson, Utf8.Encoding.GetBytes(json ?? string.Empty));
        }

        public int StatusCode { get { return _content.StatusCode; } }

        public string ContentType { get { return _content.ContentType; } }

        /// <summary>Status, headers and body as a detached response (the answer's own: do not change it).</summary>
        internal EmberResponse Content { get { return _content; } }

        /// <summary>Answers req with it; a freed answer is sent the ordinary way.</summary>
        internal int Respond(ulong req)
        {
            long h = Volatile.Read(ref _handle);
            if (h != 0)
            {
                int rc = NativeMethods.ember_request_respond_answer(req, (ulong)h);
                // INVALID_HANDLE is the request's (gone) unless the answer was freed meanwhile;
                // then the request still waits for an answer.
                if (rc != NativeMethods.EMBER_ERR_INVALID_HANDLE || Volatile.Read(ref _handle) != 0) return rc;
            }
            return Wire.Send(req, _content);
        }

        public void Dispose()
        {
            Free();
            GC.SuppressFinalize(this);
        }

        ~EmberAnswer() { Free(); }

        void Free()
        {
            long h = Interlocked.Exchange(ref _handle, 0);
            if (h == 0) return;
            try { NativeMethods.ember_answer_free((ulong)h); }
            catch (Exception) { }   // never from a finalizer
        }
    }
}
