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
    }
}
