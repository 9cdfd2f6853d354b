// Finds and loads the native engine before the first P/Invoke, so DllImport("ember") binds to
// the file this assembly ships with, whatever the process's search path says.
//
// Windows: LoadLibraryEx on a full path; DllImport("ember") then resolves to the module already
// loaded under the base name ember.dll (what LibGit2Sharp and SQLitePCLRaw do). No
// SetDllDirectory: nothing process-wide changes.
// Mono on Linux: dlopen on a full path; the library's soname is libember.so.0 and
// Ember.dll.config maps "ember" to that name, so Mono's dlopen("libember.so.0") is answered by
// the library already loaded.
using System;
using System.Collections.Generic;
using System.IO;
using System.Runtime.InteropServices;

namespace Ember.Interop
{
    internal static class NativeLoader
    {
        /// <summary>Names the library file to load, skipping the search (like Python's).</summary>
        internal const string EnvVar = "EMBER_LIBRARY";

        static readonly object s_lock = new object();
        static string s_loadedFrom;
        static Exception s_failure;

        /// <summary>Where the engine was loaded from (null before the first server).</summary>
        internal static string LoadedFrom { get { lock (s_lock) return s_loadedFrom; } }

        internal static bool IsWindows
        {
            get { return Environment.OSVersion.Platform == PlatformID.Win32NT; }
        }

        static bool IsMac
        {
            get { return Environment.OSVersion.Platform == PlatformID.MacOSX || Directory.Exists("/System/Library/CoreServices"); }
        }

        internal static string FileName
        {
            get { return IsWindows ? "ember.dll" : IsMac ? "libember.dylib" : "libember.so"; }
        }

        internal static string ProcessArch { get { return IntPtr.Size == 8 ? "x64" : "x86"; } }

        static string Rid
        {
            get { return (IsWindows ? "win-" : IsMac ? "osx-" : "linux-") + ProcessArch; }
        }

        /// <summary>Loads the engine once; throws DllNotFoundException or BadImageFormatException
        /// naming every file it tried, and refuses an engine of another ABI version.</summary>
        internal static void EnsureLoaded()
        {
            lock (s_lock)
            {
                if (s_loadedFrom != null) return;
                if (s_failure != null) throw Rethrowable(s_failure);
                try { s_loadedFrom = Load(); }
                catch (Exception e) { s_failure = e; throw; }
            }
        }

        static Exception Rethrowable(Exception e)
        {
            if (e is BadImageFormatException) return new BadImageFormatException(e.Message, e);
            if (e is DllNotFoundException) return new DllNotFoundException(e.Message, e);
            return new EmberException(EmberResult.Runtime, e.Message);
        }

        /// <summary>The files tried, in order: runtimes/&lt;rid&gt;/native, then &lt;arch&gt;/, then
        /// beside Ember.dll; also the NuGet package's own runtimes folder when Ember.dll is
        /// referenced from inside the package (lib/net461/).</summary>
        internal static List<string> Candidates()
        {
            var list = new List<string>();
            string env = Environment.GetEnvironmentVariable(EnvVar);
            if (!string.IsNullOrEmpty(env))
            {
                list.Add(Path.GetFullPath(env));
                return list;
            }
            var dirs = new List<string>();
            string asm = null;
            try { asm = typeof(NativeLoader).Assembly.Location; } catch (Exception) { }
            if (!string.IsNullOrEmpty(asm)) dirs.Add(Path.GetDirectoryName(asm));
            string baseDir = AppDomain.CurrentDomain.BaseDirectory;
            if (!string.IsNullOrEmpty(baseDir) && !dirs.Contains(baseDir.TrimEnd('/', '\\'))) dirs.Add(baseDir.TrimEnd('/', '\\'));
            foreach (string d in dirs)
            {
                list.Add(Path.Combine(d, "runtimes", Rid, "native", FileName));
                list.Add(Path.Combine(d, ProcessArch, FileName));
                list.Add(Path.Combine(d, FileName));
                // <package>/lib/net461/Ember.dll -> <package>/runtimes/<rid>/native
                string pkg = Path.GetDirectoryName(Path.GetDirectoryName(d) ?? string.Empty);
                if (!string.IsNullOrEmpty(pkg)) list.Add(Path.Combine(pkg, "runtimes", Rid, "native", FileName));
            }
            return list;
        }

