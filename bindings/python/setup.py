"""Packs the engine library into the wheel when the checkout has built one, so that
`pip install bindings/python` works without EMBER_LIBRARY, and tags such a wheel for its
platform (py3-none-linux_x86_64: ctypes needs no particular Python ABI). All metadata is in
pyproject.toml."""

import os
import shutil
import sys
from pathlib import Path

from setuptools import Distribution, setup
from setuptools.command.build_py import build_py

try:
    from setuptools.command.bdist_wheel import bdist_wheel
except ImportError:  # setuptools < 70.1
    from wheel.bdist_wheel import bdist_wheel

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


class EngineDistribution(Distribution):
    """With the engine inside, the package is platform-specific (installed to platlib)."""

    def has_ext_modules(self):
        return engine_library() is not None


class PlatformWheel(bdist_wheel):
    """... but not Python-version-specific: ctypes needs no particular Python ABI."""

    def get_tag(self):
        python, abi, plat = super().get_tag()
        return ("py3", "none", plat) if not self.root_is_pure else (python, abi, plat)


setup(distclass=EngineDistribution, cmdclass={"build_py": BuildPyWithEngine, "bdist_wheel": PlatformWheel})
