using System;
using System.IO;
using System.Threading;
using System.Threading.Tasks;
using Ember.Interop;

namespace Ember
{
    /// <summary>What a streamed body needs from the request it belongs to (EmberContext, an
    /// OWIN call).</summary>
    internal interface IRequestOwner
    {
        /// <summary>The request's events, registered at first use.</summary>
        RequestEvents Events { get; }
        /// <summary>True once the host answered (or began answering).</summary>
        bool HasResponded { get; }
        /// <summary>The engine ended the request (client gone, 413, 408, timeout).</summary>
        void MarkEndedByEngine();
    }

    /// <summary>
    /// A request body read as it arrives (routes mapped with <c>streamBody: true</c>): the engine
    /// holds a small window (64 KiB) between the client and this stream, and TCP holds the client
    /// back while the window is full, so any body size costs a few KiB.
    /// <list type="bullet">
    /// <item><see cref="Read(byte[], int, int)"/> blocks until data, the end (0) or
    /// <see cref="ReadTimeout"/>; not allowed on an engine I/O thread (Inline dispatch), where it
    /// throws InvalidOperationException: use ReadAsync there.</item>
    /// <item><see cref="ReadAsync(byte[], int, int, CancellationToken)"/> awaits the engine's
    /// readable notice; it holds no thread while it waits.</item>
    /// <item>The first read sends <c>100 Continue</c> to a client that asked for it.</item>
    /// <item>A body over EmberOptions.MaxStreamBodyBytes: the engine answers 413 and reads throw
    /// <see cref="EmberStreamException"/> (TooLarge); too slow (MinBodyRate): 408 and TimedOut; the
    /// client left: ClientGone.</item>
    /// </list>
    /// Once the handler has answered, the rest of the body is dropped by the engine.
    /// </summary>
    public sealed class EmberRequestBodyStream : Stream
    {
        readonly IRequestOwner _ctx;
        readonly ulong _req;
        readonly long _length;
        long _read;
        int _readTimeout = 30000;
        bool _end;

        internal EmberRequestBodyStream(IRequestOwner ctx, ulong req, long declaredLength)
        {
            _ctx = ctx;
            _req = req;
            _length = declaredLength;
        }

        public override bool CanRead { get { return true; } }
        public override bool CanSeek { get { return false; } }
        public override bool CanWrite { get { return false; } }
        public override bool CanTimeout { get { return true; } }

        /// <summary>The declared length (Content-Length); NotSupportedException when the client did
        /// not declare one (chunked): see <see cref="EmberRequest.ContentLength"/>.</summary>
        public override long Length
        {
            get
            {
                if (_length < 0) throw new NotSupportedException("the client did not declare the body's length (chunked)");
                return _length;
            }
        }

        /// <summary>Bytes read so far.</summary>
        public override long Position { get { return Interlocked.Read(ref _read); } set { throw new NotSupportedException(); } }

        /// <summary>How long a blocking Read waits for data, in ms (default 30000; Timeout.Infinite =
        /// no limit: the engine's minimum body rate still cuts a stalled client).</summary>
        public override int ReadTimeout
        {
            get { return _readTimeout; }
            set
            {
                if (value <= 0 && value != Timeout.Infinite) throw new ArgumentOutOfRangeException("value");
                _readTimeout = value;
            }
        }

        public override int Read(byte[] buffer, int offset, int count)
        {
            Check(buffer, offset, count);
            if (count == 0 || _end) return 0;
            uint ms = _readTimeout == Timeout.Infinite ? NativeMethods.EMBER_WAIT_FOREVER : (uint)_readTimeout;
            int n;
            int rc = TryRead(buffer, offset, count, ms, out n);
            if (rc == NativeMethods.EMBER_ERR_STATE)
                throw new InvalidOperationException(
                    "a blocking Read on an engine I/O thread (Inline dispatch, or Auto running the handler there) would stall the server: use ReadAsync, or Pool dispatch.");
            if (rc == NativeMethods.EMBER_ERR_WOULD_BLOCK)
                throw new EmberStreamException(EmberResult.TimedOut, "no request body bytes for " + _readTimeout + " ms (ReadTimeout)");
            if (rc != NativeMethods.EMBER_OK) throw Failure(rc);
            return Took(n);
        }

