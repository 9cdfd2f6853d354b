#!/bin/sh
# Builds the .NET samples with Mono: EmberRef.exe (reference app) and Hello.exe, next to their
# sources, with Ember.dll, Ember.dll.config and libember.so put beside them (by rename) so that
# `mono samples/dotnet/EmberRef.exe 0` runs from any directory.
# Needs: bindings/dotnet/build.sh run first (it is run here if Ember.dll is missing).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
lib="$root/bindings/dotnet/bin"
[ -f "$lib/Ember.dll" ] || "$root/bindings/dotnet/build.sh"
if command -v mcs >/dev/null 2>&1; then CSC=mcs; else CSC=csc; fi
# Built in a fresh folder, then put here by rename (mcs rewrites an existing output in place).
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
$CSC -nologo -optimize+ -langversion:7 -r:"$lib/Ember.dll" -out:"$work/EmberRef.exe" "$here"/EmberRef*.cs
$CSC -nologo -optimize+ -langversion:7 -r:"$lib/Ember.dll" -out:"$work/Hello.exe" "$here/Hello.cs"

# By rename, never in place: a reference app running from here (a test, a bench, a soak)
# keeps the files it has mapped; cp over them killed it (see bindings/dotnet/put.sh).
"$root/bindings/dotnet/put.sh" "$here" "$work/EmberRef.exe" "$work/Hello.exe" "$lib/Ember.dll" "$lib/Ember.dll.config" "$lib/libember_mono.so" \
    "$root/target/release/libember.so"
echo "built $here/EmberRef.exe $here/Hello.exe"
