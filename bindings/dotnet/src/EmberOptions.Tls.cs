using System.Collections.Generic;

namespace Ember
{
    public sealed partial class EmberOptions
    {
        List<EmberTlsListener> _tlsListeners;

        /// <summary>TLS listeners opened by Start next to the plain ones (HTTPS; HTTP/2 by ALPN).
        /// Their ports: <see cref="EmberServer.TlsPorts"/>.</summary>
        public IList<EmberTlsListener> TlsListeners { get { return _tlsListeners ?? (_tlsListeners = new List<EmberTlsListener>()); } }

        /// <summary>Appends an access log line per answered request to this file (opened at Start;
        /// <see cref="EmberServer.ReopenAccessLog"/> for logrotate). Off when null (default).</summary>
        public string AccessLogPath { get; set; }

        /// <summary>Sends access log lines to <see cref="EmberServer.Log"/> with level
        /// <see cref="EmberLogLevel.Access"/> instead of a file (when AccessLogPath is null).</summary>
        public bool AccessLogToLogEvent { get; set; }

        /// <summary>Combined (default) or Json.</summary>
        public EmberAccessLogFormat AccessLogFormat
        {
            get { return _accessLogFormat == 0 ? EmberAccessLogFormat.Combined : _accessLogFormat; }
            set { _accessLogFormat = value; }
        }
        EmberAccessLogFormat _accessLogFormat;

        /// <summary>A path such as "/metrics" the engine answers with Prometheus text; "" keeps the
        /// metrics for <see cref="EmberServer.GetMetrics"/> only; null (default) turns them off.</summary>
        public string MetricsPath { get; set; }
    }
}
