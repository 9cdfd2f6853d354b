using System;
using System.Collections.Generic;
using System.Reflection;
using System.Threading;
using System.Web;

namespace Ember.AspNet
{
    /// <summary>
    /// Takes back the requests that Mono's System.Web drops while its domain unloads. Once
    /// HttpRuntime.UnloadAppDomain ran (web.config, bin/ or Global.asax changed), Mono's
    /// HttpRuntime returns from ProcessRequest without touching a request: RealProcessRequest
    /// skips it ("Domain is unloading, not processing the request"), and once the queue manager
    /// is disposed GetNextRequest neither runs nor queues it. Nothing ends such a request, so
    /// its client would wait for the engine's handler timeout. That phase lasts as long as the
    /// application's Application_End (and Session_End callbacks), before the domain's unload
    /// event closes its <see cref="EntryGate"/>.
    ///
    /// A request that System.Web has not touched (see <see cref="EmberWorkerRequest.Claim"/>)
    /// can go elsewhere unchanged: the application's domain refuses it (DomainEntry.Refused) and
    /// the server's domain hands it to a fresh domain, which it creates at once. One whose
    /// streamed body was already read cannot be replayed: it gets a 503 with Retry-After here.
    /// Lives in the application's domain, one per <see cref="AppHost"/>.
    /// </summary>
    internal sealed class Handback
    {
        static readonly Func<bool> s_unloading = UnloadingProbe();

        // Requests System.Web queued (its thread pool was short of free threads): ProcessRequest
        // returned without touching them and another of its threads runs them later, or drops
        // them if the domain starts unloading first. Answered at the unload event if untouched.
        readonly HashSet<EmberWorkerRequest> _parked = new HashSet<EmberWorkerRequest>();
        long _handedBack, _answered;

        /// <summary>True once System.Web of this domain drops new requests (Mono's internal
        /// HttpRuntime.DomainUnloading; false where there is no such member: the .NET Framework
        /// answers 503 itself while it shuts an application down).</summary>
        internal static bool Unloading { get { return s_unloading(); } }

        static Func<bool> UnloadingProbe()
        {
            try
            {
                PropertyInfo p = typeof(HttpRuntime).GetProperty("DomainUnloading", BindingFlags.NonPublic | BindingFlags.Static);
                MethodInfo get = p == null ? null : p.GetGetMethod(true);
                if (get != null && get.ReturnType == typeof(bool))
                    return (Func<bool>)Delegate.CreateDelegate(typeof(Func<bool>), get);
            }
            catch (Exception ex)
            {
                Console.Error.WriteLine("EmberAspNet: cannot watch System.Web's unloading flag: " + ex.Message);
            }
            return () => false;
        }

        /// <summary>After HttpRuntime.ProcessRequest returned on the request's own thread:
        /// <see cref="DomainEntry.Refused"/> if System.Web dropped it and it can go to a fresh
        /// domain, else <see cref="DomainEntry.Taken"/>.</summary>
        internal int AfterProcess(EmberWorkerRequest wr)
        {
            if (!wr.Untouched) return DomainEntry.Taken;
            if (!Unloading)
            {
                Park(wr);
                return DomainEntry.Taken;
            }
            // Dropped, or queued in a runtime that is going away: whoever claims it first has it.
            if (!wr.TakeBack()) return DomainEntry.Taken;
            if (!wr.BodyPulled) return Refuse();
            Interlocked.Increment(ref _answered);
            AppHost.Answer(wr.RequestToken, 503, AppHost.RestartedText);
            return DomainEntry.Taken;
        }

        /// <summary>Counts a request this domain gives back to the server's domain.</summary>
        internal int Refuse()
        {
            Interlocked.Increment(ref _handedBack);
            return DomainEntry.Refused;
        }

        void Park(EmberWorkerRequest wr)
        {
            wr.Parked = this;
            lock (_parked)
            {
                _parked.Add(wr);
                // Claimed meanwhile (its Claim may have missed the Parked mark): not parked.
                if (!wr.Untouched) _parked.Remove(wr);
            }
        }

        internal void Unpark(EmberWorkerRequest wr)
        {
            lock (_parked) _parked.Remove(wr);
        }

        /// <summary>Unload event: the queued requests System.Web never ran get their 503 now.</summary>
        internal void AnswerParked()
        {
            EmberWorkerRequest[] left;
            lock (_parked)
            {
                left = new EmberWorkerRequest[_parked.Count];
                _parked.CopyTo(left);
                _parked.Clear();
            }
            foreach (EmberWorkerRequest wr in left)
            {
                if (!wr.TakeBack()) continue;
                Interlocked.Increment(ref _answered);
                AppHost.Answer(wr.RequestToken, 503, AppHost.RestartedText);
            }
            long back = Interlocked.Read(ref _handedBack), answered = Interlocked.Read(ref _answered);
            if (back + answered > 0)
            {
                // Once per restart, so that an operator sees the restart cost requests nothing.
                Console.Error.WriteLine("EmberAspNet: " + back + " request(s) handed back to a fresh domain and " + answered +
                    " answered 503 while the application ended (System.Web drops them meanwhile)");
            }
        }
    }
}
