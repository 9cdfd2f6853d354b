"""Hello apps for the Python servers Ember's Python host is compared with.

granian --interface rsgi py_hello:rsgi_app   (Granian's own Rust-facing interface)
granian --interface asgi py_hello:asgi_app
uvicorn py_hello:asgi_app
python -m ember py_hello:wsgi_app --interface wsgi   (bench/py_cost.py's wsgi-bench-pool)
Each answers every request with the seeds' body as application/json.
"""

BODY = b'{"code": 1, "msg": "Hello WebAPI"}'
_RSGI_HEADERS = [("content-type", "application/json")]
_ASGI_START = {
    "type": "http.response.start",
    "status": 200,
    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(BODY)).encode())],
}
_ASGI_BODY = {"type": "http.response.body", "body": BODY}


async def rsgi_app(scope, proto):
    proto.response_bytes(200, _RSGI_HEADERS, BODY)


async def asgi_app(scope, receive, send):
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    await send(_ASGI_START)
    await send(_ASGI_BODY)


_WSGI_HEADERS = [("Content-Type", "application/json"), ("Content-Length", str(len(BODY)))]


def wsgi_app(environ, start_response):
    start_response("200 OK", _WSGI_HEADERS)
    return [BODY]
