#!/bin/sh
# Builds bindings/dotnet/bin/Ember.dll with Mono's C# compiler (mcs, or csc when present).
# Usage: bindings/dotnet/build.sh [--debug]
# Compiles against the .NET Framework 4.6.1 reference assemblies when Mono has them, so an API
# newer than 4.6.1 fails the build.
# Copies Ember.dll.config and (if built) target/release/libember.so next to Ember.dll.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out="$here/bin"
mkdir -p "$out"

if command -v mcs >/dev/null 2>&1; then CSC=mcs
elif command -v csc >/dev/null 2>&1; then CSC=csc
else echo "no C# compiler: apt-get install -y mono-devel" >&2; exit 1; fi

opt="-optimize+ -debug-"
[ "${1:-}" = "--debug" ] && opt="-optimize- -debug+"
src=$(ls "$here"/src/*.cs)

api=/usr/lib/mono/4.6.1-api
if [ -f "$api/mscorlib.dll" ]; then
    refs="-nostdlib -r:$api/mscorlib.dll -r:$api/System.dll -r:$api/System.Core.dll -r:$api/Facades/System.Runtime.dll"
else
    refs=""
fi
# shellcheck disable=SC2086
$CSC -nologo -target:library -unsafe+ -langversion:7 $opt $refs -doc:"$out/Ember.xml" \
    -nowarn:1591 -out:"$out/Ember.dll" $src

# The System.Web host: Ember.AspNet.dll (EmberAspNetHost) and EmberAspNet.exe (console server).
if [ -n "$refs" ] && [ -f "$api/System.Web.dll" ]; then
    webrefs="$refs -r:$api/System.Web.dll -r:$api/System.Configuration.dll"
else
    webrefs="-r:System.Web.dll -r:System.Configuration.dll"
fi
# shellcheck disable=SC2086
$CSC -nologo -target:library -unsafe+ -langversion:7 $opt $webrefs -r:"$out/Ember.dll" -doc:"$out/Ember.AspNet.xml" \
    -nowarn:1591 -out:"$out/Ember.AspNet.dll" "$here"/aspnet/src/*.cs
# shellcheck disable=SC2086
$CSC -nologo -target:exe -langversion:7 $opt $webrefs -r:"$out/Ember.dll" -r:"$out/Ember.AspNet.dll" \
    -out:"$out/EmberAspNet.exe" "$here/aspnet/EmberAspNet.cs"

# The Mono thread shim (see native/ember_mono.c); optional: without it no thread hooks are set.
if command -v cc >/dev/null 2>&1; then
    cc -O2 -Wall -Wextra -shared -fPIC -o "$out/libember_mono.so" "$here/native/ember_mono.c" -ldl
else
    echo "build.sh: no C compiler, libember_mono.so not built (engine threads then attach to Mono implicitly)" >&2
fi
cp "$here/Ember.dll.config" "$out/"
if [ -f "$root/target/release/libember.so" ]; then cp "$root/target/release/libember.so" "$out/"; fi
echo "built $out/Ember.dll, Ember.AspNet.dll, EmberAspNet.exe"
