"""Ember for Python: an in-process HTTP server on the Ember engine (Rust, via ctypes).

    import ember

    app = ember.Server()

    @app.get("/users/{id}")
    def user(req: ember.Request):
        return {"id": req.params["id"]}

    app.run(8080)
"""

from ._crossing import CROSSING as crossing
from ._front import CACHE_HEADER, compression_codings
from ._lib import candidates as library_candidates
from .body import AsyncBodyStream, BodyStream
from .errors import (BodyTooLarge, BodyTooSlow, ClientDisconnected, EmberError, ReadTimeout, StreamClosed,
                     WebSocketClosed, WouldBlock, WriteTimeout)
from .request import Deferred, Headers, Request
from .response import Response
from .server import Server
from .tls import TlsConfig
from .streaming import AsyncResponseStream, ResponseStream, StreamingResponse
from .websocket import AsyncWebSocket, WebSocket
from . import sse

__all__ = ["Server", "Request", "Response", "Headers", "Deferred", "EmberError", "TlsConfig",
           "StreamingResponse", "ResponseStream", "AsyncResponseStream", "BodyStream", "AsyncBodyStream",
           "WebSocket", "AsyncWebSocket", "sse",
           "ClientDisconnected", "StreamClosed", "WriteTimeout", "ReadTimeout", "WouldBlock", "BodyTooLarge",
           "BodyTooSlow", "WebSocketClosed",
           "engine_version", "abi_version", "library_candidates", "CACHE_HEADER",
           "compression_codings", "crossing"]

__version__ = "0.1.0"


def engine_version() -> str:
    """The loaded engine's version string."""
    from ._lib import lib

    return lib.ember_version().decode("ascii", "replace")


def abi_version() -> int:
    """The loaded engine's ABI version (``EMBER_ABI_VERSION``)."""
    from ._lib import lib

    return lib.ember_abi_version()
