using System;
using System.IO;
using System.Text;
using System.Threading;
using System.Threading.Tasks;
using Ember.Interop;

namespace Ember
{
    /// <summary>
    /// Collects what an adapter sends (System.Web's HttpWorkerRequest, the OWIN server: status,
    /// header lines, body chunks) and hands it to the engine. Every response leaves through
    /// <see cref="Flush"/> / <see cref="FlushAsync"/>; it is the one place that talks to the
    /// engine, for the System.Web host and the OWIN server alike.
    ///
    /// An answer that is only flushed at its end goes out in ONE call (ember_request_respond,
    /// with Content-Length). The first non-final flush starts a streamed answer instead
    /// (ember_response_begin: status and headers now), and every flush from then on hands the
    /// bytes collected so far to the engine as a chunk (ember_response_write); the final flush
    /// ends it (ember_response_end). The engine's queue per answer is bounded: a write that finds
    /// it full waits, blocking (<see cref="Flush"/>: System.Web, whose pipeline blocks its thread
    /// anyway) or awaiting the writable notice (<see cref="FlushAsync"/>: OWIN).
    /// </summary>
    internal sealed class ResponseSink
    {
        static readonly UTF8Encoding s_utf8 = new UTF8Encoding(false, false);

        /// <summary>How long a blocking flush waits for a client that takes nothing before the
        /// answer is cut.</summary>
        internal const int WriteTimeoutMs = 60000;

        readonly ulong _req;
        int _status = 200;
        readonly StringBuilder _headers = new StringBuilder(256);
        byte[] _body = Empty;
        int _bodyStart, _bodyLength;   // unsent bytes are _body[_bodyStart .. _bodyStart+_bodyLength)
        bool _flushed;    // a non-final flush happened: the head is fixed from now on
        bool _streaming;  // ember_response_begin succeeded
        int _done;        // 1 once the final answer was handed over (or refused)
        int _result;      // the engine's answer to the final call (or the first failure)

        static readonly byte[] Empty = new byte[0];

        internal ResponseSink(ulong req) { _req = req; }

        /// <summary>The request's events, for awaiting room (OWIN); null where only blocking
        /// flushes are used (System.Web).</summary>
        internal Func<RequestEvents> Events;

        internal bool HeadFixed { get { return _flushed || Done; } }
        internal bool Done { get { return Volatile.Read(ref _done) != 0; } }
        internal bool Streaming { get { return _streaming; } }
        internal int Result { get { return _result; } }
        internal int Status { get { return _status; } }

        /// <summary>Bytes collected and not yet handed to the engine.</summary>
        internal int Buffered { get { return _bodyLength; } }

        internal void SetStatus(int status)
        {
            if (HeadFixed) return;
            _status = status;
        }

        /// <summary>Adds a header line. Framing is the engine's: it drops Transfer-Encoding; a
        /// Content-Length is kept for a streamed answer (sent length-delimited) and for HEAD.</summary>
        internal void AddHeader(string name, string value)
        {
            if (HeadFixed || name == null) return;
            if (string.Equals(name, "Transfer-Encoding", StringComparison.OrdinalIgnoreCase)) return;
            _headers.Append(name).Append(": ").Append(value ?? string.Empty).Append("\r\n");
        }

        internal void Write(byte[] data, int offset, int count)
        {
            if (count <= 0 || Done) return;
            Reserve(count);
            Buffer.BlockCopy(data, offset, _body, _bodyStart + _bodyLength, count);
            _bodyLength += count;
        }

        internal unsafe void Write(byte* data, int count)
        {
            if (count <= 0 || Done) return;
            Reserve(count);
            fixed (byte* d = _body) Buffer.MemoryCopy(data, d + _bodyStart + _bodyLength, _body.Length - _bodyStart - _bodyLength, count);
            _bodyLength += count;
        }

