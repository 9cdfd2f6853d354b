"""Packs the engine library into the wheel when the checkout has built one, so that
`pip install bindings/python` works without EMBER_LIBRARY, and tags such a wheel for its
platform (py3-none-linux_x86_64: ctypes needs no particular Python ABI). All metadata is in
pyproject.toml.

It also builds the optional C extension ``ember._speedups`` (the per-request crossing in C,
ember/_crossing.py). It does not link against libember, and a failed compile (no compiler,
no Python headers, not CPython) only leaves it out: the binding then uses ctypes. The
extension's file name carries the CPython version it was built for (e.g.
``_speedups.cpython-311-x86_64-linux-gnu.so``); another Python installing the py3 wheel
ignores it and uses ctypes. EMBER_NO_SPEEDUPS=1 leaves it out on purpose."""

import os
import shutil
import sys
from pathlib import Path

from setuptools import Distribution, Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py

try:
    from setuptools.command.bdist_wheel import bdist_wheel
except ImportError:  # setuptools < 70.1
    try:
        from wheel.bdist_wheel import bdist_wheel
    except ImportError:  # no wheel package either: `build_ext --inplace` needs none
        bdist_wheel = None

NAME = {"darwin": "libember.dylib", "win32": "ember.dll"}.get(sys.platform, "libember.so")
ROOT = Path(__file__).resolve().parents[2]


def engine_library() -> Path | None:
    """EMBER_WHEEL_LIBRARY names the file to pack; else the checkout's release (or debug) build."""
    chosen = os.environ.get("EMBER_WHEEL_LIBRARY")
    if chosen:
        return Path(chosen)
    for folder in ("release", "debug"):
        lib = ROOT / "target" / folder / NAME
        if lib.is_file():
            return lib
    return None


class BuildPyWithEngine(build_py):
    def run(self):
        super().run()
        lib = engine_library()
        if lib is not None:
            dest = Path(self.build_lib) / "ember" / NAME
            self.announce(f"ember: packing {lib}", level=2)
            shutil.copy2(lib, dest)


class OptionalBuildExt(build_ext):
    """A C extension that may fail to build: the ctypes path is the fallback."""

    def run(self):
        try:
            super().run()
        except Exception as e:  # noqa: BLE001 - no compiler at all
            self.warn(f"ember: building ember._speedups failed, the ctypes path will be used: {e}")

    def build_extension(self, ext):
        try:
            super().build_extension(ext)
        except Exception as e:  # noqa: BLE001 - compile or link error
            self.warn(f"ember: building {ext.name} failed, the ctypes path will be used: {e}")


def extensions() -> list:
    if os.environ.get("EMBER_NO_SPEEDUPS") == "1" or sys.implementation.name != "cpython":
        return []
    return [Extension("ember._speedups", ["ember/_speedups.c", "ember/_speedups_asgi.c", "ember/_speedups_scope.c"], optional=True)]


class EngineDistribution(Distribution):
    """With the engine inside, the package is platform-specific (installed to platlib)."""

    def has_ext_modules(self):
        return engine_library() is not None or bool(self.ext_modules)


commands = {"build_py": BuildPyWithEngine, "build_ext": OptionalBuildExt}
if bdist_wheel is not None:
    class PlatformWheel(bdist_wheel):
        """... but not Python-version-specific: ctypes needs no particular Python ABI."""

        def get_tag(self):
            python, abi, plat = super().get_tag()
            return ("py3", "none", plat) if not self.root_is_pure else (python, abi, plat)

    commands["bdist_wheel"] = PlatformWheel


setup(distclass=EngineDistribution, ext_modules=extensions(), cmdclass=commands)
