using System;
using System.Collections.Generic;
using System.Collections.Specialized;
using System.Globalization;
using System.IO;
using System.Net;
using System.Text;
using Ember.Interop;

namespace Ember
{
    /// <summary>
    /// The request being handled. In a synchronous handler every property reads the engine's
    /// memory lazily (nothing is copied that the handler does not ask for); once the answer is
    /// sent, values not read before are gone (reading them throws InvalidOperationException).
    /// For an async handler everything is copied before the handler starts, so it stays readable
    /// after any await and from any thread.
    /// </summary>
    public sealed unsafe class EmberRequest
    {
        // The engine's struct, read in place (a copy cost ~220 instructions per request under
        // Mono): it lives as long as its views, so only while _native. What may be read after
        // the answer is copied out below.
        readonly EmberRequestInfo* _info;
        readonly ulong _id;
        readonly uint _flags, _httpVersion;
        readonly long _contentLength, _bodyLength;
        // Cleared by the thread that answers, read by any thread that reads the request.
        volatile bool _native;

        string _method, _path, _rawQuery, _remote, _route;
        byte[] _body;
        string[] _headerNames, _headerValues, _paramNames, _paramValues;
        NameValueCollection _query, _headers;
        Dictionary<string, string> _routeValues;

        internal EmberRequest(EmberRequestInfo* info, string route)
        {
            _info = info;
            _id = info->Id;
            _flags = info->Flags;
            _httpVersion = info->HttpVersion;
            _contentLength = info->ContentLength;
            _bodyLength = (long)info->Body.Len.ToUInt64();
            _native = true;
            _route = route;
        }

        internal ulong Id { get { return _id; } }

        /// <summary>The request's context (for the events of a streamed body).</summary>
        internal EmberContext Context;

        Stream _bodyStream;

        /// <summary>True while the engine's views may be read.</summary>
        internal bool IsLive { get { return _native; } }

        /// <summary>Copy everything out of engine memory (before the handler's first await).</summary>
        internal void Materialize()
        {
            if (!_native) return;
            GC.KeepAlive(Method);
            GC.KeepAlive(Path);
            GC.KeepAlive(RawQuery);
            GC.KeepAlive(RemoteAddress);
            if (!IsBodyStreamed) GC.KeepAlive(Body);
            LoadHeaders();
            LoadParams();
            _native = false;
        }

        /// <summary>The answer was sent: the engine's views are no longer ours to read.</summary>
        internal void Close() { _native = false; }

        void CheckLive()
        {
            if (!_native)
                throw new InvalidOperationException(
                    "The request was already answered: read the request before answering it (or use an async handler, which copies it).");
        }

        /// <summary>"GET", "POST", ...</summary>
        public string Method
        {
            get
            {
                if (_method == null) { CheckLive(); _method = Utf8.Method(_info->Method); }
                return _method;
            }
        }

        /// <summary>The path as sent (percent-encoded), without the query.</summary>
        public string Path
        {
            get
            {
                if (_path == null) { CheckLive(); _path = Utf8.FromView(_info->Path); }
                return _path;
            }
        }

        /// <summary>The raw query string without '?' ("" if none).</summary>
        public string RawQuery
        {
            get
            {
                if (_rawQuery == null) { CheckLive(); _rawQuery = Utf8.FromView(_info->Query); }
                return _rawQuery;
            }
        }

        /// <summary>The query, percent-decoded ('+' is a space). Keys case-insensitive.</summary>
        public NameValueCollection Query
        {
            get
            {
                if (_query == null) _query = ParseQuery(RawQuery);
                return _query;
            }
        }

        /// <summary>The route pattern that matched, e.g. "/users/{id}".</summary>
        public string Route { get { return _route; } }

        /// <summary>"127.0.0.1:53412" or "[::1]:53412".</summary>
        public string RemoteAddress
        {
            get
            {
                if (_remote == null) { CheckLive(); _remote = Utf8.FromView(_info->RemoteAddr); }
                return _remote;
            }
        }