        /// <summary>Copies [offset, offset+length) of a file (length -1 = to its end). Once the
        /// answer streams, the file goes out piece by piece instead of whole into memory.</summary>
        internal void WriteFile(Stream file, long offset, long length)
        {
            if (Done) return;
            long size = file.Length;
            if (offset < 0 || offset > size) return;
            long n = length < 0 ? size - offset : Math.Min(length, size - offset);
            if (n <= 0) return;
            file.Seek(offset, SeekOrigin.Begin);
            while (n > 0 && !Done)
            {
                int piece = (int)Math.Min(n, _streaming ? EmberResponseStream.MaxPiece : int.MaxValue - _bodyLength - _bodyStart);
                if (piece <= 0) throw new IOException("response over 2 GiB");
                Reserve(piece);
                int got = 0;
                while (got < piece)
                {
                    int r = file.Read(_body, _bodyStart + _bodyLength, piece - got);
                    if (r <= 0) { n = 0; break; }
                    _bodyLength += r;
                    got += r;
                }
                n -= got;
                if (_streaming && n > 0) Drain(true);
            }
        }

        void Reserve(int more)
        {
            int need = _bodyStart + _bodyLength + more;
            if (need <= _body.Length) return;
            if (_bodyLength + more <= _body.Length)
            {
                // Room enough once what was sent is dropped from the front.
                Buffer.BlockCopy(_body, _bodyStart, _body, 0, _bodyLength);
                _bodyStart = 0;
                return;
            }
            int size = Math.Max(_bodyLength + more, Math.Max(4096, _body.Length * 2));
            var b = new byte[size];
            Buffer.BlockCopy(_body, _bodyStart, b, 0, _bodyLength);
            _body = b;
            _bodyStart = 0;
        }

        /// <summary>
        /// Sends what was collected, blocking while the engine's queue is full. Non-final: starts
        /// the streamed answer (the first time) and hands over the bytes so far; final: the whole
        /// answer in one call, or the end of the streamed one, exactly once. Returns the engine's
        /// result (EMBER_OK, or why the answer could not go on: the client left, ...).
        /// On an engine I/O thread (Inline dispatch) a full queue does not block: the bytes stay
        /// collected for the next flush (a final one then still waits, see FlushAsync).
        /// </summary>
        internal int Flush(bool final)
        {
            if (Done) return _result;
            if (!final || _streaming)
            {
                int rc = StartAndDrain(true);
                if (rc == NativeMethods.EMBER_ERR_STATE && final)
                {
                    // A final flush on an I/O thread with the queue full: finish without blocking.
                    FlushAsync(true).ContinueWith(t => GC.KeepAlive(t.Exception), TaskContinuationOptions.OnlyOnFaulted);
                    return NativeMethods.EMBER_OK;
                }
                if (!final || rc != NativeMethods.EMBER_OK) return rc == NativeMethods.EMBER_ERR_STATE ? NativeMethods.EMBER_OK : rc;
                return End();
            }
            return RespondOnce();
        }

        /// <summary>Like <see cref="Flush"/>, awaiting the engine's writable notice instead of
        /// blocking (needs <see cref="Events"/>).</summary>
        internal async Task<int> FlushAsync(bool final)
        {
            if (Done) return _result;
            if (final && !_streaming) return RespondOnce();
            while (true)
            {
                int rc = StartAndDrain(false);
                if (rc == NativeMethods.EMBER_ERR_WOULD_BLOCK)
                {
                    RequestEvents ev = Events();
                    Task writable = ev.Writable();
                    rc = StartAndDrain(false);   // the notice may have come before we listened
                    if (rc == NativeMethods.EMBER_ERR_WOULD_BLOCK)
                    {
                        await writable.ConfigureAwait(false);
                        continue;
                    }
                }
                if (rc != NativeMethods.EMBER_OK || !final) return rc;
                return End();
            }
        }

        int StartAndDrain(bool block)
        {
            if (Done) return _result;
            _flushed = true;
            if (!_streaming)
            {
                int rc = Begin();
                if (rc != NativeMethods.EMBER_OK) return rc;
                _streaming = true;
            }
            return Drain(block);
        }

        unsafe int Begin()
        {
            string head = _headers.ToString();
            byte[] hb = HeadBytes(head);
            int hlen = s_utf8.GetBytes(head, 0, head.Length, hb, 0);
            int rc;
            fixed (byte* h = hb) rc = NativeMethods.ember_response_begin(_req, (ushort)_status, h, (UIntPtr)hlen);
            if (rc == NativeMethods.EMBER_ERR_INVALID_ARG) return Refuse();
            if (rc != NativeMethods.EMBER_OK) Finish(rc);
            return rc;
        }

