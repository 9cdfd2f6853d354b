// What the engine does without calling .NET: static files, compression, the output cache,
// CORS and request filtering (ember_server_static and friends). Settings are recorded like
// routes and handed to each native server at Start; a bad one fails Start with the engine's
// message.
using System;
using System.Collections.Generic;
using System.Runtime.InteropServices;
using System.Security;
using Ember.Interop;

namespace Ember
{
    /// <summary>Options of a static mount (<see cref="EmberServer.MapStatic"/>).</summary>
    public sealed class EmberStaticOptions
    {
        public EmberStaticOptions() { Index = true; Precompressed = true; }

        /// <summary>A folder request ("/static/docs/") gets its index.html (default true).</summary>
        public bool Index { get; set; }
        /// <summary>name.zst / name.br / name.gz beside a file are sent to clients that accept them (default true).</summary>
        public bool Precompressed { get; set; }
        /// <summary>Paths that name no file get the mount's index.html (single-page apps).</summary>
        public bool SpaFallback { get; set; }
        /// <summary>Serve names starting with '.' (refused with 404 by default).</summary>
        public bool Dotfiles { get; set; }
        /// <summary>The Cache-Control value of every answer from the mount (null: none).</summary>
        public string CacheControl { get; set; }
    }

    /// <summary>Response codings (EMBER_COMPRESS_* of include/ember.h), for
    /// <see cref="EmberServer.UseCompression(EmberCompression, long)"/> and
    /// <see cref="EmberServer.CompressionCodings"/>.</summary>
    [Flags]
    public enum EmberCompression : uint
    {
        None = 0,
        Gzip = 1,
        Brotli = 2,
        Zstd = 4,
    }

    /// <summary>A CORS policy (<see cref="EmberServer.UseCors"/>).</summary>
    public sealed class EmberCorsPolicy
    {
        public EmberCorsPolicy() { Origins = "*"; }

        /// <summary>"*" or a comma-separated list of origins ("https://app.example").</summary>
        public string Origins { get; set; }
        /// <summary>Comma-separated methods; null = "GET, HEAD, POST".</summary>
        public string Methods { get; set; }
        /// <summary>Request headers a page may send; null or "*" = whatever the preflight names.</summary>
        public string Headers { get; set; }
        /// <summary>Response headers a page may read; null = none.</summary>
        public string ExposeHeaders { get; set; }
        /// <summary>How long a browser may reuse a preflight answer (Zero: no Access-Control-Max-Age).</summary>
        public TimeSpan MaxAge { get; set; }
        /// <summary>Allow cookies and HTTP authentication.</summary>
        public bool AllowCredentials { get; set; }
    }

    /// <summary>The output cache's counters (<c>ember_cache_stats</c>).</summary>
    public sealed class EmberCacheStats
    {
        public long Hits { get; internal set; }
        public long Misses { get; internal set; }
        public long Stores { get; internal set; }
        public long Evictions { get; internal set; }
        public long Expirations { get; internal set; }
        public long Purged { get; internal set; }
        public long Entries { get; internal set; }
        public long Bytes { get; internal set; }
    }

    /// <summary>Marks answers for the output cache.</summary>
    public static class EmberCacheExtensions
    {
        /// <summary>The response header that marks an answer cacheable for N seconds; the engine
        /// removes it before sending.</summary>
        public const string Header = "Ember-Cache";

        /// <summary>Lets the engine answer repeats of this request from memory for
        /// <paramref name="duration"/> (whole seconds, at least 1), without calling the handler.
        /// Needs <see cref="EmberServer.UseOutputCache"/>.</summary>
        public static EmberResponse CacheFor(this EmberResponse response, TimeSpan duration)
        {
            if (response == null) throw new ArgumentNullException("response");
            long s = (long)Math.Ceiling(duration.TotalSeconds);
            if (s < 1) throw new ArgumentOutOfRangeException("duration", "at least one second");
            response.SetHeader(Header, Math.Min(s, 31536000L).ToString(System.Globalization.CultureInfo.InvariantCulture));
            return response;
        }
    }

    public sealed partial class EmberServer
    {
        readonly List<Action<EmberServerHandle>> _front = new List<Action<EmberServerHandle>>();

        void Front(Action<EmberServerHandle> step)
        {
            lock (_gate)
            {
                CheckNotDisposed();
                if (_running != null) throw new InvalidOperationException("Configure static files, compression, cache, CORS and filters before Start (or after Stop).");
                _front.Add(step);
            }
        }

        /// <summary>Hands the recorded settings to a new native server (at Start).</summary>
        void ApplyFront(EmberServerHandle h)
        {
            foreach (var step in _front) step(h);
        }

