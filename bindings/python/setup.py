"""Packs the engine library into the wheel when the checkout has built one, so that
`pip install bindings/python` works without EMBER_LIBRARY. All metadata is in pyproject.toml."""

import shutil
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

NAME = {"darwin": "libember.dylib", "win32": "ember.dll"}.get(sys.platform, "libember.so")
ROOT = Path(__file__).resolve().parents[2]


class BuildPyWithEngine(build_py):
    def run(self):
        super().run()
        for folder in ("release", "debug"):
            lib = ROOT / "target" / folder / NAME
            if lib.is_file():
                dest = Path(self.build_lib) / "ember" / NAME
                self.announce(f"ember: packing {lib}", level=2)
                shutil.copy2(lib, dest)
                break


setup(cmdclass={"build_py": BuildPyWithEngine})
