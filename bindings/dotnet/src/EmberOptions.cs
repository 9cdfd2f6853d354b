using System;
using System.Collections.Generic;

namespace Ember
{
    /// <summary>Where handlers run.</summary>
    public enum EmberDispatch
    {
        /// <summary>On the engine's I/O thread: fastest; the handler must not block
        /// (await instead of Thread.Sleep / .Result).</summary>
        Inline = 0,
        /// <summary>On a bounded pool of long-lived engine threads: blocking is safe, and every
        /// request pays a thread hand-off.</summary>
        Pool = 1,
        /// <summary>The default: on the I/O thread while another I/O thread stays free, else on the
        /// pool: a blocked handler (Thread.Sleep, a database call) holds only its own connection,
        /// fast ones pay no hand-off, so it runs at Inline's speed and is safe for blocking code.
        /// Blocking on the handler's own streamed answer or body (Write / Read that must wait)
        /// throws there as under Inline; use the async calls, or MapPooled. The System.Web and
        /// OWIN adapters always get a pool thread (EMBER_ROUTE_POOL), streamed-body routes too.</summary>
        Auto = 2,
    }

    /// <summary>Log levels (the engine's numbers).</summary>
    public enum EmberLogLevel
    {
        Error = 1,
        Warn = 2,
        Info = 3,
        Debug = 4,
        /// <summary>An access log line (Options.AccessLogToLogEvent); arrives whatever LogLevel is.</summary>
        Access = 5,
    }

    /// <summary>
    /// Server settings, read at each <see cref="EmberServer.Start()"/>. Null / unset values keep
    /// the engine's defaults.
    /// </summary>
    public sealed partial class EmberOptions
    {
        public EmberOptions()
        {
            Host = "127.0.0.1";
            Dispatch = EmberDispatch.Auto;
            LogLevel = EmberLogLevel.Warn;
            ListenAddresses = new List<string>();
            TrustedProxies = new List<string>();
            WebSocketReceiveQueueBytes = 1 << 20;
        }

        /// <summary>Address used by <see cref="EmberServer.Start(int)"/>; default 127.0.0.1
        /// ("0.0.0.0" for every interface, "::1" for IPv6 loopback).</summary>
        public string Host { get; set; }

        /// <summary>Extra listen addresses ("127.0.0.1:8080", "[::1]:0"), used by
        /// <see cref="EmberServer.Start()"/>.</summary>
        public IList<string> ListenAddresses { get; private set; }

        /// <summary>Where handlers run; default <see cref="EmberDispatch.Auto"/>.</summary>
        public EmberDispatch Dispatch { get; set; }

        /// <summary>I/O threads; 0 = one per core.</summary>
        public int Workers { get; set; }

        /// <summary>Handler threads in Pool mode; 0 = engine default.</summary>
        public int PoolThreads { get; set; }

        /// <summary>Request body limit (413 beyond it); engine default 16 MiB.</summary>
        public long? MaxBodyBytes { get; set; }

        /// <summary>Request head limit (431 beyond it); engine default 16384, minimum 8192.</summary>
        public int? MaxHeaderBytes { get; set; }

        /// <summary>Header count limit (431 beyond it); engine default 100.</summary>
        public int? MaxHeaders { get; set; }

        /// <summary>Time to receive a request head (408 + close); engine default 10 s; Zero = off.</summary>
        public TimeSpan? HeaderTimeout { get; set; }

        /// <summary>Keep-alive idle close; engine default 30 s; Zero = off.</summary>
        public TimeSpan? IdleTimeout { get; set; }

        /// <summary>Time a handler has to answer (the engine answers 503 after it); engine default
        /// 30 s; Zero = off.</summary>
        public TimeSpan? HandlerTimeout { get; set; }

        /// <summary>Concurrent connections; engine default 10000.</summary>
        public int? MaxConnections { get; set; }

        /// <summary>A path the engine answers itself for GET and HEAD, for load balancers' health
        /// checks: 200 {"status": "ok"}, or 503 {"status": "draining"} after
        /// <see cref="EmberServer.Drain"/>. Null (default) = none.</summary>
        public string HealthPath { get; set; }

