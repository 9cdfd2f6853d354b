#!/bin/sh
# Builds tests/dotnet/bin/EmberTests.exe (with Ember.dll, its config and libember.so beside it).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
lib="$root/bindings/dotnet/bin"
[ -f "$lib/Ember.dll" ] || "$root/bindings/dotnet/build.sh"
if command -v mcs >/dev/null 2>&1; then CSC=mcs; else CSC=csc; fi
mkdir -p "$here/bin"
# Built in a fresh folder, then put into bin/ by rename (mcs rewrites an existing output in place).
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
$CSC -nologo -debug+ -langversion:7 -r:"$lib/Ember.dll" -r:System.Core.dll -out:"$work/EmberTests.exe" "$here"/*.cs
"$root/bindings/dotnet/put.sh" "$here/bin" "$work"/* "$lib/Ember.dll" "$lib/Ember.dll.config" "$lib/libember_mono.so" \
    "$root/target/release/libember.so"
echo "built $here/bin/EmberTests.exe"
