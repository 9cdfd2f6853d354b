using System;
using System.Collections.Generic;
using System.Text;
using System.Threading.Tasks;

namespace Ember
{
    /// <summary>
    /// A WebSocket upgrade request before it is accepted (the optional upgrade callback of
    /// <see cref="EmberServer.MapWebSocket(string, Func{EmberWebSocket, Task}, Action{EmberWebSocketUpgrade})"/>).
    /// Doing nothing accepts it; <see cref="Reject"/> answers it with an HTTP status instead.
    /// Runs on an engine thread (in Inline dispatch an I/O thread: do not block).
    /// </summary>
    public sealed class EmberWebSocketUpgrade
    {
        List<KeyValuePair<string, string>> _headers;
        IDictionary<object, object> _items;
        string _subProtocol;

        internal EmberWebSocketUpgrade(EmberRequest request) { Request = request; }

        /// <summary>The upgrade request (path, query, headers, route values).</summary>
        public EmberRequest Request { get; private set; }

        /// <summary>State handed on to <see cref="EmberWebSocket.Items"/>.</summary>
        public IDictionary<object, object> Items { get { return _items ?? (_items = new Dictionary<object, object>()); } }

        internal IDictionary<object, object> ItemsOrNull { get { return _items; } }

        /// <summary>The subprotocols the client offered (Sec-WebSocket-Protocol), in its order.</summary>
        public IList<string> RequestedSubProtocols
        {
            get
            {
                var list = new List<string>();
                string h = Request.GetHeader("sec-websocket-protocol");
                if (h == null) return list;
                foreach (string p in h.Split(','))
                {
                    string t = p.Trim();
                    if (t.Length > 0) list.Add(t);
                }
                return list;
            }
        }

        /// <summary>The subprotocol to answer with (one the client offered), or null for none.</summary>
        public string SubProtocol
        {
            get { return _subProtocol; }
            set
            {
                if (value != null && !RequestedSubProtocols.Contains(value))
                    throw new ArgumentException("the client did not offer the subprotocol '" + value + "'", "value");
                _subProtocol = value;
            }
        }

        /// <summary>An extra header on the 101 answer.</summary>
        public void AddHeader(string name, string value)
        {
            EmberResponse.CheckHeader(name, value);
            if (_headers == null) _headers = new List<KeyValuePair<string, string>>(2);
            _headers.Add(new KeyValuePair<string, string>(name, value));
        }

        /// <summary>Refuses the upgrade: the client gets this status (e.g. 403) and text, no WebSocket.</summary>
        public void Reject(int statusCode, string text = null)
        {
            if (statusCode < 200 || statusCode > 999) throw new ArgumentOutOfRangeException("statusCode", "status must be 200..999");
            RejectStatus = statusCode;
            RejectText = text;
        }

        internal int RejectStatus;
        internal string RejectText;

        internal string HeaderBlock()
        {
            var sb = new StringBuilder();
            if (_subProtocol != null) sb.Append("Sec-WebSocket-Protocol: ").Append(_subProtocol).Append("\r\n");
            if (_headers != null)
            {
                foreach (var h in _headers) sb.Append(h.Key).Append(": ").Append(h.Value).Append("\r\n");
            }
            return sb.ToString();
        }
    }

    /// <summary>A mapped WebSocket endpoint.</summary>
    internal sealed class WebSocketRoute
    {
        internal Func<EmberWebSocket, Task> Session;
        internal Action<EmberWebSocketUpgrade> OnUpgrade;
    }
}