        /// <summary>Serves the files under <paramref name="folder"/> at <paramref name="prefix"/>
        /// ("/static"), in the engine: ETag/Last-Modified with 304, byte ranges (206/416), index.html,
        /// precompressed siblings; traversal attempts get 403, dotfiles 404.</summary>
        public EmberServer MapStatic(string prefix, string folder, EmberStaticOptions options = null)
        {
            if (prefix == null) throw new ArgumentNullException("prefix");
            if (folder == null) throw new ArgumentNullException("folder");
            var o = options ?? new EmberStaticOptions();
            uint flags = (o.Index ? 1u : 0) | (o.Precompressed ? 2u : 0) | (o.SpaFallback ? 4u : 0) | (o.Dotfiles ? 8u : 0);
            string cc = o.CacheControl;
            Front(h => Native.Check(FrontNative.ember_server_static(h, Utf8.Z(prefix), Utf8.Z(folder), flags, Utf8.Z(cc)), "ember_server_static(" + prefix + ")"));
            return this;
        }

        /// <summary>Compresses answers and static files (gzip, brotli, zstd) for clients that accept
        /// it, from <paramref name="minBytes"/> on. Codings the loaded library lacks
        /// (<see cref="CompressionCodings"/>) are left out; a tie of weights in the client's
        /// Accept-Encoding goes to zstd, then brotli, then gzip.</summary>
        public EmberServer UseCompression(bool gzip = true, bool brotli = true, long minBytes = 1024, bool zstd = true)
        {
            var codings = (gzip ? EmberCompression.Gzip : 0) | (brotli ? EmberCompression.Brotli : 0) | (zstd ? EmberCompression.Zstd : 0);
            return UseCompression(codings, minBytes);
        }

        /// <summary>Compresses answers and static files with <paramref name="codings"/>.</summary>
        public EmberServer UseCompression(EmberCompression codings, long minBytes = 1024)
        {
            if (minBytes < 0) throw new ArgumentOutOfRangeException("minBytes");
            Front(h => Native.Check(FrontNative.ember_server_set_compression(h, (uint)codings, (ulong)minBytes), "ember_server_set_compression"));
            return this;
        }

        /// <summary>The codings the loaded library compresses with on the fly (gzip in the default
        /// build; brotli and zstd with the cargo features of those names).</summary>
        public static EmberCompression CompressionCodings
        {
            get { return (EmberCompression)FrontNative.ember_compression_codings(); }
        }

        /// <summary>Compression off (or back on) for the paths under <paramref name="prefix"/>.</summary>
        public EmberServer CompressionForPath(string prefix, bool enabled)
        {
            Front(h => Native.Check(FrontNative.ember_server_compression_path(h, Utf8.Z(prefix), enabled), "ember_server_compression_path"));
            return this;
        }

        /// <summary>Turns the output cache on: answers marked with <see cref="EmberCacheExtensions.CacheFor"/>
        /// are served from memory (at most <paramref name="maxBytes"/>) without calling the handler.</summary>
        public EmberServer UseOutputCache(long maxBytes = 64L << 20, params string[] keyHeaders)
        {
            if (maxBytes < 0) throw new ArgumentOutOfRangeException("maxBytes");
            var keys = keyHeaders ?? new string[0];
            Front(h =>
            {
                Native.Check(FrontNative.ember_server_set_cache(h, (ulong)maxBytes), "ember_server_set_cache");
                foreach (string k in keys) Native.Check(FrontNative.ember_server_cache_key_header(h, Utf8.Z(k)), "ember_server_cache_key_header");
            });
            return this;
        }

        /// <summary>Drops cached answers whose path + query starts with <paramref name="prefix"/>
        /// ("" = all) and returns how many; 0 when not running. Also from inside a handler.</summary>
        public long PurgeCache(string prefix)
        {
            NativeInstance inst;
            lock (_gate) inst = _running;
            if (inst == null) return 0;
            ulong n;
            try { Native.Check(FrontNative.ember_server_cache_purge(inst.Handle, Utf8.Z(prefix ?? string.Empty), out n), "ember_server_cache_purge"); }
            catch (ObjectDisposedException) { return 0; }
            return (long)n;
        }

        /// <summary>The output cache's counters (null when not running).</summary>
        public EmberCacheStats GetCacheStats()
        {
            NativeInstance inst;
            lock (_gate) inst = _running;
            if (inst == null) return null;
            CacheStatsNative s;
            try { Native.Check(FrontNative.ember_server_cache_stats(inst.Handle, out s, (UIntPtr)Marshal.SizeOf(typeof(CacheStatsNative))), "ember_server_cache_stats"); }
            catch (ObjectDisposedException) { return null; }
            return new EmberCacheStats
            {
                Hits = (long)s.Hits, Misses = (long)s.Misses, Stores = (long)s.Stores, Evictions = (long)s.Evictions,
                Expirations = (long)s.Expirations, Purged = (long)s.Purged, Entries = (long)s.Entries, Bytes = (long)s.Bytes,
            };
        }

