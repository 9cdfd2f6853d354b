// A small test runner: every public static void method marked [Test] in this assembly runs in
// its own try/catch; the last line printed is exactly "N passed, N failed"; exit code 1 on failure.
// Usage: mono EmberTests.exe [substring-filter]
using System;
using System.Collections.Generic;
using System.Diagnostics;
using System.Linq;
using System.Reflection;

namespace EmberTests
{
    [AttributeUsage(AttributeTargets.Method)]
    sealed class TestAttribute : Attribute { }

    sealed class AssertionException : Exception
    {
        public AssertionException(string message) : base(message) { }
    }

    static class Assert
    {
        public static void True(bool condition, string what)
        {
            if (!condition) throw new AssertionException(what);
        }

        public static void Equal<T>(T expected, T actual, string what)
        {
            if (!EqualityComparer<T>.Default.Equals(expected, actual))
                throw new AssertionException(what + ": expected <" + expected + "> but was <" + actual + ">");
        }

        public static T Throws<T>(Action action, string what) where T : Exception
        {
            try { action(); }
            catch (T e) { return e; }
            catch (Exception e) { throw new AssertionException(what + ": expected " + typeof(T).Name + " but got " + e.GetType().Name + ": " + e.Message); }
            throw new AssertionException(what + ": expected " + typeof(T).Name + ", nothing was thrown");
        }
    }

    static class Runner
    {
        static int Main(string[] args)
        {
            if (args.Length > 0 && args[0] == "--child") return Children.Run(args);
            string filter = args.Length > 0 ? args[0] : null;
            var tests = typeof(Runner).Assembly.GetTypes()
                .SelectMany(t => t.GetMethods(BindingFlags.Public | BindingFlags.Static))
                .Where(m => m.GetCustomAttributes(typeof(TestAttribute), false).Length > 0)
                .Where(m => filter == null || (m.DeclaringType.Name + "." + m.Name).IndexOf(filter, StringComparison.OrdinalIgnoreCase) >= 0)
                .OrderBy(m => m.DeclaringType.Name).ThenBy(m => m.MetadataToken)
                .ToList();
            int passed = 0, failed = 0;
            foreach (MethodInfo m in tests)
            {
                string name = m.DeclaringType.Name + "." + m.Name;
                var sw = Stopwatch.StartNew();
                try
                {
                    m.Invoke(null, null);
                    passed++;
                    Console.WriteLine("PASS " + name + " (" + sw.ElapsedMilliseconds + " ms)");
                }
                catch (TargetInvocationException e)
                {
                    failed++;
                    Exception inner = e.InnerException ?? e;
                    Console.WriteLine("FAIL " + name + " (" + sw.ElapsedMilliseconds + " ms): " +
                        (inner is AssertionException ? inner.Message : inner.ToString()));
                }
                Console.Out.Flush();
            }
            Console.WriteLine(passed + " passed, " + failed + " failed");
            return failed == 0 ? 0 : 1;
        }
    }
}
