// SIGTERM / SIGINT for hosts that run until told to stop: a fleet member behind a load
// balancer, a systemd service, a console app. Mono on Unix delivers them through
// Mono.Posix's UnixSignal, found by reflection so the binding needs no reference to
// Mono.Posix (absent on .NET Framework under Windows, where Ctrl+C / Ctrl+Break stand in).
using System;
using System.Reflection;
using System.Threading;

namespace Ember
{
    /// <summary>
    /// Catches SIGTERM and SIGINT (Mono on Unix) or Ctrl+C / Ctrl+Break (.NET Framework on
    /// Windows) from the moment it is created, so install it before the server starts: a
    /// signal that arrives while starting is kept, not met by the default action. Each signal
    /// is counted; <see cref="WaitBeyond(int, TimeSpan)"/> waits for the next one.
    /// </summary>
    public sealed class EmberStopSignals
    {
        const string Posix = ", Mono.Posix, Version=4.0.0.0, Culture=neutral, PublicKeyToken=0738eb9f132ed756";
        readonly object _gate = new object();
        int _count;
        string _last;

        /// <summary>Starts catching the stop signals (see the class summary).</summary>
        public EmberStopSignals()
        {
            Type unixSignal = Type.GetType("Mono.Unix.UnixSignal" + Posix, false);
            Type signum = Type.GetType("Mono.Unix.Native.Signum" + Posix, false);
            if (unixSignal != null && signum != null && Environment.OSVersion.Platform == PlatformID.Unix)
            {
                Array signals = Array.CreateInstance(unixSignal, 2);
                signals.SetValue(Activator.CreateInstance(unixSignal, Enum.Parse(signum, "SIGTERM")), 0);
                signals.SetValue(Activator.CreateInstance(unixSignal, Enum.Parse(signum, "SIGINT")), 1);
                MethodInfo waitAny = unixSignal.GetMethod("WaitAny", new[] { signals.GetType() });
                MethodInfo reset = unixSignal.GetMethod("Reset", Type.EmptyTypes);
                var t = new Thread(() =>
                {
                    for (;;)
                    {
                        int i = (int)waitAny.Invoke(null, new object[] { signals });
                        if (i < 0 || i > 1) continue;
                        // Reset first: WaitAny returns at once while a signal's count is above 0.
                        reset.Invoke(signals.GetValue(i), null);
                        Raise(i == 0 ? "SIGTERM" : "SIGINT");
                    }
                });
                t.IsBackground = true;
                t.Name = "ember-stop-signals";
                t.Start();
            }
            else
            {
                Console.CancelKeyPress += (s, e) => { e.Cancel = true; Raise("Ctrl+C"); };
            }
        }

        void Raise(string why)
        {
            lock (_gate)
            {
                _count++;
                _last = why;
                Monitor.PulseAll(_gate);
            }
        }

        /// <summary>How many stop signals arrived so far.</summary>
        public int Count { get { lock (_gate) return _count; } }

        /// <summary>The last signal's name ("SIGTERM", "SIGINT", "Ctrl+C"), or null.</summary>
        public string Last { get { lock (_gate) return _last; } }

        /// <summary>Blocks until a signal beyond the first <paramref name="seen"/> ones has arrived
        /// (true) or <paramref name="timeout"/> passes (false; <c>Timeout.InfiniteTimeSpan</c>
        /// waits for ever).</summary>
        public bool WaitBeyond(int seen, TimeSpan timeout)
        {
            DateTime deadline = timeout == Timeout.InfiniteTimeSpan ? DateTime.MaxValue : DateTime.UtcNow + timeout;
            lock (_gate)
            {
                while (_count <= seen)
                {
                    if (deadline == DateTime.MaxValue) { Monitor.Wait(_gate); continue; }
                    TimeSpan left = deadline - DateTime.UtcNow;
                    if (left <= TimeSpan.Zero) return false;
                    Monitor.Wait(_gate, left);
                }
                return true;
            }
        }

        /// <summary>Blocks until the first stop signal (returns at once if one came already);
        /// returns its name.</summary>
        public string Wait()
        {
            WaitBeyond(0, Timeout.InfiniteTimeSpan);
            return Last;
        }
    }

    public sealed partial class EmberServer
    {
        /// <summary>
        /// Serves until SIGTERM or SIGINT (see <see cref="EmberStopSignals"/>), then stops
        /// gracefully: with <paramref name="drain"/> above zero it first calls <see cref="Drain"/>
        /// and keeps serving that long, so a balancer with active health checks moves away (the
        /// health path answers 503, answers close their connections); with
        /// <paramref name="refuse"/> above zero it then calls <see cref="StopAccepting"/> and waits
        /// that long while open connections finish (behind nginx open source, which has no active
        /// checks, this is the phase that matters: more than nginx's upstream keepalive_timeout).
        /// A second signal cuts either wait short. Then <see cref="Stop(TimeSpan)"/> gives
        /// in-flight requests up to <paramref name="grace"/>. Create <paramref name="signals"/>
        /// before <see cref="Start(int)"/>, so a signal during the start is not lost. Returns the
        /// signal's name.
        /// </summary>
        public string RunUntilSignal(EmberStopSignals signals, TimeSpan drain, TimeSpan refuse, TimeSpan grace)
        {
            if (signals == null) throw new ArgumentNullException("signals");
            string why = signals.Wait();
            int seen = signals.Count;
            try
            {
                if (drain > TimeSpan.Zero && IsRunning)
                {
                    Drain();
                    RaiseLog(EmberLogLevel.Info, why + ": draining for " + (int)drain.TotalMilliseconds + " ms", null);
                    if (signals.WaitBeyond(seen, drain)) refuse = TimeSpan.Zero;
                }
                if (refuse > TimeSpan.Zero && IsRunning)
                {
                    StopAccepting();
                    RaiseLog(EmberLogLevel.Info, why + ": refusing new connections for " + (int)refuse.TotalMilliseconds + " ms", null);
                    signals.WaitBeyond(seen, refuse);
                }
            }
            catch (InvalidOperationException) { } // stopped meanwhile by another thread
            Stop(grace);
            return why;
        }

        /// <summary><see cref="RunUntilSignal(EmberStopSignals, TimeSpan, TimeSpan, TimeSpan)"/>
        /// without the refusing phase.</summary>
        public string RunUntilSignal(EmberStopSignals signals, TimeSpan drain, TimeSpan grace)
        {
            return RunUntilSignal(signals, drain, TimeSpan.Zero, grace);
        }

        /// <summary><see cref="RunUntilSignal(EmberStopSignals, TimeSpan, TimeSpan, TimeSpan)"/>
        /// with signals caught from this call on (the server may already run).</summary>
        public string RunUntilSignal(TimeSpan drain, TimeSpan refuse, TimeSpan grace)
        {
            return RunUntilSignal(new EmberStopSignals(), drain, refuse, grace);
        }
    }
}
