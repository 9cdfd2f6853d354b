"""Which crossing between the engine and Python is in use: the C extension
``ember._speedups`` when it was built and imports, else ctypes.

The extension makes the per-request crossing cheap: the engine calls a plain C function
that takes the GIL and calls the dispatch function, and the answer calls go to the engine
without ctypes' argument conversion. It is optional: a wheel or checkout without it, or
``EMBER_PY_SPEEDUPS=0`` in the environment, uses the ctypes path, which behaves the same.
"""

from __future__ import annotations

import ctypes
import os
from typing import Any

from . import _lib

ENV_VAR = "EMBER_PY_SPEEDUPS"


def _load() -> Any:
    if os.environ.get(ENV_VAR, "1").strip().lower() in ("0", "no", "off", "false"):
        return None
    try:
        from . import _speedups
    except ImportError:
        return None
    # The engine functions it calls: the addresses in the library ctypes loaded, so the
    # extension never links against (or picks another copy of) libember.
    addr = lambda fn: ctypes.cast(fn, ctypes.c_void_p).value  # noqa: E731
    _speedups.bind(addr(_lib.lib.ember_request_respond), addr(_lib.lib.ember_request_respond_answer))
    return _speedups


#: The extension module, or None on the ctypes path.
speedups = _load()
#: "c" (ember._speedups) or "ctypes": what the binding uses for the request crossing.
CROSSING = "c" if speedups is not None else "ctypes"
#: The engine's handler callback on the C path (an ember_handler_fn).
C_HANDLER = _lib.HANDLER_FN(speedups.handler) if speedups is not None else None

SLOT_MASK = 0xFFFFFFFF


def user_data(key: int, slot: int) -> int:
    """A route's user_data on the C path: the server's key and the route's slot."""
    return (key << 32) | slot
