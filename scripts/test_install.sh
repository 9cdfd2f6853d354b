#!/usr/bin/env bash
# The C install, tested the way a user consumes it: `make install PREFIX=<tmp>`, then
# samples/c/hello.c built with nothing but `pkg-config --cflags --libs ember` (shared) and
# `pkg-config --static` (static), each run and asked over HTTP.
# Usage: scripts/test_install.sh        (needs cargo, cc, pkg-config, curl)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
command -v pkg-config >/dev/null || { export DEBIAN_FRONTEND=noninteractive; apt-get install -y -qq pkg-config >/dev/null; }
prefix="$(mktemp -d)"
work="$(mktemp -d)"
trap 'rm -rf "$prefix" "$work"' EXIT
fail=0
pass=0
ok() { echo "ok   $*"; pass=$((pass + 1)); }
bad() { echo "FAIL $*"; fail=$((fail + 1)); }

make -s install PREFIX="$prefix"
version="$(sed -n 's/^version = "\(.*\)"/\1/p' Cargo.toml | head -n 1)"
for f in include/ember.h lib/libember.so lib/libember.so.0 "lib/libember.so.$version" lib/libember.a lib/pkgconfig/ember.pc; do
    if [[ -e "$prefix/$f" ]]; then ok "installed $f"; else bad "missing $f"; fi
done
soname="$(readelf -d "$prefix/lib/libember.so.$version" | sed -n 's/.*Library soname: \[\(.*\)\]/\1/p')"
[[ "$soname" == libember.so.0 ]] && ok "soname $soname" || bad "soname is '$soname', want libember.so.0"

export PKG_CONFIG_PATH="$prefix/lib/pkgconfig"
[[ "$(pkg-config --modversion ember)" == "$version" ]] && ok "pkg-config --modversion ember = $version" || bad "pkg-config --modversion"

# The header's version macros agree with the library.
cat > "$work/version.c" <<'C'
#include <stdio.h>
#include <string.h>
#include "ember.h"
int main(void) {
    char want[32];
    snprintf(want, sizeof want, "%d.%d.%d", EMBER_VERSION_MAJOR, EMBER_VERSION_MINOR, EMBER_VERSION_PATCH);
    if (strcmp(want, ember_version()) != 0 || strcmp(EMBER_VERSION_STRING, want) != 0) return 1;
    return ember_abi_version() == EMBER_ABI_VERSION ? 0 : 2;
}
C
# shellcheck disable=SC2046
cc -std=c99 -Wall -Wextra -Werror -o "$work/version" "$work/version.c" $(pkg-config --cflags --libs ember)
if LD_LIBRARY_PATH="$prefix/lib" "$work/version"; then ok "version macros match ember_version()"; else bad "version macros"; fi

serve_and_ask() { # <name> <program>
    local port out pid reply=""
    port="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
    out="$work/$1.out"
    LD_LIBRARY_PATH="$prefix/lib" "$2" "$port" >"$out" 2>&1 &
    pid=$!
    for _ in $(seq 50); do
        reply="$(curl -s --max-time 2 "http://127.0.0.1:$port/" || true)"
        [[ -n "$reply" ]] && break
        sleep 0.1
    done
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    if [[ "$reply" == "Hello from Ember" ]]; then ok "$1 answers: $reply"; else bad "$1 answered '$reply'"; cat "$out"; fi
}

# shellcheck disable=SC2046
cc -std=c99 -Wall -Wextra -Wpedantic -Werror -o "$work/hello_shared" samples/c/hello.c $(pkg-config --cflags --libs ember)
needed="$(readelf -d "$work/hello_shared" | sed -n 's/.*Shared library: \[\(libember[^]]*\)\]/\1/p')"
[[ "$needed" == libember.so.0 ]] && ok "hello needs $needed" || bad "hello needs '$needed', want libember.so.0"
serve_and_ask hello_shared "$work/hello_shared"

# Static: the archive plus pkg-config's private libraries; no libember.so needed at run time.
# shellcheck disable=SC2046
cc -std=c99 -Wall -Wextra -Wpedantic -Werror -o "$work/hello_static" samples/c/hello.c \
    $(pkg-config --cflags ember) "$prefix/lib/libember.a" $(pkg-config --static --libs-only-l ember | sed 's/-lember//')
if grep -q libember <<<"$(readelf -d "$work/hello_static")"; then bad "static hello still needs libember"; else ok "static hello links no libember.so"; fi
serve_and_ask hello_static "$work/hello_static"

make -s uninstall PREFIX="$prefix"
left="$(find "$prefix" -type f -o -type l)"
[[ -z "$left" ]] && ok "make uninstall removed everything" || bad "left after uninstall: $left"

echo "install: $pass passed, $fail failed"
[[ $fail -eq 0 ]]