        static string Load()
        {
            var tried = new List<string>();
            bool explicitPath = !string.IsNullOrEmpty(Environment.GetEnvironmentVariable(EnvVar));
            if (IsWindows)
            {
                // Another copy already in the process (another Ember.dll, or the host's own)
                // would answer DllImport("ember"): use it only if it speaks our ABI.
                IntPtr existing = Win.GetModuleHandleW("ember.dll");
                if (existing != IntPtr.Zero)
                {
                    string path = Win.ModulePath(existing);
                    CheckAbi(Win.GetProcAddress(existing, "ember_abi_version"), path, true);
                    return path;
                }
            }
            foreach (string path in Candidates())
            {
                if (!File.Exists(path)) { tried.Add(path + " (not found)"); continue; }
                string archProblem = ArchProblem(path);
                if (archProblem != null)
                {
                    throw new BadImageFormatException("Ember: " + path + " " + archProblem
                        + "; install the " + Rid + " engine (runtimes/" + Rid + "/native/" + FileName + ")", path);
                }
                IntPtr handle;
                string error;
                if (IsWindows)
                {
                    handle = Win.LoadLibraryExW(path, IntPtr.Zero, Win.LOAD_WITH_ALTERED_SEARCH_PATH);
                    error = handle == IntPtr.Zero ? "LoadLibraryEx error " + Marshal.GetLastWin32Error() : null;
                }
                else
                {
                    handle = Dl.Open(path, out error);
                }
                if (handle == IntPtr.Zero)
                {
                    tried.Add(path + " (" + error + ")");
                    if (explicitPath) break;
                    continue;
                }
                CheckAbi(IsWindows ? Win.GetProcAddress(handle, "ember_abi_version") : Dl.Symbol(handle, "ember_abi_version"), path, false);
                return path;
            }
            if (!IsWindows && !explicitPath)
            {
                // Last, an installed engine (make install): the dynamic loader's own search.
                string error;
                IntPtr handle = Dl.Open("libember.so.0", out error);
                if (handle != IntPtr.Zero)
                {
                    CheckAbi(Dl.Symbol(handle, "ember_abi_version"), "libember.so.0 (system)", false);
                    return "libember.so.0";
                }
                tried.Add("libember.so.0 on the system library path (" + error + ")");
            }
            throw new DllNotFoundException("Ember: cannot load the native engine " + FileName + " for " + Rid
                + "; tried:" + Environment.NewLine + "  " + string.Join(Environment.NewLine + "  ", tried.ToArray())
                + Environment.NewLine + "Ship " + FileName + " beside Ember.dll or in runtimes/" + Rid
                + "/native/ (the Ember NuGet package does both), or set " + EnvVar + " to its path.");
        }

        [UnmanagedFunctionPointer(CallingConvention.Cdecl)]
        delegate uint AbiVersionFn();

        static void CheckAbi(IntPtr fn, string path, bool alreadyLoaded)
        {
            if (fn == IntPtr.Zero)
                throw new BadImageFormatException("Ember: " + path + " has no ember_abi_version: it is not an Ember engine", path);
            var abi = (AbiVersionFn)Marshal.GetDelegateForFunctionPointer(fn, typeof(AbiVersionFn));
            uint got = abi();
            if (got != NativeMethods.EMBER_ABI_VERSION)
            {
                throw new BadImageFormatException("Ember: refusing the native engine " + path + (alreadyLoaded ? " (already loaded in this process)" : "")
                    + ": it has ABI version " + got + ", this Ember.dll needs ABI version " + NativeMethods.EMBER_ABI_VERSION
                    + ". Ship the engine from the same Ember release as Ember.dll.", path);
            }
        }

