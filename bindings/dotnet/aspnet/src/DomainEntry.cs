using System;
using System.Reflection.Emit;
using System.Runtime.InteropServices;
using System.Threading;

namespace Ember.AspNet
{
    /// <summary>The application domain's request entry, as the engine's raw handler sees it.
    /// Its function pointer is taken in the application's domain, so calling it runs the
    /// delegate there. Returns <see cref="DomainEntry.Taken"/> or <see cref="DomainEntry.Refused"/>.</summary>
    [UnmanagedFunctionPointer(CallingConvention.Cdecl)]
    internal delegate int DomainRequestFn(ulong req, IntPtr info);

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
    /// (ASP.NET restarts the application when web.config, bin/ or Global.asax change). Worse,
    /// Mono 6.8 crashes (SIGSEGV in its domain unloader) when it unloads a domain while a thread
    /// is inside it through such a callback thunk, where a remoting call would have been aborted
    /// and turned back at the boundary. So no thread may be inside when the runtime's unload
    /// begins: the <see cref="EntryGate"/> of each domain counts the threads between the server
    /// domain's check and their return there, and the domain's unload event (which runs before
    /// the runtime aborts threads) closes the gate, lets the requests inside finish (up to the
    /// handler timeout; they answer from the old domain, as IIS's overlapped recycling does),
    /// aborts those still inside after that (they answer 503), and returns only once none is
    /// left. A closed gate sends the request to a fresh domain.
    /// </summary>
    internal static class DomainEntry
    {
        /// <summary>The application's domain answered the request, or will (System.Web has it).</summary>
        internal const int Taken = 0;
        /// <summary>The application's domain is unloading and gave the request back untouched
        /// (see Handback): the server's domain sends it to a fresh domain.</summary>
        internal const int Refused = 1;

        internal delegate int Invoker(IntPtr fn, ulong req, IntPtr info);

        /// <summary>Calls an unmanaged function pointer (int (*)(uint64_t, void *), cdecl).
        /// Not Marshal.GetDelegateForFunctionPointer: Mono hands back the original delegate
        /// for a pointer it made, and invoking that would run the application's code in the
        /// server's domain.</summary>
        internal static readonly Invoker Call = MakeInvoker();

        static Invoker MakeInvoker()
        {
            var dm = new DynamicMethod("EmberDomainCall", typeof(int), new[] { typeof(IntPtr), typeof(ulong), typeof(IntPtr) },
                typeof(DomainEntry).Module, true);
            ILGenerator il = dm.GetILGenerator();
            il.Emit(OpCodes.Ldarg_1);
            il.Emit(OpCodes.Ldarg_2);
            il.Emit(OpCodes.Ldarg_0);
            il.EmitCalli(OpCodes.Calli, CallingConvention.Cdecl, typeof(int), new[] { typeof(ulong), typeof(IntPtr) });
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
    /// same address means the same memory in every domain of the process): int busy (threads
    /// that passed the gate and have not returned to the server's domain), int closed. Never
    /// freed: a late caller may still read it after the domain is gone (8 bytes per restart).
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

        /// <summary>Server's domain, once the call returned (the thread is out of the domain).</summary>
        internal static void Leave(IntPtr gate)
        {
            Interlocked.Decrement(ref ((int*)gate)[0]);
        }

        /// <summary>Application's domain: no thread passes any more.</summary>
        internal static void Close(IntPtr gate)
        {
            Interlocked.Exchange(ref ((int*)gate)[1], 1);
        }

        /// <summary>Threads that passed and have not returned.</summary>
        internal static int Busy(IntPtr gate)
        {
            return Volatile.Read(ref ((int*)gate)[0]);
        }
    }
}
