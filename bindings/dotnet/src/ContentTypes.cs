using System.Threading;

namespace Ember
{
    /// <summary>
    /// The UTF-8 bytes of the last few Content-Type values answered with, found by reference:
    /// an app answers with a handful of constant strings, and encoding (or checking) one per
    /// request cost more than the rest of the managed answer (about 1,400 instructions under
    /// Mono for "application/json"; bench/results/net-cost.md). An entry is only ever a value
    /// that passed <see cref="EmberResponse"/>'s check, so a hit needs no check either.
    /// Lock-free: entries are immutable and replaced whole.
    /// </summary>
    internal static class ContentTypes
    {
        sealed class Entry
        {
            internal readonly string Text;
            internal readonly byte[] Utf8;

            internal Entry(string text, byte[] utf8) { Text = text; Utf8 = utf8; }
        }

        const int Slots = 8;   // a power of two
        static readonly Entry[] s_entries = new Entry[Slots];
        static int s_next;

        /// <summary>True when <paramref name="value"/> (this very string) was answered with before.</summary>
        internal static bool Known(string value)
        {
            return Find(value) != null;
        }

        /// <summary>The UTF-8 bytes of a checked Content-Type value, remembered for next time.</summary>
        internal static byte[] Utf8(string value)
        {
            Entry e = Find(value);
            if (e != null) return e.Utf8;
            byte[] b = Ember.Utf8.Encoding.GetBytes(value);
            Volatile.Write(ref s_entries[Interlocked.Increment(ref s_next) & (Slots - 1)], new Entry(value, b));
            return b;
        }

        static Entry Find(string value)
        {
            Entry[] a = s_entries;
            for (int i = 0; i < a.Length; i++)
            {
                Entry e = a[i];   // published whole by Volatile.Write
                if (e != null && ReferenceEquals(e.Text, value)) return e;
            }
            return null;
        }
    }
}
