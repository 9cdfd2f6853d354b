using System;
using System.IO;
using System.Reflection;
using System.Security.Cryptography;
using System.Text;
using System.Web.Hosting;

namespace Ember.AspNet
{
    /// <summary>
    /// Creates the application's domain. Under Mono it is set up the way Mono's own
    /// ApplicationHost.CreateApplicationHost does it (application base, web.config, bin probing,
    /// a codegen folder, the data keys HttpRuntime reads, the hosting environment), but the host
    /// object is loaded from Ember.AspNet.dll's own file, so the site's bin folder needs no copy
    /// of the server. On the .NET Framework the documented ApplicationHost route is taken; there
    /// Ember.dll and Ember.AspNet.dll must be in the site's bin folder or the GAC, as for every
    /// custom ASP.NET host.
    /// </summary>
    internal static class AppDomainFactory
    {
        static readonly string[] s_webConfigNames = { "web.config", "Web.config", "Web.Config" };

        internal static bool IsMono { get { return Type.GetType("Mono.Runtime") != null; } }

        internal static AppHost Create(string virtualPath, string physicalPath, out AppDomain domain)
        {
            physicalPath = Path.GetFullPath(physicalPath);
            if (!IsMono)
            {
                domain = null;
                return (AppHost)ApplicationHost.CreateApplicationHost(typeof(AppHost), virtualPath, physicalPath);
            }

            string id = DomainId(virtualPath, physicalPath);
            var setup = new AppDomainSetup
            {
                ApplicationBase = physicalPath,
                ApplicationName = id,
                ConfigurationFile = WebConfig(physicalPath),
                DisallowCodeDownload = true,
                PrivateBinPath = Path.Combine(physicalPath, "bin"),
                PrivateBinPathProbe = "*",
            };
            // Compiled pages go below DynamicBase; setting it appends a hash of ApplicationName,
            // and that folder must exist (Mono's own host creates it the same way).
            string codegen = Path.Combine(Path.GetTempPath(), Environment.UserName + "-temp-aspnet-ember");
            setup.DynamicBase = codegen;
            setup.CachePath = codegen;
            Directory.CreateDirectory(setup.DynamicBase);

            domain = AppDomain.CreateDomain(id, null, setup);
            string appPath = physicalPath.EndsWith(Path.DirectorySeparatorChar.ToString(), StringComparison.Ordinal)
                ? physicalPath : physicalPath + Path.DirectorySeparatorChar;
            domain.SetData(".appDomain", "*");
            domain.SetData(".appPath", appPath);
            domain.SetData(".appVPath", virtualPath);
            domain.SetData(".appId", id);
            domain.SetData(".domainId", id);
            domain.SetData(".hostingVirtualPath", virtualPath);
            domain.SetData(".hostingInstallDir", Path.GetDirectoryName(typeof(object).Assembly.Location));
            domain.SetData("DataDirectory", Path.Combine(appPath, "App_Data"));
            domain.SetData(".:!MonoAspNetHostedApp!:.", "yes");
            domain.SetData(AppHost.HostDirKey, Path.GetDirectoryName(typeof(AppHost).Assembly.Location));

            // Mono's ApplicationHost finishes with this callback inside the new domain (shadow
            // copies of bin/ so the application can be updated while it runs; IsHosted).
            MethodInfo env = typeof(ApplicationHost).GetMethod("SetHostingEnvironment", BindingFlags.NonPublic | BindingFlags.Static);
            if (env != null)
                domain.DoCallBack((CrossAppDomainDelegate)Delegate.CreateDelegate(typeof(CrossAppDomainDelegate), env));

            return (AppHost)domain.CreateInstanceFromAndUnwrap(typeof(AppHost).Assembly.Location, typeof(AppHost).FullName);
        }

        static string WebConfig(string dir)
        {
            foreach (string n in s_webConfigNames)
            {
                string p = Path.Combine(dir, n);
                if (File.Exists(p)) return p;
            }
            return Path.Combine(dir, s_webConfigNames[0]);
        }

        /// <summary>Stable per site (a restart reuses its compiled pages), unique per process
        /// generation of the domain is not needed: Mono names the codegen folder by it.</summary>
        static string DomainId(string virtualPath, string physicalPath)
        {
            using (var sha = SHA1.Create())
            {
                byte[] h = sha.ComputeHash(Encoding.UTF8.GetBytes(virtualPath + "\n" + physicalPath));
                var sb = new StringBuilder(16);
                for (int i = 0; i < 8; i++) sb.Append(h[i].ToString("x2"));
                return sb.ToString();
            }
        }
    }
}
