#!/bin/sh
# Builds bindings/dotnet/bin/Ember.dll with Mono's C# compiler (mcs, or csc when present).
# Usage: bindings/dotnet/build.sh [--debug]
# Compiles against the .NET Framework 4.6.1 reference assemblies when Mono has them, so an API
# newer than 4.6.1 fails the build.
# Puts Ember.dll.config and (if built) target/release/libember.so next to Ember.dll (put.sh).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out="$here/bin"
mkdir -p "$out"
# Everything is built in a fresh folder and then put into bin/ by rename (put.sh): the compilers
# rewrite an existing output file in place, which kills a program running from bin/.
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

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
$CSC -nologo -target:library -unsafe+ -langversion:7 $opt $refs -doc:"$work/Ember.xml" \
    -nowarn:1591 -out:"$work/Ember.dll" $src

# The System.Web host: Ember.AspNet.dll (EmberAspNetHost) and EmberAspNet.exe (console server).
if [ -n "$refs" ] && [ -f "$api/System.Web.dll" ]; then
    webrefs="$refs -r:$api/System.Web.dll -r:$api/System.Configuration.dll"
else
    webrefs="-r:System.Web.dll -r:System.Configuration.dll"
fi
# shellcheck disable=SC2086
$CSC -nologo -target:library -unsafe+ -langversion:7 $opt $webrefs -r:"$work/Ember.dll" -doc:"$work/Ember.AspNet.xml" \
    -nowarn:1591 -out:"$work/Ember.AspNet.dll" "$here"/aspnet/src/*.cs
# shellcheck disable=SC2086
$CSC -nologo -target:exe -langversion:7 $opt $webrefs -r:"$work/Ember.dll" -r:"$work/Ember.AspNet.dll" \
    -out:"$work/EmberAspNet.exe" "$here/aspnet/EmberAspNet.cs"

# The Mono thread shim (see native/ember_mono.c); optional: without it no thread hooks are set.
if command -v cc >/dev/null 2>&1; then
    cc -O2 -Wall -Wextra -shared -fPIC -o "$work/libember_mono.so" "$here/native/ember_mono.c" -ldl
else
    echo "build.sh: no C compiler, libember_mono.so not built (engine threads then attach to Mono implicitly)" >&2
fi
# By rename, never in place: a program running from bin/ keeps its mapped copy (see put.sh).
"$here/put.sh" "$out" "$work"/* "$here/Ember.dll.config" "$root/target/release/libember.so"
echo "built $out/Ember.dll, Ember.AspNet.dll, EmberAspNet.exe"
