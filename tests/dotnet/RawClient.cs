// A raw HTTP/1.1 client that reads answers piece by piece (head, then chunks as they come), for
// the streaming tests: they need to see chunk framing, a cut answer, and a client that stops
// reading or vanishes.
using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.IO;
using System.Net.Sockets;
using System.Text;

namespace EmberTests
{
    sealed class RawClient : IDisposable
    {
        readonly TcpClient _tcp;
        readonly NetworkStream _s;
        readonly byte[] _buf = new byte[65536];
        int _pos, _len;

        public int Status;
        public Dictionary<string, string> Headers = new Dictionary<string, string>(StringComparer.OrdinalIgnoreCase);

        public RawClient(int port, int receiveBuffer = 0, int timeoutMs = 10000)
        {
            _tcp = new TcpClient();
            if (receiveBuffer > 0) _tcp.ReceiveBufferSize = receiveBuffer;
            _tcp.NoDelay = true;
            _tcp.Connect("127.0.0.1", port);
            _s = _tcp.GetStream();
            _s.ReadTimeout = timeoutMs;
        }

        public Socket Socket { get { return _tcp.Client; } }

        public void Send(string text) { Send(Encoding.UTF8.GetBytes(text)); }

        public void Send(byte[] data) { _s.Write(data, 0, data.Length); }

        public void Send(byte[] data, int offset, int count) { _s.Write(data, offset, count); }

        /// <summary>GET target (keep-alive).</summary>
        public void Get(string target, params string[] headers)
        {
            var sb = new StringBuilder("GET " + target + " HTTP/1.1\r\nHost: x\r\n");
            foreach (string h in headers) sb.Append(h).Append("\r\n");
            Send(sb.Append("\r\n").ToString());
        }

        bool Fill()
        {
            if (_pos < _len) return true;
            _pos = 0;
            _len = _s.Read(_buf, 0, _buf.Length);
            return _len > 0;
        }

        public string ReadLine()
        {
            var sb = new StringBuilder();
            while (true)
            {
                if (!Fill()) throw new EndOfStreamException("connection closed in a line (" + sb + ")");
                byte b = _buf[_pos++];
                if (b == '\n') return sb.ToString().TrimEnd('\r');
                sb.Append((char)b);
            }
        }

        /// <summary>Reads a response head; 1xx heads are returned too (call again for the final one).</summary>
        public int ReadHead()
        {
            Headers.Clear();
            string status = ReadLine();
            Status = int.Parse(status.Split(' ')[1]);
            string line;
            while ((line = ReadLine()).Length > 0)
            {
                int c = line.IndexOf(':');
                string k = line.Substring(0, c).Trim(), v = line.Substring(c + 1).Trim();
                string prev;
                Headers[k] = Headers.TryGetValue(k, out prev) ? prev + ", " + v : v;
            }
            return Status;
        }

        public byte[] ReadExactly(int n)
        {
            var a = new byte[n];
            int got = 0;
            while (got < n)
            {
                if (!Fill()) throw new EndOfStreamException("closed after " + got + " of " + n + " bytes");
                int take = Math.Min(n - got, _len - _pos);
                Buffer.BlockCopy(_buf, _pos, a, got, take);
                _pos += take;
                got += take;
            }
            return a;
        }

        /// <summary>The next chunk's data; null at the last (zero) chunk. Throws at a cut answer.</summary>
        public byte[] ReadChunk()
        {
            string size = ReadLine();
            int n = Convert.ToInt32(size.Split(';')[0].Trim(), 16);
            if (n == 0)
            {
                while (ReadLine().Length > 0) { }   // trailers
                return null;
            }
            byte[] data = ReadExactly(n);
            if (ReadLine().Length != 0) throw new IOException("chunk not followed by CRLF");
            return data;
        }

        /// <summary>The whole de-chunked body (Transfer-Encoding: chunked) or Content-Length body.</summary>
        public byte[] ReadBody()
        {
            string cl;
            if (Headers.TryGetValue("content-length", out cl)) return ReadExactly(int.Parse(cl));
            var all = new MemoryStream();
            byte[] c;
            while ((c = ReadChunk()) != null) all.Write(c, 0, c.Length);
            return all.ToArray();
        }

        /// <summary>Reads chunks until the answer ends; true if it was cut (the connection ended
        /// before the last chunk), false if it ended cleanly. What was read goes to <paramref name="got"/>.</summary>
        public bool ReadUntilCut(MemoryStream got)
        {
            try
            {
                byte[] c;
                while ((c = ReadChunk()) != null) got.Write(c, 0, c.Length);
                return false;
            }
            catch (IOException) { return true; }
        }

        /// <summary>True when the server closed the connection (reads 0) within the timeout.</summary>
        public bool ClosedByServer(int timeoutMs = 5000)
        {
            var sw = Stopwatch.StartNew();
            _s.ReadTimeout = timeoutMs;
            try
            {
                while (sw.ElapsedMilliseconds < timeoutMs)
                {
                    if (_pos < _len) { _pos = _len; continue; }
                    if (_s.Read(_buf, 0, _buf.Length) <= 0) return true;
                }
            }
            catch (IOException) { return true; }
            return false;
        }

        /// <summary>Closes with RST (linger 0): the server sees the client vanish at once.</summary>
        public void Reset()
        {
            _tcp.Client.LingerState = new LingerOption(true, 0);
            _tcp.Close();
        }

        public void Dispose() { _tcp.Close(); }
    }

    static class Wait
    {
        /// <summary>Polls until cond holds or timeoutMs passes (not a timing assertion: a bound
        /// on waiting for something that must happen).</summary>
        public static bool Until(Func<bool> cond, int timeoutMs = 10000)
        {
            var sw = Stopwatch.StartNew();
            while (!cond())
            {
                if (sw.ElapsedMilliseconds > timeoutMs) return false;
                System.Threading.Thread.Sleep(10);
            }
            return true;
        }
    }
}
