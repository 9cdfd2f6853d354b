using System;
using Ember.Interop;

namespace Ember.AspNet
{
    /// <summary>
    /// The request body as System.Web reads it: a preloaded head (GetPreloadedEntityBody) and the
    /// rest through ReadEntityBody, the way IIS hands over a large body.
    ///
    /// Methods that carry bodies (POST, PUT ...) come on streamed-body routes: the engine holds a
    /// small window, and <see cref="ReadMore"/> reads from the client as it sends
    /// (ember_request_read, blocking: System.Web runs on a pool thread), so an upload costs the
    /// engine a few KiB whatever its size. The preloaded head is the first 64 KiB. System.Web
    /// sizes its input by Content-Length, so a body without one (chunked) is read whole first (up
    /// to the body limit) and handed over with its real length. GET, HEAD, DELETE and OPTIONS
    /// keep the engine's buffered body (read from its memory).
    /// </summary>
    internal sealed unsafe class RequestBody
    {
        /// <summary>How much of the body System.Web gets preloaded (IIS preloads 48-64 KiB).</summary>
        internal const int PreloadBytes = 64 * 1024;

        /// <summary>How long a read waits for the client before the request counts as gone.</summary>
        const uint ReadTimeoutMs = 60000;

        readonly EmberStr _view;   // the engine's buffered body, valid until the request is answered
        readonly EmberWorkerRequest _owner;
        readonly ulong _req;
        readonly bool _streamed;
        int _total;
        int _position;             // bytes handed out so far (preloaded head included)
        byte[] _preloaded;
        byte[] _whole;             // a streamed body of unknown length, read whole
        bool _failed;
        bool _pulled;              // something was read from the client (a streamed body)

        internal RequestBody(EmberWorkerRequest owner, ulong req, EmberRequestInfo* info)
        {
            _owner = owner;
            _req = req;
            _view = info->Body;
            _streamed = (info->Flags & NativeMethods.EMBER_REQUEST_BODY_STREAMED) != 0;
            if (!_streamed) _total = checked((int)_view.Len.ToUInt64());
            else if (info->ContentLength >= 0) _total = info->ContentLength > int.MaxValue ? int.MaxValue : (int)info->ContentLength;
            else ReadWhole();
        }

        internal int Total { get { return _total; } }

        /// <summary>The client or the engine ended the body early (gone, 413, 408).</summary>
        internal bool Failed { get { return _failed; } }

        /// <summary>Bytes were read from the client: the request can no longer be replayed.</summary>
        internal bool Pulled { get { return _pulled; } }

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
                int got = CopyOut(0, a, 0, n);
                if (got < n)
                {
                    // The body ended short (client gone, or the engine answered 413/408).
                    var b = new byte[got];
                    Buffer.BlockCopy(a, 0, b, 0, got);
                    a = b;
                }
                _preloaded = a;
                if (_position < a.Length) _position = a.Length;
            }
            return _preloaded;
        }

        /// <summary>Reads the part after the preloaded head (ReadEntityBody).</summary>
        internal int ReadMore(byte[] buffer, int offset, int size)
        {
            if (buffer == null) throw new ArgumentNullException("buffer");
            if (offset < 0 || size < 0 || offset > buffer.Length - size) throw new ArgumentOutOfRangeException("size");
            if (_position < PreloadedLength && _preloaded == null) Preloaded();   // the head is read via Preloaded()
            int n = Math.Min(size, _total - _position);
            if (n <= 0) return 0;
            n = CopyOut(_position, buffer, offset, n);
            _position += n;
            return n;
        }

        /// <summary>Copies body bytes [from, from+count) out; fewer when a streamed body ended early.</summary>
        int CopyOut(int from, byte[] to, int offset, int count)
        {
            if (count == 0) return 0;
            if (_whole != null)
            {
                Buffer.BlockCopy(_whole, from, to, offset, count);
                return count;
            }
            if (_streamed) return ReadStreamed(to, offset, count);
            // The engine's views end with the answer; System.Web reads the body before it answers.
            if (!_owner.RequestViewsLive)
                throw new InvalidOperationException("the request body was read after the response was sent");
            fixed (byte* d = to) Buffer.MemoryCopy(_view.Ptr + from, d + offset, to.Length - offset, count);
            return count;
        }

        /// <summary>Reads exactly count bytes from the client (fewer at an early end).</summary>
        int ReadStreamed(byte[] to, int offset, int count)
        {
            int got = 0;
            _pulled = true;
            while (got < count && !_failed)
            {
                UIntPtr n;
                int rc;
                fixed (byte* d = to) rc = NativeMethods.ember_request_read(_req, d + offset + got, (UIntPtr)(count - got), ReadTimeoutMs, out n);
                if (rc != NativeMethods.EMBER_OK || n == UIntPtr.Zero)
                {
                    _failed = true;   // too large (413), too slow (408), gone, or shorter than declared
                    break;
                }
                got += (int)n.ToUInt64();
            }
            return got;
        }

        void ReadWhole()
        {
            var buf = new byte[PreloadBytes];
            int len = 0;
            _pulled = true;
            while (true)
            {
                if (len == buf.Length)
                {
                    var b = new byte[buf.Length * 2];
                    Buffer.BlockCopy(buf, 0, b, 0, len);
                    buf = b;
                }
                UIntPtr n;
                int rc;
                fixed (byte* d = buf) rc = NativeMethods.ember_request_read(_req, d + len, (UIntPtr)(buf.Length - len), ReadTimeoutMs, out n);
                if (rc != NativeMethods.EMBER_OK) { _failed = true; break; }
                if (n == UIntPtr.Zero) break;
                len += (int)n.ToUInt64();
            }
            _whole = new byte[len];
            Buffer.BlockCopy(buf, 0, _whole, 0, len);
            _total = len;
        }
    }
}
