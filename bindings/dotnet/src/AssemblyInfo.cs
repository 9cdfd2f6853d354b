using System.Reflection;

[assembly: AssemblyTitle("Ember")]
[assembly: AssemblyDescription(".NET binding of the Ember in-process HTTP engine")]
[assembly: AssemblyVersion("0.1.0.0")]
[assembly: AssemblyFileVersion("0.1.0.0")]
