using System;
using System.Collections.Generic;

namespace Ember
{
    /// <summary>
    /// What will be sent: status, headers and body. Nothing crosses to the engine until the
    /// handler returns (or its Task completes, or <see cref="EmberContext.Respond"/> is called);
    /// then status, headers and body go in ONE native call. Content-Length is the engine's.
    /// </summary>
    public sealed class EmberResponse
    {
        internal const string TextPlain = "text/plain; charset=utf-8";
        internal const string ApplicationJson = "application/json";
        internal const string OctetStream = "application/octet-stream";

        int _status = 200;
        string _contentType;
        List<KeyValuePair<string, string>> _headers;
        internal string BodyText;
        internal byte[] BodyBytes;
        internal int BodyOffset, BodyCount;
        internal bool NoCopy;
        /// <summary>Set by <see cref="Answer"/> and cleared by every change: the response is that
        /// prepared answer's content, so it is sent with it.</summary>
        internal EmberAnswer Prepared;
        readonly EmberContext _ctx;   // null for a detached response (500 fallbacks)

        public EmberResponse() { }

        internal EmberResponse(EmberContext ctx) { _ctx = ctx; }

        /// <summary>HTTP status, 200 unless set (100..999).</summary>
        public int StatusCode
        {
            get { return _status; }
            set
            {
                if (value < 100 || value > 999) throw new ArgumentOutOfRangeException("value", "status must be 100..999");
                _status = value;
                Prepared = null;
            }
        }

        /// <summary>The Content-Type header (null = none).</summary>
        public string ContentType
        {
            get { return _contentType; }
            set
            {
                // A value answered with before (the same string) was checked then.
                if (value != null && !ContentTypes.Known(value)) CheckValue(value);
                _contentType = value;
                Prepared = null;
            }
        }

        /// <summary>Extra headers in the order set.</summary>
        internal List<KeyValuePair<string, string>> HeaderList { get { return _headers; } }

        /// <summary>Adds a header line (repeats allowed, e.g. Set-Cookie).</summary>
        public void AddHeader(string name, string value)
        {
            CheckName(name);
            if (value == null) throw new ArgumentNullException("value");
            CheckValue(value);
            Prepared = null;
            if (string.Equals(name, "Content-Type", StringComparison.OrdinalIgnoreCase)) { _contentType = value; return; }
            if (_headers == null) _headers = new List<KeyValuePair<string, string>>(4);
            _headers.Add(new KeyValuePair<string, string>(name, value));
        }

        /// <summary>Sets a header, replacing earlier ones of that name; null removes it.</summary>
        public void SetHeader(string name, string value)
        {
            CheckName(name);
            if (string.Equals(name, "Content-Type", StringComparison.OrdinalIgnoreCase)) { ContentType = value; return; }
            Prepared = null;
            if (_headers != null) _headers.RemoveAll(h => string.Equals(h.Key, name, StringComparison.OrdinalIgnoreCase));
            if (value != null) AddHeader(name, value);
        }

        /// <summary>A header set so far (Content-Type included), or null.</summary>
        public string GetHeader(string name)
        {
            if (string.Equals(name, "Content-Type", StringComparison.OrdinalIgnoreCase)) return _contentType;
            if (_headers == null) return null;
            foreach (var h in _headers)
            {
                if (string.Equals(h.Key, name, StringComparison.OrdinalIgnoreCase)) return h.Value;
            }
            return null;
        }

        /// <summary>UTF-8 text, "text/plain; charset=utf-8".</summary>
        public void Text(string text) { Text(text, 200); }

        public void Text(string text, int statusCode)
        {
            StatusCode = statusCode;
            _contentType = TextPlain;
            SetBody(text ?? string.Empty);
        }

        /// <summary>A JSON document you have already serialized, "application/json".</summary>
        public void Json(string json) { Json(json, 200); }

        public void Json(string json, int statusCode)
        {
            StatusCode = statusCode;
            _contentType = ApplicationJson;
            SetBody(json ?? string.Empty);
        }

        /// <summary>Raw bytes (copied by the engine when sent).</summary>
        public void Bytes(byte[] body, string contentType)
        {
            if (body == null) throw new ArgumentNullException("body");
            Bytes(body, 0, body.Length, contentType);
        }

        public void Bytes(byte[] body) { Bytes(body, OctetStream); }

