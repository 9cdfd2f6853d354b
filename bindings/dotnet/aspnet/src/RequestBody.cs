using System;
using Ember.Interop;

namespace Ember.AspNet
{
    /// <summary>
    /// The request body as System.Web reads it: a preloaded head (GetPreloadedEntityBody) and the
    /// rest through ReadEntityBody, the way IIS hands over a large body.
    ///
    /// STREAMING HOOK (request bodies): today the engine has buffered the whole body before the
    /// handler runs, so <see cref="ReadMore"/> copies from that buffer. When the engine streams
    /// request bodies (ember_request_read on a route registered with EMBER_ROUTE_STREAM_BODY),
    /// only <see cref="ReadMore"/> and the constructor's length change: the preloaded head is then
    /// whatever the first read returns, and Total comes from Content-Length (or -1 for chunked).
    /// </summary>
    internal sealed unsafe class RequestBody
    {
        /// <summary>How much of the body System.Web gets preloaded (IIS preloads 48-64 KiB).</summary>
        internal const int PreloadBytes = 64 * 1024;

        readonly EmberStr _view;   // the engine's buffered body, valid until the request is answered
        readonly EmberWorkerRequest _owner;
        readonly int _total;
        int _position;             // bytes handed out so far (preloaded head included)
        byte[] _preloaded;

        internal RequestBody(EmberWorkerRequest owner, EmberStr view)
        {
            _owner = owner;
            _view = view;
            _total = checked((int)view.Len.ToUInt64());
        }

        internal int Total { get { return _total; } }

        internal bool EntirelyPreloaded { get { return _total <= PreloadBytes; } }

        internal int PreloadedLength { get { return Math.Min(_total, PreloadBytes); } }

        /// <summary>The preloaded head (null when there is no body, as System.Web expects).</summary>
        internal byte[] Preloaded()
        {
            if (_total == 0) return null;
            if (_preloaded == null)
            {
                int n = PreloadedLength;
                var a = new byte[n];
                CopyOut(0, a, 0, n);
                _preloaded = a;
                if (_position < n) _position = n;
            }
            return _preloaded;
        }

        /// <summary>Reads the part after the preloaded head (ReadEntityBody).</summary>
        internal int ReadMore(byte[] buffer, int offset, int size)
        {
            if (buffer == null) throw new ArgumentNullException("buffer");
            if (offset < 0 || size < 0 || offset > buffer.Length - size) throw new ArgumentOutOfRangeException("size");
            if (_position < PreloadedLength) _position = PreloadedLength;   // the head is read via Preloaded()
            int n = Math.Min(size, _total - _position);
            if (n <= 0) return 0;
            CopyOut(_position, buffer, offset, n);
            _position += n;
            return n;
        }

        void CopyOut(int from, byte[] to, int offset, int count)
        {
            if (count == 0) return;
            // The engine's views end with the answer; System.Web reads the body before it answers.
            if (!_owner.RequestViewsLive)
                throw new InvalidOperationException("the request body was read after the response was sent");
            fixed (byte* d = to) Buffer.MemoryCopy(_view.Ptr + from, d + offset, to.Length - offset, count);
        }
    }
}
