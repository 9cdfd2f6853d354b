using System.Reflection;
using System.Runtime.CompilerServices;

[assembly: AssemblyTitle("Ember")]
[assembly: AssemblyDescription(".NET binding of the Ember in-process HTTP engine")]
[assembly: AssemblyVersion("0.1.0.0")]
[assembly: AssemblyFileVersion("0.1.0.0")]

// The System.Web host (bindings/dotnet/aspnet) answers requests from inside the ASP.NET
// application domain through the same single-call wire as EmberContext.
[assembly: InternalsVisibleTo("Ember.AspNet")]
