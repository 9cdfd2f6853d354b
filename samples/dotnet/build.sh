#!/bin/sh
# Builds the .NET samples with Mono: EmberRef.exe (reference app) and Hello.exe, next to their
# sources, with Ember.dll, Ember.dll.config and libember.so copied beside them so that
# `mono samples/dotnet/EmberRef.exe 0` runs from any directory.
# Needs: bindings/dotnet/build.sh run first (it is run here if Ember.dll is missing).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
lib="$root/bindings/dotnet/bin"
[ -f "$lib/Ember.dll" ] || "$root/bindings/dotnet/build.sh"
if command -v mcs >/dev/null 2>&1; then CSC=mcs; else CSC=csc; fi
$CSC -nologo -optimize+ -langversion:7 -r:"$lib/Ember.dll" -out:"$here/EmberRef.exe" "$here"/EmberRef*.cs
$CSC -nologo -optimize+ -langversion:7 -r:"$lib/Ember.dll" -out:"$here/Hello.exe" "$here/Hello.cs"

cp "$lib/Ember.dll" "$lib/Ember.dll.config" "$here/"
if [ -f "$lib/libember_mono.so" ]; then cp "$lib/libember_mono.so" "$here/"; fi
if [ -f "$root/target/release/libember.so" ]; then cp "$root/target/release/libember.so" "$here/"; fi
echo "built $here/EmberRef.exe $here/Hello.exe"
