#!/bin/sh
# Builds tests/dotnet/bin/EmberTests.exe (with Ember.dll, its config and libember.so beside it).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
lib="$root/bindings/dotnet/bin"
[ -f "$lib/Ember.dll" ] || "$root/bindings/dotnet/build.sh"
if command -v mcs >/dev/null 2>&1; then CSC=mcs; else CSC=csc; fi
mkdir -p "$here/bin"
$CSC -nologo -debug+ -langversion:7 -r:"$lib/Ember.dll" -r:System.Core.dll -out:"$here/bin/EmberTests.exe" "$here"/*.cs
cp "$lib/Ember.dll" "$lib/Ember.dll.config" "$here/bin/"
if [ -f "$lib/libember_mono.so" ]; then cp "$lib/libember_mono.so" "$here/bin/"; fi
if [ -f "$root/target/release/libember.so" ]; then cp "$root/target/release/libember.so" "$here/bin/"; fi
echo "built $here/bin/EmberTests.exe"
