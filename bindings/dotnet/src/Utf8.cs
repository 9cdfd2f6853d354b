using System;
using System.Text;
using Ember.Interop;

namespace Ember
{
    /// <summary>Explicit UTF-8 marshalling (the default string marshalling is ANSI on .NET Framework).</summary>
    internal static unsafe class Utf8
    {
        internal static readonly UTF8Encoding Encoding = new UTF8Encoding(false, false);

        /// <summary>NUL-terminated UTF-8 copy of s; null stays null.</summary>
        internal static byte[] Z(string s)
        {
            if (s == null) return null;
            if (s.IndexOf('\0') >= 0) throw new ArgumentException("text must not contain NUL characters");
            int n = Encoding.GetByteCount(s);
            var buf = new byte[n + 1];
            Encoding.GetBytes(s, 0, s.Length, buf, 0);
            return buf;
        }

        internal static string FromView(EmberStr v)
        {
            int len = checked((int)v.Len.ToUInt64());
            if (len == 0 || v.Ptr == null) return string.Empty;
            return Encoding.GetString(v.Ptr, len);
        }

        internal static string FromCString(IntPtr p)
        {
            if (p == IntPtr.Zero) return string.Empty;
            byte* b = (byte*)p;
            int n = 0;
            while (b[n] != 0) n++;
            return n == 0 ? string.Empty : Encoding.GetString(b, n);
        }

        internal static byte[] ToArray(EmberStr v)
        {
            int len = checked((int)v.Len.ToUInt64());
            if (len == 0 || v.Ptr == null) return Empty;
            var a = new byte[len];
            fixed (byte* d = a) Buffer.MemoryCopy(v.Ptr, d, len, len);
            return a;
        }

        internal static readonly byte[] Empty = new byte[0];

        /// <summary>ASCII case-insensitive compare of a view with a string (names are ASCII).</summary>
        internal static bool EqualsAsciiIgnoreCase(EmberStr v, string s)
        {
            int len = (int)v.Len.ToUInt64();
            if (len != s.Length) return false;
            byte* p = v.Ptr;
            for (int i = 0; i < len; i++)
            {
                int a = p[i], b = s[i];
                if (a == b) continue;
                if (b > 0x7f) return false;
                if ((uint)(a - 'A') <= 'Z' - 'A') a += 32;
                if ((uint)(b - 'A') <= 'Z' - 'A') b += 32;
                if (a != b) return false;
            }
            return true;
        }

        /// <summary>Exact compare of a view with an ASCII string; a non-ASCII s compares decoded.</summary>
        internal static bool EqualsOrdinal(EmberStr v, string s)
        {
            int len = (int)v.Len.ToUInt64();
            byte* p = v.Ptr;
            for (int i = 0; i < s.Length; i++)
            {
                if (s[i] > 0x7f) return FromView(v) == s;
            }
            if (len != s.Length) return false;
            for (int i = 0; i < len; i++)
            {
                if (p[i] != s[i]) return false;
            }
            return true;
        }

        /// <summary>Common methods without allocating.</summary>
        internal static string Method(EmberStr v)
        {
            int len = (int)v.Len.ToUInt64();
            byte* p = v.Ptr;
            if (len == 3 && p[0] == 'G' && p[1] == 'E' && p[2] == 'T') return "GET";
            if (len == 4 && p[0] == 'P' && p[1] == 'O' && p[2] == 'S' && p[3] == 'T') return "POST";
            if (len == 3 && p[0] == 'P' && p[1] == 'U' && p[2] == 'T') return "PUT";
            if (len == 4 && p[0] == 'H' && p[1] == 'E' && p[2] == 'A' && p[3] == 'D') return "HEAD";
            if (len == 6 && p[0] == 'D' && p[1] == 'E' && p[2] == 'L') return FromView(v) == "DELETE" ? "DELETE" : FromView(v);
            return FromView(v);
        }
    }
}
