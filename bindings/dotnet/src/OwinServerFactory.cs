using System;
using System.Collections.Generic;
using System.Globalization;
using System.Threading.Tasks;

namespace Ember
{
    using AppFunc = Func<IDictionary<string, object>, Task>;

    /// <summary>
    /// The OWIN server-factory convention used by Katana's hosting (Microsoft.Owin.Hosting:
    /// WebApp.Start(new StartOptions(url) { ServerFactory = "Ember" }, ...)): it loads assembly
    /// "Ember", finds this type by name, calls Initialize, then Create with the application.
    /// </summary>
    public static class OwinServerFactory
    {
        /// <summary>Advertises the OWIN version and the server's capabilities.</summary>
        public static void Initialize(IDictionary<string, object> properties)
        {
            if (properties == null) throw new ArgumentNullException("properties");
            properties["owin.Version"] = "1.0";
            object caps;
            var capabilities = properties.TryGetValue("server.Capabilities", out caps) ? caps as IDictionary<string, object> : null;
            if (capabilities == null)
            {
                capabilities = new Dictionary<string, object>();
                properties["server.Capabilities"] = capabilities;
            }
            capabilities["server.Name"] = "Ember";
        }

        /// <summary>Starts an Ember server for the application on the addresses in
        /// properties["host.Addresses"] (each a dictionary with "scheme", "host", "port",
        /// "path"; host "*" or "+" = every interface). Dispose the result to stop it.</summary>
        public static IDisposable Create(AppFunc app, IDictionary<string, object> properties)
        {
            if (app == null) throw new ArgumentNullException("app");
            if (properties == null) throw new ArgumentNullException("properties");
            var options = new EmberOptions();
            string pathBase = null;
            object addrs;
            if (properties.TryGetValue("host.Addresses", out addrs) && addrs is IList<IDictionary<string, object>>)
            {
                foreach (IDictionary<string, object> a in (IList<IDictionary<string, object>>)addrs)
                {
                    string scheme = Get(a, "scheme") ?? "http";
                    if (!string.Equals(scheme, "http", StringComparison.OrdinalIgnoreCase))
                        throw new NotSupportedException("Ember's OWIN server serves http only, not " + scheme);
                    string host = Get(a, "host") ?? "127.0.0.1";
                    if (host == "*" || host == "+") host = "0.0.0.0";
                    if (host == "localhost") host = "127.0.0.1";
                    string port = Get(a, "port") ?? "80";
                    options.ListenAddresses.Add((host.IndexOf(':') >= 0 ? "[" + host + "]" : host) + ":" + port);
                    string path = (Get(a, "path") ?? string.Empty).TrimEnd('/');
                    if (pathBase == null) pathBase = path;
                    else if (pathBase != path) throw new NotSupportedException("one path base per server");
                }
            }
            if (options.ListenAddresses.Count == 0) options.ListenAddresses.Add("127.0.0.1:8080");
            var server = new EmberOwinServer(app, options, pathBase ?? string.Empty);
            server.Start();
            return server;
        }

        static string Get(IDictionary<string, object> d, string key)
        {
            object v;
            return d.TryGetValue(key, out v) && v != null ? Convert.ToString(v, CultureInfo.InvariantCulture) : null;
        }
    }
}
