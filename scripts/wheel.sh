#!/usr/bin/env bash
# The Python wheel, with the engine inside, built and then tested as an installed package.
#
#   scripts/wheel.sh          build, then test (CI does this)
#   scripts/wheel.sh build    only build: target/wheel/ember-<version>-py3-none-<platform>.whl
#
# Build: `pip wheel bindings/python` packs target/release/libember.so into the package and tags
# the wheel py3-none-linux_x86_64 (ctypes needs no particular Python ABI); `auditwheel show`
# then names the manylinux policy the wheel meets and the wheel is retagged with it.
# Test: a fresh venv in a temporary folder, the wheel installed with --no-index, no checkout on
# sys.path (no PYTHONPATH, no EMBER_LIBRARY): samples/python/hello.py is started and asked over
# HTTP, then the binding tests (tests/python) run against the installed package
# (EMBER_TEST_INSTALLED=1 keeps conftest from adding bindings/python to sys.path).
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$root"
mode="${1:-all}"
PYTHON="${PYTHON:-python3}"
out="$root/target/wheel"

build() {
    # EMBER_NATIVE_LIB: the library to pack (scripts/release.sh: the profile-guided one).
    local native="${EMBER_NATIVE_LIB:-$root/target/release/libember.so}"
    [[ -f "$native" ]] || cargo build --release -j2
    rm -rf "$out" bindings/python/build && mkdir -p "$out"
    EMBER_WHEEL_LIBRARY="$native" "$PYTHON" -m pip wheel -q --no-deps -w "$out" bindings/python
    rm -rf bindings/python/build bindings/python/*.egg-info
    local whl tag
    whl="$(ls "$out"/ember-*.whl)"
    "$PYTHON" -c 'import auditwheel, wheel' 2>/dev/null || "$PYTHON" -m pip install -q auditwheel wheel
    tag="$("$PYTHON" -m auditwheel show "$whl" 2>&1 | tr -d '\n' | sed -n 's/.*platform tag: *"\(manylinux_[0-9_]*_x86_64\)".*/\1/p')"
    if [[ -n "$tag" ]]; then
        "$PYTHON" -m wheel tags --remove --platform-tag "$tag" "$whl" >/dev/null
        echo "auditwheel: consistent with $tag"
    else
        echo "auditwheel found no manylinux tag; keeping linux_x86_64"
    fi
    # The optional C extension (the request crossing in C) must be in the wheel this
    # script ships; without a compiler it would silently fall back to ctypes.
    # The listing is read whole before matching: with pipefail, `zipfile -l | grep -q` fails
    # when grep exits at the first match and the lister dies of the closed pipe.
    local listing
    listing="$("$PYTHON" -m zipfile -l "$out"/ember-*.whl)"
    if grep -q 'ember/_speedups' <<<"$listing"; then
        echo "wheel carries ember._speedups"
    else
        echo "FAIL: the wheel lacks ember._speedups (no C compiler or Python headers?)"; return 1
    fi
    echo "built $(ls "$out"/ember-*.whl)"
}

test_installed() {
    local w whl port pid reply="" pass=0 fail=0
    w="$(mktemp -d)"
    trap 'rm -rf "$w"' RETURN
    whl="$(ls "$out"/ember-*.whl)"
    "$PYTHON" -m venv "$w/venv"
    "$w/venv/bin/python" -m pip install -q --no-index "$whl"
    "$w/venv/bin/python" -m pip install -q pytest pytest-xdist requests "httpx[http2]" websockets
    # Nothing from the checkout: run from the temporary folder with a clean environment.
    local envs=(env -u PYTHONPATH -u EMBER_LIBRARY)
    if (cd "$w" && "${envs[@]}" "$w/venv/bin/python" -c 'import ember; print("installed:", ember.__file__, "engine", ember.engine_version(), "ABI", ember.abi_version())'); then
        pass=$((pass + 1))
    else
        fail=$((fail + 1))
    fi
    port="$("$PYTHON" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
    (cd "$w" && exec "${envs[@]}" "$w/venv/bin/python" "$root/samples/python/hello.py" "$port") >"$w/hello.log" 2>&1 &
    pid=$!
    for _ in $(seq 100); do
        reply="$(curl -s --max-time 2 "http://127.0.0.1:$port/hello/wheel" || true)"
        [[ -n "$reply" ]] && break
        sleep 0.1
    done
    kill -INT "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    if [[ "$reply" == '{"hello": "wheel"}' || "$reply" == '{"hello":"wheel"}' ]]; then
        echo "ok   hello.py from the installed wheel: $reply"; pass=$((pass + 1))
    else
        echo "FAIL hello.py answered '$reply'"; cat "$w/hello.log"; fail=$((fail + 1))
    fi
    echo "== binding tests against the installed wheel"
    if (cd "$w" && "${envs[@]}" EMBER_TEST_INSTALLED=1 EMBER_REQUIRE_SPEEDUPS=1 "$w/venv/bin/python" -m pytest -q -p no:cacheprovider \
          -n "${EMBER_PYTHON_JOBS:-2}" --dist loadfile "$root/tests/python"); then
        pass=$((pass + 1))
    else
        fail=$((fail + 1))
    fi
    echo "wheel: $pass passed, $fail failed"
    [[ $fail -eq 0 ]]
}

build
[[ "$mode" == build ]] && exit 0
test_installed
