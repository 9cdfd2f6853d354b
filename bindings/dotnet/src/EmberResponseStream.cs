using System;
using System.IO;
using System.Threading;
using System.Threading.Tasks;
using Ember.Interop;

namespace Ember
{
    /// <summary>
    /// The body of a streamed answer (<see cref="EmberResponse.StartStream()"/>): every Write
    /// goes to the engine at once (copied), as an HTTP/1.1 chunk or HTTP/2 DATA frame. The
    /// engine's queue per answer is bounded (EmberOptions.StreamQueueBytes): a write that finds
    /// it full waits, so a slow client holds the writer back instead of filling memory.
    /// <list type="bullet">
    /// <item><see cref="Write(byte[], int, int)"/> blocks (up to <see cref="WriteTimeout"/>) on a
    /// full queue; not allowed on an engine I/O thread (Inline dispatch), where it throws
    /// InvalidOperationException instead of stalling the server: use WriteAsync there.</item>
    /// <item><see cref="WriteAsync(byte[], int, int, CancellationToken)"/> awaits the engine's
    /// writable notice; it holds no thread while it waits.</item>
    /// <item>Dispose (or the end of the handler) ends the answer; <see cref="Abort"/> cuts it so
    /// the client can tell it is incomplete.</item>
    /// </list>
    /// Writes after the client left throw <see cref="EmberStreamException"/> (ClientGone).
    /// One writer at a time: concurrent writes interleave in an unspecified order.
    /// </summary>
    public sealed class EmberResponseStream : Stream
    {
        /// <summary>Larger writes go in pieces, so the engine never holds more than its queue
        /// limit plus one piece for this answer.</summary>
        internal const int MaxPiece = 256 * 1024;

        readonly EmberContext _ctx;
        readonly ulong _req;
        int _state;   // 0 open, 1 ended, 2 aborted
        int _writeTimeout = 30000;

        internal EmberResponseStream(EmberContext ctx, ulong req)
        {
            _ctx = ctx;
            _req = req;
        }

        public override bool CanRead { get { return false; } }
        public override bool CanSeek { get { return false; } }
        public override bool CanWrite { get { return Volatile.Read(ref _state) == 0; } }
        public override bool CanTimeout { get { return true; } }
        public override long Length { get { throw new NotSupportedException(); } }
        public override long Position { get { throw new NotSupportedException(); } set { throw new NotSupportedException(); } }
        public override int Read(byte[] buffer, int offset, int count) { throw new NotSupportedException(); }
        public override long Seek(long offset, SeekOrigin origin) { throw new NotSupportedException(); }
        public override void SetLength(long value) { throw new NotSupportedException(); }

        /// <summary>How long a blocking Write waits for room, in ms (default 30000;
        /// Timeout.Infinite = no limit). WriteAsync is not limited by it: cancel it with its token
        /// (or the request's RequestAborted, which the engine cancels when the client leaves).</summary>
        public override int WriteTimeout
        {
            get { return _writeTimeout; }
            set
            {
                if (value <= 0 && value != Timeout.Infinite) throw new ArgumentOutOfRangeException("value");
                _writeTimeout = value;
            }
        }

        /// <summary>True once the answer was ended or aborted.</summary>
        public bool IsEnded { get { return Volatile.Read(ref _state) != 0; } }

        public override void Write(byte[] buffer, int offset, int count)
        {
            Check(buffer, offset, count);
            while (count > 0)
            {
                int n = Math.Min(count, MaxPiece);
                int rc = TryWrite(buffer, offset, n);
                while (rc == NativeMethods.EMBER_ERR_WOULD_BLOCK)
                {
                    uint ms = _writeTimeout == Timeout.Infinite ? NativeMethods.EMBER_WAIT_FOREVER : (uint)_writeTimeout;
                    int w = NativeMethods.ember_response_wait_writable(_req, ms);
                    if (w == NativeMethods.EMBER_ERR_STATE)
                        throw new InvalidOperationException(
                            "Write found the queue full on an engine I/O thread (Inline dispatch, or Auto running the handler there), where blocking would stall the server: use WriteAsync, or Pool dispatch.");
                    if (w == NativeMethods.EMBER_ERR_WOULD_BLOCK)
                        throw new EmberStreamException(EmberResult.TimedOut, "the client took nothing for " + _writeTimeout + " ms (WriteTimeout)");
                    if (w != NativeMethods.EMBER_OK) throw Failure(w);
                    rc = TryWrite(buffer, offset, n);
                }
                if (rc != NativeMethods.EMBER_OK) throw Failure(rc);
                offset += n;
                count -= n;
            }
        }

