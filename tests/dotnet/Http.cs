// A minimal HTTP/1.1 client over raw sockets (one request per connection, Connection: close),
// so the tests control exactly what is sent and are not limited by HttpWebRequest's pools.
using System;
using System.Collections.Generic;
using System.IO;
using System.Net.Sockets;
using System.Text;
using System.Threading.Tasks;

namespace EmberTests
{
    sealed class HttpResult
    {
        public int Status;
        public Dictionary<string, string> Headers = new Dictionary<string, string>(StringComparer.OrdinalIgnoreCase);
        public byte[] Body;
        public string Text { get { return Encoding.UTF8.GetString(Body); } }
    }

    static class Http
    {
        public static HttpResult Get(int port, string target, params string[] headers)
        {
            return Send(port, "GET", target, null, headers);
        }

        public static HttpResult Send(int port, string method, string target, byte[] body, params string[] headers)
        {
            return SendAsync(port, method, target, body, headers).GetAwaiter().GetResult();
        }

        public static async Task<HttpResult> SendAsync(int port, string method, string target, byte[] body, params string[] headers)
        {
            var head = new StringBuilder();
            head.Append(method).Append(' ').Append(target).Append(" HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n");
            foreach (string h in headers) head.Append(h).Append("\r\n");
            if (body != null) head.Append("Content-Length: ").Append(body.Length).Append("\r\n");
            head.Append("\r\n");
            byte[] headBytes = Encoding.UTF8.GetBytes(head.ToString());
            using (var client = new TcpClient())
            {
                client.NoDelay = true;
                await client.ConnectAsync("127.0.0.1", port).ConfigureAwait(false);
                NetworkStream s = client.GetStream();
                var all = new MemoryStream();
                all.Write(headBytes, 0, headBytes.Length);
                if (body != null) all.Write(body, 0, body.Length);
                byte[] req = all.ToArray();
                await s.WriteAsync(req, 0, req.Length).ConfigureAwait(false);
                var resp = new MemoryStream();
                var buf = new byte[65536];
                int n;
                while ((n = await s.ReadAsync(buf, 0, buf.Length).ConfigureAwait(false)) > 0) resp.Write(buf, 0, n);
                return Parse(resp.ToArray(), method == "HEAD");
            }
        }

        static HttpResult Parse(byte[] raw, bool head)
        {
            int end = -1;
            for (int i = 0; i + 3 < raw.Length; i++)
            {
                if (raw[i] == '\r' && raw[i + 1] == '\n' && raw[i + 2] == '\r' && raw[i + 3] == '\n') { end = i; break; }
            }
            if (end < 0) throw new IOException("no complete response head (" + raw.Length + " bytes)");
            string[] lines = Encoding.UTF8.GetString(raw, 0, end).Split(new[] { "\r\n" }, StringSplitOptions.None);
            var r = new HttpResult { Status = int.Parse(lines[0].Split(' ')[1]) };
            for (int i = 1; i < lines.Length; i++)
            {
                int c = lines[i].IndexOf(':');
                string k = lines[i].Substring(0, c).Trim(), v = lines[i].Substring(c + 1).Trim();
                string prev;
                r.Headers[k] = r.Headers.TryGetValue(k, out prev) ? prev + ", " + v : v;
            }
            int bodyLen = raw.Length - end - 4;
            string cl;
            if (!head && r.Headers.TryGetValue("content-length", out cl)) bodyLen = Math.Min(bodyLen, int.Parse(cl));
            if (head) bodyLen = 0;
            r.Body = new byte[bodyLen];
            Array.Copy(raw, end + 4, r.Body, 0, bodyLen);
            return r;
        }
    }
}
