using System;

namespace Ember
{
    /// <summary>The engine's result codes (<c>ember_result</c>); the numbers are part of the ABI.</summary>
    public enum EmberResult
    {
        Ok = 0,
        /// <summary>A required pointer argument was NULL.</summary>
        Null = -1,
        /// <summary>Bad value: not UTF-8, bad header line, bad status, unknown option.</summary>
        InvalidArg = -2,
        /// <summary>Not allowed now (configure after start, start twice, use after stop).</summary>
        State = -3,
        /// <summary>A listen address could not be bound.</summary>
        Bind = -4,
        /// <summary>Route pattern malformed or conflicting.</summary>
        Route = -5,
        /// <summary>The request was already answered.</summary>
        AlreadyAnswered = -6,
        /// <summary>The handler timeout answered the request (503), or a wait timed out.</summary>
        TimedOut = -7,
        /// <summary>The client disconnected, or the server stopped, before the answer.</summary>
        ClientGone = -8,
        /// <summary>A stale or foreign request handle.</summary>
        InvalidHandle = -9,
        NotFound = -10,
        BufferTooSmall = -11,
        /// <summary>An internal panic was caught at the boundary.</summary>
        Panic = -12,
        /// <summary>Threads/runtime could not be created, other I/O failure.</summary>
        Runtime = -13,
        /// <summary>Not now: a write found its queue full, or a read found nothing yet (nothing was taken).</summary>
        WouldBlock = -14,
        /// <summary>A streamed request body passed its limit; the engine answered 413.</summary>
        TooLarge = -15,
        /// <summary>The native library was built without the feature this needs (the minimal build has no WebSocket, static files or TLS); the message names it.</summary>
        Unsupported = -16,
    }

    /// <summary>A failed engine call: the result code plus the engine's message for it.</summary>
    [Serializable]
    public class EmberException : Exception
    {
        public EmberResult Result { get; private set; }

        public EmberException(EmberResult result, string message)
            : base(message)
        {
            Result = result;
        }

        public EmberException(string message, Exception inner)
            : base(message, inner)
        {
            Result = EmberResult.Ok;
        }
    }
}

namespace Ember
{
    /// <summary>
    /// A streamed write or read that cannot go on because the request ended: the client left
    /// (<see cref="EmberResult.ClientGone"/>), the handler timeout answered or a wait timed out
    /// (<see cref="EmberResult.TimedOut"/>), the body passed its limit and the engine answered
    /// 413 (<see cref="EmberResult.TooLarge"/>), or the answer was already ended
    /// (<see cref="EmberResult.AlreadyAnswered"/>). A handler that lets it escape is not
    /// reported as an error when the client left or the engine answered for it.
    /// </summary>
    [Serializable]
    public class EmberStreamException : System.IO.IOException
    {
        public EmberResult Result { get; private set; }

        public EmberStreamException(EmberResult result, string message)
            : base(message)
        {
            Result = result;
        }

        internal EmberStreamException(EmberResult result, string message, bool byEngine)
            : base(message)
        {
            Result = result;
            _byEngine = byEngine;
        }

        readonly bool _byEngine;

        /// <summary>The engine ended the request for reasons that are not the handler's fault.</summary>
        internal bool EndedByEngine
        {
            get { return _byEngine || Result == EmberResult.ClientGone || Result == EmberResult.TimedOut || Result == EmberResult.TooLarge; }
        }
    }
}