        public override Task WriteAsync(byte[] buffer, int offset, int count, CancellationToken cancellationToken)
        {
            Check(buffer, offset, count);
            // The common case (room in the queue) completes without a state machine.
            while (count > 0)
            {
                int n = Math.Min(count, MaxPiece);
                int rc = TryWrite(buffer, offset, n);
                if (rc == NativeMethods.EMBER_ERR_WOULD_BLOCK) return WriteSlow(buffer, offset, count, cancellationToken);
                if (rc != NativeMethods.EMBER_OK) return Failed(Failure(rc));
                offset += n;
                count -= n;
            }
            return s_done;
        }

        async Task WriteSlow(byte[] buffer, int offset, int count, CancellationToken cancellationToken)
        {
            RequestEvents events = _ctx.Events;
            while (count > 0)
            {
                int n = Math.Min(count, MaxPiece);
                int rc = TryWrite(buffer, offset, n);
                while (rc == NativeMethods.EMBER_ERR_WOULD_BLOCK)
                {
                    Task writable = events.Writable();
                    rc = TryWrite(buffer, offset, n);   // the notice may have come before we listened
                    if (rc != NativeMethods.EMBER_ERR_WOULD_BLOCK) break;
                    await Wait(writable, cancellationToken).ConfigureAwait(false);
                    rc = TryWrite(buffer, offset, n);
                }
                if (rc != NativeMethods.EMBER_OK) throw Failure(rc);
                offset += n;
                count -= n;
            }
        }

        internal static async Task Wait(Task t, CancellationToken ct)
        {
            if (!ct.CanBeCanceled) { await t.ConfigureAwait(false); return; }
            var cancelled = new TaskCompletionSource<bool>(TaskCreationOptions.RunContinuationsAsynchronously);
            using (ct.Register(s => ((TaskCompletionSource<bool>)s).TrySetResult(true), cancelled))
            {
                if (await Task.WhenAny(t, cancelled.Task).ConfigureAwait(false) != t) ct.ThrowIfCancellationRequested();
            }
        }

        static readonly Task s_done = Task.FromResult(true);

        static Task Failed(Exception ex)
        {
            var t = new TaskCompletionSource<bool>();
            t.SetException(ex);
            return t.Task;
        }

        unsafe int TryWrite(byte[] buffer, int offset, int count)
        {
            int state = Volatile.Read(ref _state);
            if (state != 0) return NativeMethods.EMBER_ERR_ALREADY_ANSWERED;
            fixed (byte* p = buffer) return NativeMethods.ember_response_write(_req, p + offset, (UIntPtr)count);
        }

        Exception Failure(int rc)
        {
            if (rc == NativeMethods.EMBER_ERR_ALREADY_ANSWERED && Volatile.Read(ref _state) != 0)
                return new ObjectDisposedException("EmberResponseStream", "the streamed answer has ended");
            var result = (EmberResult)rc;
            if (result == EmberResult.ClientGone || result == EmberResult.TimedOut || result == EmberResult.InvalidHandle)
            {
                _ctx.MarkEndedByEngine();
                return new EmberStreamException(result == EmberResult.InvalidHandle ? EmberResult.ClientGone : result,
                    "the streamed answer cannot go on: " + (result == EmberResult.TimedOut ? "the handler timeout answered" : "the client left or the server stopped"));
            }
            return Native.Error(rc, "ember_response_write");
        }

        static void Check(byte[] buffer, int offset, int count)
        {
            if (buffer == null) throw new ArgumentNullException("buffer");
            if (offset < 0 || count < 0 || offset > buffer.Length - count) throw new ArgumentOutOfRangeException("count");
        }

        /// <summary>Nothing to do: every write is handed to the engine at once.</summary>
        public override void Flush() { }

        public override Task FlushAsync(CancellationToken cancellationToken) { return s_done; }

        /// <summary>Ends the answer (what is queued still goes out). Idempotent.</summary>
        internal int End()
        {
            if (Interlocked.CompareExchange(ref _state, 1, 0) != 0) return NativeMethods.EMBER_OK;
            int rc = NativeMethods.ember_response_end(_req);
            _ctx.StreamEnded();
            return rc;
        }

        /// <summary>
        /// Cuts the answer: what is queued is dropped and the client sees it incomplete (HTTP/1.1:
        /// the connection closes without the last chunk; HTTP/2: the stream is reset). For a
        /// producer that failed halfway. No effect once ended.
        /// </summary>
        public void Abort()
        {
            if (Interlocked.CompareExchange(ref _state, 2, 0) != 0) return;
            NativeMethods.ember_response_abort(_req);
            _ctx.StreamEnded();
        }

        protected override void Dispose(bool disposing)
        {
            try
            {
                if (disposing) End();
            }
            finally
            {
                base.Dispose(disposing);
            }
        }
    }
}
