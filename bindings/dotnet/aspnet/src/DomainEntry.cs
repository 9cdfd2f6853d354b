using System;
using System.Reflection.Emit;
using System.Runtime.InteropServices;
using System.Threading;

namespace Ember.AspNet
{
    /// <summary>The application domain's request entry, as the engine's raw handler sees it.
    /// Its function pointer is taken in the application's domain, so calling it runs the
    /// delegate there.</summary>
    [UnmanagedFunctionPointer(CallingConvention.Cdecl)]
    internal delegate void DomainRequestFn(ulong req, IntPtr info);

    /// <summary>
    /// How a request enters the application's domain without remoting. A remoting call carries
    /// the thread's logical call context across the boundary, and Mono serializes it
    /// (BinaryFormatter) on every call once System.Web has put the request's principal in it:
    /// about 80 µs a crossing (bench/aspnet/CrossDomainCost.cs), most of the host's overhead.
    /// A call through a function pointer of a delegate made in the application's domain is a
    /// plain unmanaged call instead: the runtime's callback thunk switches the thread into the
    /// delegate's domain (Mono: mono_threads_attach_coop; .NET Framework: the UMThunk's domain
    /// transition) and nothing of the call context travels, in either direction. Each domain
    /// keeps its own Thread object, principal and call context.
    ///
    /// The pointer is only valid while its domain lives, and a domain unloads on its own
    /// (ASP.NET restarts the application when web.config, bin/ or Global.asax change). The
    /// <see cref="EntryGate"/> of each domain makes the call safe: the server's domain enters
    /// the gate before the call, the delegate leaves it as its first act (from then on the
    /// runtime knows the thread is in the domain and aborts it on unload, as for a remoting
    /// call), and the domain's unload event closes the gate and waits for the threads between
    /// the two. A closed gate sends the request to the next domain.
    /// </summary>
    internal static class DomainEntry
    {
        internal delegate void Invoker(IntPtr fn, ulong req, IntPtr info);

        /// <summary>Calls an unmanaged function pointer (void (*)(uint64_t, void *), cdecl).
        /// Not Marshal.GetDelegateForFunctionPointer: Mono hands back the original delegate
        /// for a pointer it made, and invoking that would run the application's code in the
        /// server's domain.</summary>
        internal static readonly Invoker Call = MakeInvoker();

        static Invoker MakeInvoker()
        {
            var dm = new DynamicMethod("EmberDomainCall", null, new[] { typeof(IntPtr), typeof(ulong), typeof(IntPtr) },
                typeof(DomainEntry).Module, true);
            ILGenerator il = dm.GetILGenerator();
            il.Emit(OpCodes.Ldarg_1);
            il.Emit(OpCodes.Ldarg_2);
            il.Emit(OpCodes.Ldarg_0);
            il.EmitCalli(OpCodes.Calli, CallingConvention.Cdecl, null, new[] { typeof(ulong), typeof(IntPtr) });
            il.Emit(OpCodes.Ret);
            return (Invoker)dm.CreateDelegate(typeof(Invoker));
        }

        /// <summary>Which bridge the host uses: "direct" (the default, a function pointer into
        /// the domain) or "remoting" (one cross-domain call per request, the first design; kept
        /// for measuring one against the other, EMBER_ASPNET_BRIDGE=remoting).</summary>
        internal static bool Direct
        {
            get { return !string.Equals(Environment.GetEnvironmentVariable("EMBER_ASPNET_BRIDGE"), "remoting", StringComparison.OrdinalIgnoreCase); }
        }
    }

    /// <summary>
    /// 8 bytes of native memory shared by the server's domain and one application domain (the
    /// same address means the same memory in every domain of the process): int entering (threads
    /// between the check and the domain's first instruction), int closed. Never freed: a late
    /// caller may still read it after the domain is gone (8 bytes per application restart).
    /// </summary>
    internal static unsafe class EntryGate
    {
        internal static IntPtr Create()
        {
            IntPtr g = Marshal.AllocHGlobal(8);
            int* p = (int*)g;
            p[0] = 0;
            p[1] = 0;
            return g;
        }

        /// <summary>Server's domain, before the call: false once the domain is unloading.</summary>
        internal static bool TryEnter(IntPtr gate)
        {
            int* p = (int*)gate;
            Interlocked.Increment(ref p[0]);
            if (Volatile.Read(ref p[1]) == 0) return true;
            Interlocked.Decrement(ref p[0]);
            return false;
        }

        /// <summary>Application's domain, first thing in the call.</summary>
        internal static void Entered(IntPtr gate)
        {
            Interlocked.Decrement(ref ((int*)gate)[0]);
        }

        /// <summary>Application's domain, in its unload event (before the runtime aborts the
        /// threads in it): no thread enters any more, and those on their way in are in.</summary>
        internal static void Close(IntPtr gate)
        {
            int* p = (int*)gate;
            Interlocked.Exchange(ref p[1], 1);
            var spin = new SpinWait();
            while (Volatile.Read(ref p[0]) != 0) spin.SpinOnce();
        }
    }
}