        public IPEndPoint RemoteEndPoint
        {
            get
            {
                string s = RemoteAddress;
                int colon = s.LastIndexOf(':');
                if (colon <= 0) return null;
                string host = s.Substring(0, colon).Trim('[', ']');
                IPAddress ip;
                int port;
                if (!IPAddress.TryParse(host, out ip)) return null;
                if (!int.TryParse(s.Substring(colon + 1), NumberStyles.None, CultureInfo.InvariantCulture, out port)) return null;
                return new IPEndPoint(ip, port);
            }
        }

        /// <summary>1.0, 1.1 or 2.0.</summary>
        public Version ProtocolVersion
        {
            get { return new Version((int)(_httpVersion / 10), (int)(_httpVersion % 10)); }
        }

        /// <summary>The whole request body (buffered by the engine up to the body limit). On a
        /// route mapped with <c>streamBody: true</c> it is not buffered: read <see cref="BodyStream"/>.</summary>
        public byte[] Body
        {
            get
            {
                if (_body == null)
                {
                    if (IsBodyStreamed)
                        throw new InvalidOperationException("this route streams its request body: read Request.BodyStream");
                    CheckLive();
                    _body = Utf8.ToArray(_info->Body);
                }
                return _body;
            }
        }

        /// <summary>True on routes mapped with <c>streamBody: true</c>: the body arrives through
        /// <see cref="BodyStream"/> as the client sends it, never whole in memory.</summary>
        public bool IsBodyStreamed { get { return (_flags & NativeMethods.EMBER_REQUEST_BODY_STREAMED) != 0; } }

        /// <summary>The body's declared length (Content-Length), or null when the client did not
        /// declare one (chunked; HTTP/2 without it) or sent no body.</summary>
        public long? ContentLength { get { return _contentLength >= 0 ? _contentLength : (long?)null; } }

        /// <summary>
        /// The body as a read-only stream. On a streamed-body route it reads from the client as the
        /// data arrives (<see cref="EmberRequestBodyStream"/>: Read blocks with a timeout, ReadAsync
        /// awaits; a few KiB whatever the size); elsewhere it reads the buffered <see cref="Body"/>.
        /// The same stream on every call.
        /// </summary>
        public Stream BodyStream
        {
            get
            {
                if (_bodyStream == null)
                {
                    if (IsBodyStreamed) _bodyStream = new EmberRequestBodyStream(Context, _id, _contentLength);
                    else _bodyStream = new MemoryStream(Body, false);
                }
                return _bodyStream;
            }
        }

        /// <summary>Length of the body in bytes.</summary>
        public long BodyLength
        {
            get
            {
                if (IsBodyStreamed) throw new InvalidOperationException("this route streams its request body: see ContentLength and BodyStream");
                return _body != null ? _body.Length : _bodyLength;
            }
        }

        /// <summary>The body decoded as UTF-8.</summary>
        public string ReadBodyAsString()
        {
            if (_body == null && _native && !IsBodyStreamed) return Utf8.FromView(_info->Body);
            return Utf8.Encoding.GetString(Body);
        }

        /// <summary>The body decoded with the given encoding.</summary>
        public string ReadBodyAsString(Encoding encoding)
        {
            if (encoding == null) throw new ArgumentNullException("encoding");
            return encoding.GetString(Body);
        }

        /// <summary>The Content-Type header, or null.</summary>
        public string ContentType { get { return GetHeader("content-type"); } }

        /// <summary>
        /// One header by name (case-insensitive); repeated headers joined with ", "; null if
        /// absent. Cheaper than <see cref="Headers"/>: it builds nothing else.
        /// </summary>
        public string GetHeader(string name)
        {
            if (name == null) throw new ArgumentNullException("name");
            if (_headerNames == null && _native)
            {
                string found = null;
                int n = (int)_info->HeaderCount.ToUInt64();
                EmberHeader* h = _info->Headers;
                for (int i = 0; i < n; i++)
                {
                    if (!Utf8.EqualsAsciiIgnoreCase(h[i].Name, name)) continue;
                    string v = Utf8.FromView(h[i].Value);
                    found = found == null ? v : found + ", " + v;
                }
                return found;
            }
            LoadHeaders();
            string result = null;
            for (int i = 0; i < _headerNames.Length; i++)
            {
                if (!string.Equals(_headerNames[i], name, StringComparison.OrdinalIgnoreCase)) continue;
                result = result == null ? _headerValues[i] : result + ", " + _headerValues[i];
            }
            return result;
        }