        public void Bytes(byte[] body, int offset, int count, string contentType)
        {
            if (body == null) throw new ArgumentNullException("body");
            if (offset < 0 || count < 0 || offset > body.Length - count) throw new ArgumentOutOfRangeException("count");
            ContentType = contentType;   // also ends a prepared answer
            BodyText = null;
            BodyBytes = body;
            BodyOffset = offset;
            BodyCount = count;
            NoCopy = false;
        }

        /// <summary>
        /// Raw bytes sent without a copy: the array stays pinned until the engine has written it.
        /// The caller must not change the array afterwards (share it only if it never changes).
        /// </summary>
        public void BytesNoCopy(byte[] body, string contentType)
        {
            Bytes(body, contentType);
            NoCopy = true;
        }

        /// <summary>
        /// Starts a streamed answer now, with <see cref="StatusCode"/>, <see cref="ContentType"/> and
        /// the headers set so far, and returns its body: every write goes to the client as it comes
        /// (HTTP/1.1 chunked, HTTP/2 DATA frames), with backpressure (see
        /// <see cref="EmberResponseStream"/>). The answer ends when the stream is disposed or the
        /// handler returns (its Task completes); a handler that throws cuts it. Setting a
        /// Content-Length header first sends the body length-delimited instead (a body that ends
        /// short or runs over is cut).
        /// Throws InvalidOperationException when the response was already sent, and
        /// <see cref="EmberStreamException"/> when the client left or the handler timeout answered.
        /// </summary>
        public EmberResponseStream StartStream()
        {
            if (_ctx == null) throw new InvalidOperationException("this response belongs to no request");
            return _ctx.StartStream();
        }

        /// <summary>Sets the status (and Content-Type, unless null), then <see cref="StartStream()"/>.</summary>
        public EmberResponseStream StartStream(int statusCode, string contentType = null)
        {
            StatusCode = statusCode;
            if (contentType != null) ContentType = contentType;
            return StartStream();
        }

        /// <summary>Sets a text body without touching status or Content-Type.</summary>
        public void Write(string text) { SetBody(text ?? string.Empty); }

        /// <summary>Just a status (and an empty body).</summary>
        public void Status(int statusCode)
        {
            StatusCode = statusCode;
            BodyText = null;
            BodyBytes = null;
        }

        /// <summary>A redirect (302 unless given).</summary>
        public void Redirect(string location, int statusCode = 302)
        {
            SetHeader("Location", location);
            Status(statusCode);
        }

        void SetBody(string text)
        {
            BodyText = text;
            BodyBytes = null;
            NoCopy = false;
            Prepared = null;
        }

        /// <summary>
        /// Answers with a prepared <see cref="EmberAnswer"/>: the response takes its status,
        /// headers and body, and is sent with one short engine call (nothing encoded, copied or
        /// parsed per request). Any later change to the response sends it the ordinary way.
        /// </summary>
        public void Answer(EmberAnswer answer)
        {
            if (answer == null) throw new ArgumentNullException("answer");
            EmberResponse c = answer.Content;
            _status = c._status;
            _contentType = c._contentType;
            _headers = c._headers == null ? null : new List<KeyValuePair<string, string>>(c._headers);
            BodyText = null;
            BodyBytes = c.BodyBytes;
            BodyOffset = c.BodyOffset;
            BodyCount = c.BodyCount;
            NoCopy = false;
            Prepared = answer;
        }

        /// <summary>Back to an empty 200 (used before writing a 500 for a failed handler).</summary>
        internal void Reset()
        {
            _status = 200;
            _contentType = null;
            _headers = null;
            BodyText = null;
            BodyBytes = null;
            NoCopy = false;
            Prepared = null;
        }

        internal static void CheckHeader(string name, string value)
        {
            CheckName(name);
            if (value == null) throw new ArgumentNullException("value");
            CheckValue(value);
        }

        static void CheckName(string name)
        {
            if (string.IsNullOrEmpty(name)) throw new ArgumentException("header name must not be empty", "name");
            foreach (char c in name)
            {
                if (c <= ' ' || c >= 0x7f || c == ':' || c == '(' || c == ')' || c == ',' || c == '/' || c == ';' ||
                    c == '<' || c == '>' || c == '=' || c == '?' || c == '@' || c == '[' || c == ']' || c == '\\' ||
                    c == '"' || c == '{' || c == '}')
                    throw new ArgumentException("invalid character in header name: " + name, "name");
            }
        }

        static void CheckValue(string value)
        {
            foreach (char c in value)
            {
                if (c == '\r' || c == '\n' || c == '\0')
                    throw new ArgumentException("header values must not contain CR, LF or NUL", "value");
            }
        }
    }
}
