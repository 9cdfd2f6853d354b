using System;
using System.IO;
using System.Text;
using System.Threading;
using Ember.Interop;

namespace Ember
{
    /// <summary>
    /// Collects what an adapter sends (System.Web's HttpWorkerRequest, the OWIN server: status,
    /// header lines, body chunks) and hands it to the engine. Every response leaves through <see cref="Flush"/>; it is the one place that talks
    /// to the engine, for the System.Web host and the OWIN server alike.
    ///
    /// STREAMING HOOK (responses): today the engine takes an answer in one call, so a non-final
    /// flush keeps buffering and the final one sends status + headers + body with a single
    /// ember_request_respond. When the engine streams responses, a non-final Flush becomes
    /// ember_response_begin (first time: status + headers) + ember_response_write (the chunks so
    /// far; EMBER_ERR_WOULD_BLOCK → ember_request_wait(WRITABLE)), and the final one
    /// ember_response_write + ember_response_end when a stream was begun (else the single call
    /// stays). Nothing outside this class changes.
    /// </summary>
    internal sealed unsafe class ResponseSink
    {
        static readonly UTF8Encoding s_utf8 = new UTF8Encoding(false, false);

        readonly ulong _req;
        int _status = 200;
        readonly StringBuilder _headers = new StringBuilder(256);
        byte[] _body = Empty;
        int _bodyLength;
        bool _flushed;    // a non-final flush happened: the head is fixed from now on
        int _done;        // 1 once the final answer was handed over (or refused)
        int _result;      // the engine's answer to the final call

        static readonly byte[] Empty = new byte[0];

        internal ResponseSink(ulong req) { _req = req; }

        internal bool HeadFixed { get { return _flushed || Done; } }
        internal bool Done { get { return Volatile.Read(ref _done) != 0; } }
        internal int Result { get { return _result; } }
        internal int Status { get { return _status; } }

        internal void SetStatus(int status)
        {
            if (HeadFixed) return;
            _status = status;
        }

        /// <summary>Adds a header line. Framing is the engine's: it drops Transfer-Encoding and
        /// Content-Length, except that an answer to HEAD may state the length GET would send.</summary>
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
            Buffer.BlockCopy(data, offset, _body, _bodyLength, count);
            _bodyLength += count;
        }

        internal void Write(byte* data, int count)
        {
            if (count <= 0 || Done) return;
            Reserve(count);
            fixed (byte* d = _body) Buffer.MemoryCopy(data, d + _bodyLength, _body.Length - _bodyLength, count);
            _bodyLength += count;
        }

        /// <summary>Copies [offset, offset+length) of a file (length -1 = to its end).</summary>
        internal void WriteFile(Stream file, long offset, long length)
        {
            if (Done) return;
            long size = file.Length;
            if (offset < 0 || offset > size) return;
            long n = length < 0 ? size - offset : Math.Min(length, size - offset);
            if (n <= 0) return;
            if (n > int.MaxValue - _bodyLength) throw new IOException("response over 2 GiB");
            Reserve((int)n);
            file.Seek(offset, SeekOrigin.Begin);
            int left = (int)n;
            while (left > 0)
            {
                int r = file.Read(_body, _bodyLength, left);
                if (r <= 0) break;
                _bodyLength += r;
                left -= r;
            }
        }

        void Reserve(int more)
        {
            int need = _bodyLength + more;
            if (need <= _body.Length) return;
            int size = Math.Max(need, Math.Max(4096, _body.Length * 2));
            var b = new byte[size];
            Buffer.BlockCopy(_body, 0, b, 0, _bodyLength);
            _body = b;
        }

        /// <summary>Sends what was collected. Non-final: today only fixes the head (see the
        /// class comment); final: the answer, exactly once. Returns the engine's result.</summary>
        internal int Flush(bool final)
        {
            if (!final)
            {
                _flushed = true;
                return NativeMethods.EMBER_OK;
            }
            if (Interlocked.Exchange(ref _done, 1) != 0) return _result;
            string head = _headers.ToString();
            int hmax = s_utf8.GetMaxByteCount(head.Length);
            byte[] hb = hmax <= 1024 ? ScratchHead() : new byte[hmax];
            int hlen = s_utf8.GetBytes(head, 0, head.Length, hb, 0);
            int rc;
            fixed (byte* h = hb)
            fixed (byte* b = _body)
            {
                rc = NativeMethods.ember_request_respond(_req, (ushort)_status, h, (UIntPtr)hlen,
                    _bodyLength == 0 ? null : b, (UIntPtr)_bodyLength);
                if (rc == -2 /* EMBER_ERR_INVALID_ARG: a header the engine refused */)
                {
                    const string msg = "Internal Server Error: the application sent an invalid response header\n";
                    byte[] m = Encoding.ASCII.GetBytes(msg);
                    fixed (byte* mp = m)
                        NativeMethods.ember_request_respond(_req, 500, null, UIntPtr.Zero, mp, (UIntPtr)m.Length);
                }
            }
            _result = rc;
            _body = Empty;
            return rc;
        }

        [ThreadStatic] static byte[] t_head;

        static byte[] ScratchHead()
        {
            return t_head ?? (t_head = new byte[1024]);
        }
    }
}
