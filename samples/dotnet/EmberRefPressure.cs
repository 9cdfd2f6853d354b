// GC pressure from the handlers, for the crash hunt of issue 12 item 6 (bench/soak/README.md):
// EMBER_REF_GC_PRESSURE=<KiB> makes each of the plain routes (/, /users/{id}, /echo, /inspect,
// /fail) allocate that much garbage in small arrays on the thread that runs it (an engine I/O
// thread under inline dispatch), keep a ring of recent ones alive so some reach the old
// generation, and force a full collection every EMBER_REF_GC_EVERY requests (default 2000)
// from that same thread. Off (0) by default: the answers are the same either way.
using System;
using System.Globalization;
using System.Threading;

static partial class EmberRef
{
    static readonly int s_pressureKb = EnvInt("EMBER_REF_GC_PRESSURE", 0);
    static readonly int s_collectEvery = Math.Max(1, EnvInt("EMBER_REF_GC_EVERY", 2000));
    static readonly object[] s_survivors = new object[4096];
    static int s_pressureCount;

    static int EnvInt(string name, int fallback)
    {
        int v;
        string s = Environment.GetEnvironmentVariable(name);
        return s != null && int.TryParse(s, NumberStyles.None, CultureInfo.InvariantCulture, out v) ? v : fallback;
    }

    /// <summary>Called first in the plain handlers; nothing unless EMBER_REF_GC_PRESSURE is set.</summary>
    static void Pressure()
    {
        if (s_pressureKb <= 0) return;
        int n = Interlocked.Increment(ref s_pressureCount);
        object keep = null;
        for (int i = 0; i < s_pressureKb; i++)
        {
            // Mixed sizes: small objects for the nursery, a few larger ones.
            var a = new byte[(i & 7) == 7 ? 4096 : 512];
            a[0] = (byte)n;
            keep = (i & 3) == 0 ? (object)new[] { a, keep } : keep;
        }
        s_survivors[n & (s_survivors.Length - 1)] = keep;
        if (n % s_collectEvery == 0) GC.Collect();
    }
}