        public override Task<int> ReadAsync(byte[] buffer, int offset, int count, CancellationToken cancellationToken)
        {
            Check(buffer, offset, count);
            if (count == 0 || _end) return Task.FromResult(0);
            int n;
            int rc = TryRead(buffer, offset, count, 0, out n);
            if (rc == NativeMethods.EMBER_OK) return Completed(Took(n));
            if (rc == NativeMethods.EMBER_ERR_WOULD_BLOCK) return ReadSlow(buffer, offset, count, cancellationToken);
            var t = new TaskCompletionSource<int>();
            t.SetException(Failure(rc));
            return t.Task;
        }

        async Task<int> ReadSlow(byte[] buffer, int offset, int count, CancellationToken cancellationToken)
        {
            RequestEvents events = _ctx.Events;
            while (true)
            {
                Task readable = events.Readable();
                int n;
                // Retried after listening: data that came in between is not missed.
                int rc = TryRead(buffer, offset, count, 0, out n);
                if (rc == NativeMethods.EMBER_OK) return Took(n);
                if (rc != NativeMethods.EMBER_ERR_WOULD_BLOCK) throw Failure(rc);
                await EmberResponseStream.Wait(readable, cancellationToken).ConfigureAwait(false);
            }
        }

        Task<int> _lastTask;

        /// <summary>A finished read's Task, reused while the count repeats (as NetworkStream does):
        /// a large upload then allocates nothing per read.</summary>
        Task<int> Completed(int n)
        {
            Task<int> t = _lastTask;
            if (t != null && t.Result == n) return t;
            return _lastTask = Task.FromResult(n);
        }

        unsafe int TryRead(byte[] buffer, int offset, int count, uint timeoutMs, out int n)
        {
            UIntPtr got;
            int rc;
            fixed (byte* p = buffer) rc = NativeMethods.ember_request_read(_req, p + offset, (UIntPtr)count, timeoutMs, out got);
            n = rc == NativeMethods.EMBER_OK ? (int)got.ToUInt64() : 0;
            return rc;
        }

        int Took(int n)
        {
            if (n == 0) _end = true;
            else Interlocked.Add(ref _read, n);
            return n;
        }

        Exception Failure(int rc)
        {
            var result = (EmberResult)rc;
            switch (result)
            {
                case EmberResult.TooLarge:
                    _ctx.MarkEndedByEngine();
                    return new EmberStreamException(result, "the request body passed its limit; the engine answered 413");
                case EmberResult.TimedOut:
                    _ctx.MarkEndedByEngine();
                    return new EmberStreamException(result, "the request body came too slowly (the engine answered 408), or the handler timeout answered");
                case EmberResult.ClientGone:
                case EmberResult.InvalidHandle:
                    _ctx.MarkEndedByEngine();
                    return new EmberStreamException(EmberResult.ClientGone, "the client left before the whole body came");
                case EmberResult.AlreadyAnswered:
                    if (!_ctx.HasResponded)
                    {
                        // Not by us: the engine answered for the body (413 over the limit, 408 too slow).
                        _ctx.MarkEndedByEngine();
                        return new EmberStreamException(result, "the engine answered the request for its body (413 too large or 408 too slow)", true);
                    }
                    return new ObjectDisposedException("EmberRequestBodyStream", "the request was answered; the rest of its body was dropped");
            }
            return Native.Error(rc, "ember_request_read");
        }

        static void Check(byte[] buffer, int offset, int count)
        {
            if (buffer == null) throw new ArgumentNullException("buffer");
            if (offset < 0 || count < 0 || offset > buffer.Length - count) throw new ArgumentOutOfRangeException("count");
        }

        public override void Flush() { }
        public override long Seek(long offset, SeekOrigin origin) { throw new NotSupportedException(); }
        public override void SetLength(long value) { throw new NotSupportedException(); }
        public override void Write(byte[] buffer, int offset, int count) { throw new NotSupportedException(); }
    }
}