        /// <summary>All headers (names lower-case, in arrival order, lookups case-insensitive).</summary>
        public NameValueCollection Headers
        {
            get
            {
                if (_headers == null)
                {
                    LoadHeaders();
                    var c = new NameValueCollection(_headerNames.Length, StringComparer.OrdinalIgnoreCase);
                    for (int i = 0; i < _headerNames.Length; i++) c.Add(_headerNames[i], _headerValues[i]);
                    _headers = c;
                }
                return _headers;
            }
        }

        /// <summary>Headers as (name, value) pairs in arrival order, repeats kept apart.</summary>
        public IList<KeyValuePair<string, string>> HeaderList
        {
            get
            {
                LoadHeaders();
                var list = new List<KeyValuePair<string, string>>(_headerNames.Length);
                for (int i = 0; i < _headerNames.Length; i++)
                    list.Add(new KeyValuePair<string, string>(_headerNames[i], _headerValues[i]));
                return list;
            }
        }

        /// <summary>A route value ("{id}"), percent-decoded; null if the route has no such name.</summary>
        public string GetRouteValue(string name)
        {
            if (name == null) throw new ArgumentNullException("name");
            if (_paramNames == null && _native)
            {
                int n = (int)_info->ParamCount.ToUInt64();
                EmberHeader* p = _info->Params;
                for (int i = 0; i < n; i++)
                {
                    if (Utf8.EqualsOrdinal(p[i].Name, name)) return Utf8.FromView(p[i].Value);
                }
                return null;
            }
            LoadParams();
            for (int i = 0; i < _paramNames.Length; i++)
            {
                if (_paramNames[i] == name) return _paramValues[i];
            }
            return null;
        }

        /// <summary>All route values by name.</summary>
        public IReadOnlyDictionary<string, string> RouteValues
        {
            get
            {
                if (_routeValues == null)
                {
                    LoadParams();
                    var d = new Dictionary<string, string>(_paramNames.Length, StringComparer.Ordinal);
                    for (int i = 0; i < _paramNames.Length; i++) d[_paramNames[i]] = _paramValues[i];
                    _routeValues = d;
                }
                return _routeValues;
            }
        }

        void LoadHeaders()
        {
            if (_headerNames != null) return;
            CheckLive();
            int n = (int)_info->HeaderCount.ToUInt64();
            var names = new string[n];
            var values = new string[n];
            EmberHeader* h = _info->Headers;
            for (int i = 0; i < n; i++)
            {
                names[i] = Utf8.FromView(h[i].Name);
                values[i] = Utf8.FromView(h[i].Value);
            }
            _headerValues = values;
            _headerNames = names;
        }

        void LoadParams()
        {
            if (_paramNames != null) return;
            CheckLive();
            int n = (int)_info->ParamCount.ToUInt64();
            var names = new string[n];
            var values = new string[n];
            EmberHeader* p = _info->Params;
            for (int i = 0; i < n; i++)
            {
                names[i] = Utf8.FromView(p[i].Name);
                values[i] = Utf8.FromView(p[i].Value);
            }
            _paramValues = values;
            _paramNames = names;
        }

        internal static NameValueCollection ParseQuery(string raw)
        {
            var c = new NameValueCollection(StringComparer.OrdinalIgnoreCase);
            if (string.IsNullOrEmpty(raw)) return c;
            foreach (string part in raw.Split('&'))
            {
                if (part.Length == 0) continue;
                int eq = part.IndexOf('=');
                string k = eq < 0 ? part : part.Substring(0, eq);
                string v = eq < 0 ? string.Empty : part.Substring(eq + 1);
                c.Add(Unescape(k), Unescape(v));
            }
            return c;
        }

        static string Unescape(string s)
        {
            if (s.IndexOf('+') >= 0) s = s.Replace('+', ' ');
            if (s.IndexOf('%') < 0) return s;
            try { return Uri.UnescapeDataString(s); }
            catch (UriFormatException) { return s; }
        }
    }
}
