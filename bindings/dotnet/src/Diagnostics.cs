namespace Ember
{
    /// <summary>Counters for tests and leak hunting.</summary>
    public static class EmberDiagnostics
    {
        /// <summary>Native servers whose delegates are still held (running, stopping, or
        /// waiting for release callbacks). 0 once every server was stopped.</summary>
        public static int LiveNativeServers { get { return NativeInstance.LiveCount; } }

        /// <summary>Zero-copy response bodies still pinned for the engine.</summary>
        public static int PinnedBodies { get { return Wire.PinnedCount; } }

        /// <summary>Requests registered for engine events (RequestAborted, streams) whose final
        /// event has not come yet. 0 once they all ended.</summary>
        public static int EventRegistrations { get { return RequestEvents.LiveCount; } }

        /// <summary>Open WebSocket connections of every running server.</summary>
        public static int OpenWebSockets
        {
            get
            {
                int n = 0;
                foreach (NativeInstance i in NativeInstance.Snapshot()) n += i.SocketCount;
                return n;
            }
        }

        /// <summary>Engine callbacks (request events, WebSocket callbacks) seen while the Mono thread
        /// hooks are active, and how many of them ran on a thread the start hook did not register
        /// (should stay 0: every engine thread is registered when it starts).</summary>
        public static long HookedCallbacks { get { return ThreadHooks.Callbacks; } }
        public static long CallbacksOnUnregisteredThreads { get { return ThreadHooks.ForeignCallbacks; } }
    }
}
