"""The exception raised when an engine call fails."""

from __future__ import annotations

from . import _lib


class EmberError(RuntimeError):
    """An Ember call failed. ``code`` is the ``ember_result`` (negative), ``name`` its
    stable name (e.g. ``"EMBER_ERR_BIND"``), and the message is the engine's own."""

    def __init__(self, code: int, message: str, call: str = "") -> None:
        self.code = code
        self.name = _lib.result_name(code)
        self.call = call
        prefix = f"{call}: " if call else ""
        super().__init__(f"{prefix}{self.name}: {message}" if message else f"{prefix}{self.name}")


def check(code: int, call: str) -> None:
    """Raises EmberError for a failed result; reads the message on the failing thread."""
    if code != _lib.OK:
        raise EmberError(code, _lib.last_error(), call)