        /// <summary>A CORS policy for the paths under <paramref name="prefix"/>; the engine answers preflights.</summary>
        public EmberServer UseCors(string prefix, EmberCorsPolicy policy)
        {
            if (policy == null) throw new ArgumentNullException("policy");
            string o = policy.Origins ?? "*", m = policy.Methods, hd = policy.Headers, e = policy.ExposeHeaders;
            uint age = (uint)Math.Max(0, Math.Min(uint.MaxValue, Math.Ceiling(policy.MaxAge.TotalSeconds)));
            uint flags = policy.AllowCredentials ? 1u : 0;
            Front(h => Native.Check(FrontNative.ember_server_cors(h, Utf8.Z(prefix), Utf8.Z(o), Utf8.Z(m), Utf8.Z(hd), Utf8.Z(e), age, flags), "ember_server_cors(" + prefix + ")"));
            return this;
        }

        /// <summary>Only clients matching an allow rule (address or CIDR network) are served.</summary>
        public EmberServer AllowIp(string rule) { return IpRule(rule, true); }

        /// <summary>Clients matching <paramref name="rule"/> (address or CIDR network) get 403.</summary>
        public EmberServer DenyIp(string rule) { return IpRule(rule, false); }

        EmberServer IpRule(string rule, bool allow)
        {
            Front(h => Native.Check(FrontNative.ember_server_filter_ip(h, Utf8.Z(rule), allow), "ember_server_filter_ip(" + rule + ")"));
            return this;
        }

        /// <summary>Only these methods ("GET, HEAD, POST") are served; others get 405.</summary>
        public EmberServer AllowMethods(string methods)
        {
            Front(h => Native.Check(FrontNative.ember_server_filter_methods(h, Utf8.Z(methods)), "ember_server_filter_methods"));
            return this;
        }

        /// <summary>Paths matching the glob <paramref name="pattern"/> ("*.bak") get 404.</summary>
        public EmberServer DenyPath(string pattern)
        {
            Front(h => Native.Check(FrontNative.ember_server_filter_path(h, Utf8.Z(pattern)), "ember_server_filter_path(" + pattern + ")"));
            return this;
        }

        /// <summary>Request targets longer than <paramref name="maxBytes"/> get 414 (0 = no limit).</summary>
        public EmberServer MaxUrlBytes(long maxBytes)
        {
            if (maxBytes < 0) throw new ArgumentOutOfRangeException("maxBytes");
            Front(h => Native.Check(FrontNative.ember_server_filter_max_url(h, (ulong)maxBytes), "ember_server_filter_max_url"));
            return this;
        }
    }
}

namespace Ember.Interop
{
    [StructLayout(LayoutKind.Sequential)]
    internal struct CacheStatsNative
    {
        public UIntPtr Size;
        public ulong Hits, Misses, Stores, Evictions, Expirations, Purged, Entries, Bytes;
    }

    /// <summary>The imports of include/ember.h's static-file, compression, cache, CORS and filter functions.</summary>
    [SuppressUnmanagedCodeSecurity]
    internal static class FrontNative
    {
        const string Lib = NativeMethods.Lib;

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int ember_server_static(EmberServerHandle server, byte[] prefix, byte[] folder, uint flags, byte[] cacheControl);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int ember_server_set_compression(EmberServerHandle server, uint codings, ulong minBytes);
        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern uint ember_compression_codings();

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int ember_server_compression_path(EmberServerHandle server, byte[] prefix, [MarshalAs(UnmanagedType.U1)] bool enabled);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int ember_server_set_cache(EmberServerHandle server, ulong maxBytes);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int ember_server_cache_key_header(EmberServerHandle server, byte[] name);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int ember_server_cache_purge(EmberServerHandle server, byte[] prefix, out ulong count);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int ember_server_cache_stats(EmberServerHandle server, out CacheStatsNative stats, UIntPtr statsSize);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int ember_server_cors(EmberServerHandle server, byte[] prefix, byte[] origins, byte[] methods,
            byte[] headers, byte[] expose, uint maxAge, uint flags);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int ember_server_filter_ip(EmberServerHandle server, byte[] rule, [MarshalAs(UnmanagedType.U1)] bool allow);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int ember_server_filter_methods(EmberServerHandle server, byte[] methods);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int ember_server_filter_path(EmberServerHandle server, byte[] pattern);

        [DllImport(Lib, CallingConvention = CallingConvention.Cdecl)]
        internal static extern int ember_server_filter_max_url(EmberServerHandle server, ulong maxBytes);
    }
}
