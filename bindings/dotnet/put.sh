#!/bin/sh
# Copies files into a folder by rename, never over the old file in place (used by the build
# scripts to put Ember.dll, its config and the native libraries beside a program).
# Usage: bindings/dotnet/put.sh <dir> <file>...   (missing files are skipped)
#
# Why: a running program has libember.so (and Ember.dll) mapped. `cp` over it truncates and
# rewrites that same file, so the program's next page fault in the library finds nothing
# there and it dies of SIGSEGV/SIGBUS "while executing native code" (Mono's crash report),
# however identical the new bytes are. That is how the .NET reference app died under load
# while a build ran beside it (issue 12 item 6). A rename leaves the running program its old
# file; the next start gets the new one. tests/dotnet/test_restage.sh checks this.
set -eu
dir=$1
shift
for f in "$@"; do
    [ -f "$f" ] || continue
    dest="$dir/$(basename "$f")"
    # Copying a file onto itself would only make a second inode of the same bytes.
    [ "$(cd "$(dirname "$f")" && pwd)" = "$(cd "$dir" && pwd)" ] && continue
    tmp="$dest.tmp.$$"
    cp "$f" "$tmp"
    mv -f "$tmp" "$dest"
done