        /// <summary>Hands the collected bytes to the engine in pieces. WOULD_BLOCK: the queue is
        /// full and the rest stays collected (block = false, or no blocking allowed here: then
        /// STATE).</summary>
        unsafe int Drain(bool block)
        {
            while (_bodyLength > 0)
            {
                int n = Math.Min(_bodyLength, EmberResponseStream.MaxPiece);
                int rc;
                fixed (byte* b = _body) rc = NativeMethods.ember_response_write(_req, b + _bodyStart, (UIntPtr)n);
                if (rc == NativeMethods.EMBER_OK)
                {
                    _bodyStart += n;
                    _bodyLength -= n;
                    continue;
                }
                if (rc != NativeMethods.EMBER_ERR_WOULD_BLOCK) { Cut(rc); return rc; }
                if (!block) return rc;
                int w = NativeMethods.ember_response_wait_writable(_req, WriteTimeoutMs);
                if (w == NativeMethods.EMBER_ERR_STATE) return w;
                if (w == NativeMethods.EMBER_ERR_WOULD_BLOCK)
                {
                    // The client took nothing for a minute: give up on it.
                    Cut(NativeMethods.EMBER_ERR_TIMED_OUT);
                    return NativeMethods.EMBER_ERR_TIMED_OUT;
                }
                if (w != NativeMethods.EMBER_OK) { Cut(w); return w; }
            }
            _bodyStart = 0;
            return NativeMethods.EMBER_OK;
        }

        int End()
        {
            if (Interlocked.Exchange(ref _done, 1) != 0) return _result;
            int rc = NativeMethods.ember_response_end(_req);
            _result = rc;
            _body = Empty;
            return rc;
        }

        /// <summary>The application failed mid-stream: cut the answer so the client can tell.</summary>
        internal void Abort()
        {
            if (_streaming) Cut(NativeMethods.EMBER_ERR_CLIENT_GONE);
        }

        /// <summary>The stream cannot go on: cut it (the client sees it incomplete), answer done.</summary>
        void Cut(int rc)
        {
            if (Interlocked.Exchange(ref _done, 1) != 0) return;
            NativeMethods.ember_response_abort(_req);
            _result = rc;
            _body = Empty;
            _bodyLength = 0;
        }

        void Finish(int rc)
        {
            if (Interlocked.Exchange(ref _done, 1) != 0) return;
            _result = rc;
            _body = Empty;
            _bodyLength = 0;
        }

        /// <summary>The engine refused the head (a bad header): answer 500 plainly instead.</summary>
        unsafe int Refuse()
        {
            const string msg = "Internal Server Error: the application sent an invalid response header\n";
            byte[] m = Encoding.ASCII.GetBytes(msg);
            fixed (byte* mp = m)
                NativeMethods.ember_request_respond(_req, 500, null, UIntPtr.Zero, mp, (UIntPtr)m.Length);
            Finish(NativeMethods.EMBER_ERR_INVALID_ARG);
            return NativeMethods.EMBER_ERR_INVALID_ARG;
        }

        /// <summary>The whole answer in one call, exactly once.</summary>
        unsafe int RespondOnce()
        {
            if (Interlocked.Exchange(ref _done, 1) != 0) return _result;
            string head = _headers.ToString();
            byte[] hb = HeadBytes(head);
            int hlen = s_utf8.GetBytes(head, 0, head.Length, hb, 0);
            int rc;
            fixed (byte* h = hb)
            fixed (byte* b = _body)
            {
                rc = NativeMethods.ember_request_respond(_req, (ushort)_status, h, (UIntPtr)hlen,
                    _bodyLength == 0 ? null : b + _bodyStart, (UIntPtr)_bodyLength);
            }
            if (rc == NativeMethods.EMBER_ERR_INVALID_ARG)
            {
                Volatile.Write(ref _done, 0);
                Refuse();
                rc = NativeMethods.EMBER_ERR_INVALID_ARG;
            }
            _result = rc;
            _body = Empty;
            _bodyLength = 0;
            return rc;
        }

        [ThreadStatic] static byte[] t_head;

        static byte[] HeadBytes(string head)
        {
            int hmax = s_utf8.GetMaxByteCount(head.Length);
            return hmax <= 1024 ? (t_head ?? (t_head = new byte[1024])) : new byte[hmax];
        }
    }
}
