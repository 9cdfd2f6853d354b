using System;
using System.Collections.Generic;
using System.Runtime.InteropServices;
using System.Threading;
using Ember.Interop;

namespace Ember
{
    /// <summary>Turns an EmberResponse into its one answer call: a prepared answer's
    /// ember_request_respond_answer, ember_request_respond_small when Content-Type is the only
    /// header, else ember_request_respond with a header block.</summary>
    internal static unsafe class Wire
    {
        const int ScratchKeep = 256 * 1024;   // larger one-off buffers are not kept per thread

        [ThreadStatic] static byte[] t_scratch;

        internal static int Send(ulong req, EmberResponse r)
        {
            EmberAnswer prepared = r.Prepared;
            if (prepared != null) return prepared.Respond(req);
            var list = r.HeaderList;
            if ((list == null || list.Count == 0) && !r.NoCopy) return SendSmall(req, r);
            string text = r.BodyText;
            int headerMax = HeaderMax(r);
            int bodyMax = text == null ? 0 : Utf8.Encoding.GetMaxByteCount(text.Length);
            int need = headerMax + bodyMax;
            byte[] buf = t_scratch;
            if (buf == null || buf.Length < need)
            {
                buf = new byte[Math.Max(need, 4096)];
                if (buf.Length <= ScratchKeep) t_scratch = buf;
            }
            fixed (byte* b = buf)
            {
                int hlen = WriteHeaders(r, b);
                ushort status = (ushort)r.StatusCode;
                if (text != null)
                {
                    int blen = 0;
                    if (text.Length > 0)
                    {
                        fixed (char* c = text) blen = Utf8.Encoding.GetBytes(c, text.Length, b + hlen, buf.Length - hlen);
                    }
                    return NativeMethods.ember_request_respond(req, status, b, (UIntPtr)hlen, b + hlen, (UIntPtr)blen);
                }
                byte[] body = r.BodyBytes;
                if (body == null || r.BodyCount == 0)
                    return NativeMethods.ember_request_respond(req, status, b, (UIntPtr)hlen, null, UIntPtr.Zero);
                if (r.NoCopy) return SendPinned(req, status, b, hlen, body, r.BodyOffset, r.BodyCount);
                fixed (byte* p = body)
                    return NativeMethods.ember_request_respond(req, status, b, (UIntPtr)hlen, p + r.BodyOffset, (UIntPtr)r.BodyCount);
            }
        }

        /// <summary>No header but Content-Type: ember_request_respond_small, with the type's
        /// bytes from <see cref="ContentTypes"/>; no header block to write here or to parse in
        /// the engine.</summary>
        static int SendSmall(ulong req, EmberResponse r)
        {
            string type = r.ContentType;
            byte[] ct = type == null ? Utf8.Empty : ContentTypes.Utf8(type);
            ushort status = (ushort)r.StatusCode;
            string text = r.BodyText;
            fixed (byte* t = ct)
            {
                if (text != null)
                {
                    if (text.Length == 0)
                        return NativeMethods.ember_request_respond_small(req, status, t, (uint)ct.Length, null, 0);
                    int need = Utf8.Encoding.GetMaxByteCount(text.Length);
                    byte[] buf = t_scratch;
                    if (buf == null || buf.Length < need)
                    {
                        buf = new byte[Math.Max(need, 4096)];
                        if (buf.Length <= ScratchKeep) t_scratch = buf;
                    }
                    fixed (byte* b = buf)
                    {
                        int blen;
                        fixed (char* c = text) blen = Utf8.Encoding.GetBytes(c, text.Length, b, buf.Length);
                        return NativeMethods.ember_request_respond_small(req, status, t, (uint)ct.Length, b, (uint)blen);
                    }
                }
                byte[] body = r.BodyBytes;
                if (body == null || r.BodyCount == 0)
                    return NativeMethods.ember_request_respond_small(req, status, t, (uint)ct.Length, null, 0);
                fixed (byte* p = body)
                    return NativeMethods.ember_request_respond_small(req, status, t, (uint)ct.Length, p + r.BodyOffset, (uint)r.BodyCount);
            }
        }