        /// <summary>Proxies ("10.0.0.0/8", "127.0.0.1", "::1/128") whose Forwarded /
        /// X-Forwarded-For / X-Forwarded-Proto headers and PROXY protocol headers name the client
        /// (<see cref="EmberRequest.RemoteAddress"/>); from any other peer they are ignored.</summary>
        public IList<string> TrustedProxies { get; private set; }

        /// <summary>Body limit of routes mapped with streamBody: true (413 beyond it); engine default
        /// 1 GiB. They hold a small window, not the body, so it may be far above MaxBodyBytes.</summary>
        public long? MaxStreamBodyBytes { get; set; }

        /// <summary>Minimum average request body rate in bytes/s after a grace period (408 below
        /// it); engine default 240; 0 = off.</summary>
        public long? MinBodyRate { get; set; }

        /// <summary>Bytes a streamed answer may have queued before writes wait; engine default 256 KiB.</summary>
        public long? StreamQueueBytes { get; set; }

        /// <summary>Largest WebSocket message received (close 1009 beyond it); engine default 1 MiB.</summary>
        public long? WebSocketMaxMessageBytes { get; set; }

        /// <summary>Bytes a WebSocket may have queued to send before SendAsync waits; engine default 1 MiB.</summary>
        public long? WebSocketQueueBytes { get; set; }

        /// <summary>Idle WebSockets are pinged this often and cut when a ping goes unanswered;
        /// engine default 30 s; Zero = no pings.</summary>
        public TimeSpan? WebSocketPingInterval { get; set; }

        /// <summary>Open WebSocket connections per endpoint (503 beyond it); engine default 100000.</summary>
        public int? WebSocketMaxConnections { get; set; }

        /// <summary>Bytes of received messages a WebSocket session may leave unread (not taken by
        /// ReceiveAsync) before the connection is closed with 1008; default 1 MiB. One message
        /// always fits, whatever its size.</summary>
        public long WebSocketReceiveQueueBytes { get; set; }

        /// <summary>Lowest engine log level forwarded to <see cref="EmberServer.Log"/>.</summary>
        public EmberLogLevel LogLevel { get; set; }

        /// <summary>Time <see cref="EmberServer.Dispose"/> lets in-flight requests finish before
        /// force-closing them; default Zero (close at once).</summary>
        public TimeSpan DisposeTimeout { get; set; }
    }

    /// <summary>An engine log line, or a message of the binding (then Exception may be set).</summary>
    public sealed class EmberLogEventArgs : EventArgs
    {
        internal EmberLogEventArgs(EmberLogLevel level, string message, Exception exception)
        {
            Level = level;
            Message = message;
            Exception = exception;
        }

        public EmberLogLevel Level { get; private set; }
        public string Message { get; private set; }
        public Exception Exception { get; private set; }
    }

    /// <summary>A handler threw (the client got a 500), or an answer could not be sent.</summary>
    public sealed class EmberErrorEventArgs : EventArgs
    {
        internal EmberErrorEventArgs(Exception exception, string method, string path)
        {
            Exception = exception;
            Method = method;
            Path = path;
        }

        public Exception Exception { get; private set; }
        /// <summary>Method of the failing request (null if unknown).</summary>
        public string Method { get; private set; }
        /// <summary>Path of the failing request (null if unknown).</summary>
        public string Path { get; private set; }
    }

    /// <summary>Engine counters (<c>ember_stats</c>).</summary>
    public sealed class EmberStats
    {
        public long Requests { get; internal set; }
        public long Responses1xx { get; internal set; }
        public long Responses2xx { get; internal set; }
        public long Responses3xx { get; internal set; }
        public long Responses4xx { get; internal set; }
        public long Responses5xx { get; internal set; }
        public long ActiveConnections { get; internal set; }
        public long TotalConnections { get; internal set; }
        public long ActiveRequests { get; internal set; }
        public long BytesRead { get; internal set; }
        public long BytesWritten { get; internal set; }
        /// <summary>Answers with a status of 600-999.</summary>
        public long ResponsesOther { get; internal set; }
        /// <summary>Requests whose data the engine keeps for the host (unanswered, or expired and not yet acknowledged).</summary>
        public long HeldRequests { get; internal set; }
    }
}
