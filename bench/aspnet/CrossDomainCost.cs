// What one hop into an application domain costs, by argument shape and by kind of call: the
// reason the System.Web host (bindings/dotnet/aspnet) passes the request as two integers (the
// request token and the address of the engine's request info) through a function pointer of a
// delegate made in the application's domain (no remoting), and answers from inside that domain.
//   mcs -optimize+ bench/aspnet/CrossDomainCost.cs -out:/tmp/xd.exe && mono /tmp/xd.exe [calls]
// Prints ns per call for: same-domain call, cross-domain (long, long), (string), (byte[4 KiB]),
// a callee that leaves a principal in the thread's logical call context (as System.Web does) or drops it,
// measured on a fresh thread as the engine's threads are, and the same call from the main thread;
// then the host's bridge: an unmanaged call (calli) to the function pointer of a delegate made in
// the other domain, whose thunk switches the thread's domain without remoting, with and without
// a callee that leaves a principal behind.
// Mono serializes a thread's logical call context (BinaryFormatter) on every crossing once the
// thread has one: the main thread has one from the start (50-100 us a call instead of < 1 us),
// and System.Web gives one to every thread that ran a request (setting Thread.CurrentPrincipal);
// in the host, perf puts that serialization at about 9% of the CPU per request.
using System;
using System.Diagnostics;
using System.Reflection.Emit;
using System.Runtime.InteropServices;

[UnmanagedFunctionPointer(CallingConvention.Cdecl)]
public delegate void EntryFn(long a, long b);

public sealed class Target : MarshalByRefObject
{
    long _sum;
    public override object InitializeLifetimeService() { return null; }
    public void Ints(long a, long b) { _sum += a ^ b; }
    public void Text(string s) { _sum += s.Length; }
    public void Bytes(byte[] b) { _sum += b.Length; }
    // What System.Web does on a request thread: a principal in the thread's logical call context.
    public void SetPrincipal(long a, long b)
    {
        _sum += a ^ b;
        System.Threading.Thread.CurrentPrincipal = new System.Security.Principal.GenericPrincipal(
            new System.Security.Principal.GenericIdentity("user"), new string[0]);
    }
    EntryFn _entry, _entryPrincipal;
    // The host's direct bridge: a delegate made here, called through its function pointer.
    public long Entry(bool principal)
    {
        if (principal) { _entryPrincipal = SetPrincipal; return Marshal.GetFunctionPointerForDelegate(_entryPrincipal).ToInt64(); }
        _entry = Ints;
        return Marshal.GetFunctionPointerForDelegate(_entry).ToInt64();
    }
    // The same, dropped again before returning (tried in the host's remoting bridge, reverted).
    public void SetAndDropPrincipal(long a, long b)
    {
        SetPrincipal(a, b);
        System.Threading.Thread.CurrentPrincipal = null;
    }
}

static class CrossDomainCost
{
    static void Main(string[] args)
    {
        int n = args.Length > 0 ? int.Parse(args[0]) : 200000;
        var local = new Target();
        AppDomain d = AppDomain.CreateDomain("other");
        var remote = (Target)d.CreateInstanceFromAndUnwrap(typeof(Target).Assembly.Location, typeof(Target).FullName);
        string text = new string('x', 200);
        byte[] bytes = new byte[4096];
        var t = new System.Threading.Thread(() =>
        {
            Measure("same domain, (long, long)", n, i => local.Ints(i, i));
            Measure("cross-domain, (long, long)", n, i => remote.Ints(i, i));
            Measure("cross-domain, (string of 200 chars)", n, i => remote.Text(text));
            Measure("cross-domain, (byte[4096])", n, i => remote.Bytes(bytes));
        });
        var withPrincipal = new System.Threading.Thread(() =>
        {
            Measure("callee sets a principal, drops it", n, i => remote.SetAndDropPrincipal(i, i));
            Measure("callee sets a principal, keeps it", n / 50, i => remote.SetPrincipal(i, i));
        });
        var invoke = Invoker();
        IntPtr entry = new IntPtr(remote.Entry(false)), entryPrincipal = new IntPtr(remote.Entry(true));
        var direct = new System.Threading.Thread(() =>
        {
            Measure("pointer into the domain, (long, long)", n, i => invoke(entry, i, i));
            Measure("pointer into the domain, callee sets a principal", n, i => invoke(entryPrincipal, i, i));
        });
        t.Start();
        t.Join();
        direct.Start();
        direct.Join();
        withPrincipal.Start();
        withPrincipal.Join();
        Measure("cross-domain, (long, long), main thread", n / 50, i => remote.Ints(i, i));
        AppDomain.Unload(d);
    }

    delegate void Invoke(IntPtr fn, long a, long b);

    // calli unmanaged cdecl: Marshal.GetDelegateForFunctionPointer would hand back the other
    // domain's delegate object itself under Mono and run it in this domain.
    static Invoke Invoker()
    {
        var dm = new DynamicMethod("call", null, new[] { typeof(IntPtr), typeof(long), typeof(long) }, typeof(CrossDomainCost).Module, true);
        var il = dm.GetILGenerator();
        il.Emit(OpCodes.Ldarg_1);
        il.Emit(OpCodes.Ldarg_2);
        il.Emit(OpCodes.Ldarg_0);
        il.EmitCalli(OpCodes.Calli, CallingConvention.Cdecl, null, new[] { typeof(long), typeof(long) });
        il.Emit(OpCodes.Ret);
        return (Invoke)dm.CreateDelegate(typeof(Invoke));
    }

    static void Measure(string what, int n, Action<long> call)
    {
        for (int i = 0; i < n / 10; i++) call(i);   // warm up
        var sw = Stopwatch.StartNew();
        for (int i = 0; i < n; i++) call(i);
        sw.Stop();
        Console.WriteLine("{0,-45} {1,9:F0} ns/call", what, sw.Elapsed.TotalMilliseconds * 1e6 / n);
    }
}