        /// <summary>ember_answer_new with the response's status, headers and body.</summary>
        internal static ulong Prepare(EmberResponse r)
        {
            var buf = new byte[Math.Max(HeaderMax(r), 1)];
            ulong answer;
            int rc;
            fixed (byte* b = buf)
            fixed (byte* p = r.BodyBytes)
            {
                int hlen = WriteHeaders(r, b);
                rc = NativeMethods.ember_answer_new((ushort)r.StatusCode, b, (UIntPtr)hlen, p, (UIntPtr)r.BodyCount, out answer);
            }
            Native.Check(rc, "ember_answer_new");
            return answer;
        }

        /// <summary>ember_response_begin with the response's status and headers.</summary>
        internal static int Begin(ulong req, EmberResponse r)
        {
            int need = HeaderMax(r);
            byte[] buf = t_scratch;
            if (buf == null || buf.Length < need)
            {
                buf = new byte[Math.Max(need, 4096)];
                if (buf.Length <= ScratchKeep) t_scratch = buf;
            }
            fixed (byte* b = buf)
            {
                int hlen = WriteHeaders(r, b);
                return NativeMethods.ember_response_begin(req, (ushort)r.StatusCode, b, (UIntPtr)hlen);
            }
        }

        static int HeaderMax(EmberResponse r)
        {
            int n = 0;
            if (r.ContentType != null) n += 16 + 3 * r.ContentType.Length;
            var list = r.HeaderList;
            if (list != null)
            {
                for (int i = 0; i < list.Count; i++) n += 4 + 3 * (list[i].Key.Length + list[i].Value.Length);
            }
            return n;
        }

        static int WriteHeaders(EmberResponse r, byte* b)
        {
            int pos = 0;
            if (r.ContentType != null) pos = Line(b, pos, "Content-Type", r.ContentType);
            var list = r.HeaderList;
            if (list != null)
            {
                for (int i = 0; i < list.Count; i++) pos = Line(b, pos, list[i].Key, list[i].Value);
            }
            return pos;
        }

        static int Line(byte* b, int pos, string name, string value)
        {
            pos = Put(b, pos, name);
            b[pos++] = (byte)':';
            b[pos++] = (byte)' ';
            pos = Put(b, pos, value);
            b[pos++] = (byte)'\r';
            b[pos++] = (byte)'\n';
            return pos;
        }

        static int Put(byte* b, int pos, string s)
        {
            for (int i = 0; i < s.Length; i++)
            {
                char c = s[i];
                if (c >= 0x80)
                {
                    fixed (char* p = s) return pos + Utf8.Encoding.GetBytes(p, s.Length, b + pos, 3 * s.Length);
                }
            }
            for (int i = 0; i < s.Length; i++) b[pos + i] = (byte)s[i];
            return pos + s.Length;
        }

        // ---- zero-copy bodies: pinned until the engine's release callback ----

        static long s_nextPin;
        static readonly Dictionary<long, GCHandle> s_pins = new Dictionary<long, GCHandle>();
        // Static: lives as long as the AppDomain, so the engine can always call it.
        static readonly EmberReleaseFn s_unpin = Unpin;

        static int SendPinned(ulong req, ushort status, byte* headers, int hlen, byte[] body, int offset, int count)
        {
            GCHandle pin = GCHandle.Alloc(body, GCHandleType.Pinned);
            long id = Interlocked.Increment(ref s_nextPin);
            lock (s_pins) s_pins.Add(id, pin);
            byte* p = (byte*)pin.AddrOfPinnedObject();
            int rc = NativeMethods.ember_request_respond_nocopy(req, status, headers, (UIntPtr)hlen,
                p + offset, (UIntPtr)count, s_unpin, new IntPtr(id));
            if (rc != NativeMethods.EMBER_OK) Unpin(new IntPtr(id));   // on failure nothing was taken
            return rc;
        }

        /// <summary>Frees the pin exactly once, whatever the engine does (a second call finds nothing).</summary>
        static void Unpin(IntPtr data)
        {
            try
            {
                GCHandle pin;
                long id = data.ToInt64();
                lock (s_pins)
                {
                    if (!s_pins.TryGetValue(id, out pin)) return;
                    s_pins.Remove(id);
                }
                pin.Free();
            }
            catch
            {
                // never let an exception cross into native code
            }
        }

        internal static int PinnedCount { get { lock (s_pins) return s_pins.Count; } }
    }
}
