"""Finding and checking the native library: errors name the file, another ABI is refused."""
import os
import re
import shutil
import subprocess
import sys

import pytest
from conftest import ROOT

import ember
from ember import _lib


def _import_with(library):
    """Imports ember in a fresh interpreter with EMBER_LIBRARY=library; returns (rc, output)."""
    env = dict(os.environ, EMBER_LIBRARY=str(library))
    proc = subprocess.run([sys.executable, "-c", "import ember; print(ember.abi_version())"],
                          env=env, capture_output=True, text=True, timeout=60)
    return proc.returncode, proc.stdout + proc.stderr


def test_binding_abi_matches_the_header():
    text = open(os.path.join(ROOT, "include", "ember.h"), encoding="utf-8").read()
    header_abi = int(re.search(r"^#define EMBER_ABI_VERSION (\d+)$", text, re.M).group(1))
    assert _lib.ABI_VERSION == header_abi
    assert ember.abi_version() == header_abi


def test_a_missing_library_is_named(tmp_path):
    missing = tmp_path / "nowhere" / "libember.so"
    rc, out = _import_with(missing)
    assert rc != 0
    assert "cannot load the native library" in out and str(missing) in out and "not found" in out


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="patches an ELF header")
def test_a_library_of_another_architecture_is_named(tmp_path):
    wrong = tmp_path / "libember.so"
    shutil.copy(ember._lib.lib._name, wrong)
    with open(wrong, "r+b") as f:  # e_machine = aarch64
        f.seek(18)
        f.write(b"\xb7\x00")
    rc, out = _import_with(wrong)
    assert rc != 0
    assert f"{wrong} is built for arm64, but this Python is x64" in out


@pytest.mark.skipif(not shutil.which("cc") or not sys.platform.startswith("linux"), reason="needs a C compiler")
def test_an_engine_of_another_abi_version_is_refused(tmp_path):
    src = tmp_path / "fake.c"
    src.write_text("unsigned ember_abi_version(void) { return 999; }\n")
    fake = tmp_path / "libember.so"
    subprocess.run(["cc", "-shared", "-fPIC", "-o", str(fake), str(src)], check=True)
    rc, out = _import_with(fake)
    assert rc != 0
    assert str(fake) in out and "ABI version 999" in out and f"needs ABI version {_lib.ABI_VERSION}" in out


@pytest.mark.skipif(os.environ.get("EMBER_TEST_INSTALLED") != "1", reason="only for the installed wheel")
def test_the_installed_package_and_its_own_library_are_used():
    here = os.path.dirname(os.path.abspath(ember.__file__))
    assert not here.startswith(ROOT), here
    assert os.path.dirname(os.path.abspath(_lib.lib._name)) == here