        /// <summary>Reads the file's header: null if it suits this process, else what is wrong.</summary>
        internal static string ArchProblem(string path)
        {
            byte[] h = new byte[512];
            int n;
            try { using (var f = File.OpenRead(path)) n = f.Read(h, 0, h.Length); }
            catch (Exception e) { return "cannot be read (" + e.Message + ")"; }
            string want = ProcessArch;
            string got;
            if (n >= 20 && h[0] == 0x7f && h[1] == (byte)'E' && h[2] == (byte)'L' && h[3] == (byte)'F')
            {
                if (IsWindows) return "is a Linux (ELF) library, not a Windows DLL";
                int machine = h[18] | (h[19] << 8);
                got = machine == 0x3E ? "x64" : machine == 0x03 ? "x86" : machine == 0xB7 ? "arm64" : "machine 0x" + machine.ToString("x");
            }
            else if (n >= 64 && h[0] == (byte)'M' && h[1] == (byte)'Z')
            {
                if (!IsWindows) return "is a Windows DLL, not a library for this OS (want " + FileName + ")";
                int pe = BitConverter.ToInt32(h, 0x3C);
                if (pe < 0 || pe + 6 > n || h[pe] != (byte)'P' || h[pe + 1] != (byte)'E') return null; // let LoadLibrary judge
                int machine = h[pe + 4] | (h[pe + 5] << 8);
                got = machine == 0x8664 ? "x64" : machine == 0x14c ? "x86" : machine == 0xAA64 ? "arm64" : "machine 0x" + machine.ToString("x");
            }
            else if (IsMac) return null;
            else return "is not a shared library";
            if (got == want) return null;
            return "is built for " + got + ", but this process is " + want + (IsWindows && want == "x86"
                ? " (32-bit: \"Prefer 32-bit\" or an x86 build)" : "");
        }

        static class Win
        {
            internal const uint LOAD_WITH_ALTERED_SEARCH_PATH = 0x8;

            [DllImport("kernel32", CharSet = CharSet.Unicode, SetLastError = true)]
            internal static extern IntPtr LoadLibraryExW(string path, IntPtr file, uint flags);

            [DllImport("kernel32", CharSet = CharSet.Unicode)]
            internal static extern IntPtr GetModuleHandleW(string name);

            [DllImport("kernel32", CharSet = CharSet.Ansi, ExactSpelling = true)]
            internal static extern IntPtr GetProcAddress(IntPtr module, string name);

            [DllImport("kernel32", CharSet = CharSet.Unicode)]
            static extern uint GetModuleFileNameW(IntPtr module, System.Text.StringBuilder buf, uint size);

            internal static string ModulePath(IntPtr module)
            {
                var sb = new System.Text.StringBuilder(1024);
                return GetModuleFileNameW(module, sb, (uint)sb.Capacity) > 0 ? sb.ToString() : "ember.dll";
            }
        }

        static class Dl
        {
            const int RTLD_NOW = 2;
            const int RTLD_GLOBAL = 0x100;

            [DllImport("libdl.so.2", EntryPoint = "dlopen")] static extern IntPtr dlopen2(string file, int mode);
            [DllImport("libdl.so.2", EntryPoint = "dlsym")] static extern IntPtr dlsym2(IntPtr handle, string name);
            [DllImport("libdl.so.2", EntryPoint = "dlerror")] static extern IntPtr dlerror2();
            [DllImport("libc", EntryPoint = "dlopen")] static extern IntPtr dlopenc(string file, int mode);
            [DllImport("libc", EntryPoint = "dlsym")] static extern IntPtr dlsymc(IntPtr handle, string name);
            [DllImport("libc", EntryPoint = "dlerror")] static extern IntPtr dlerrorc();

            static bool s_libc;   // no libdl.so.2 (macOS, musl): dlopen lives in libc

            internal static IntPtr Open(string path, out string error)
            {
                IntPtr h;
                try { h = s_libc ? dlopenc(path, RTLD_NOW | RTLD_GLOBAL) : dlopen2(path, RTLD_NOW | RTLD_GLOBAL); }
                catch (DllNotFoundException) { s_libc = true; h = dlopenc(path, RTLD_NOW | RTLD_GLOBAL); }
                error = h == IntPtr.Zero ? Marshal.PtrToStringAnsi(s_libc ? dlerrorc() : dlerror2()) : null;
                return h;
            }

            internal static IntPtr Symbol(IntPtr handle, string name)
            {
                return s_libc ? dlsymc(handle, name) : dlsym2(handle, name);
            }
        }
    }
}
