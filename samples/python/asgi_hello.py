"""A plain ASGI 3 app (no framework) for Ember's ASGI server:

    python -m ember asgi_hello:app --app-dir samples/python --port 8000

GET /            -> {"hello": "asgi"}
POST /echo       -> the request body back, with its Content-Type
GET /slow?ms=N   -> answered after N ms, without holding an engine thread
"""
import asyncio
import json
from urllib.parse import parse_qs


async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    body = (await receive())["body"]
    ctype = b"application/json"
    if scope["path"] == "/echo":
        ctype = dict(scope["headers"]).get(b"content-type", b"application/octet-stream")
    elif scope["path"] == "/slow":
        ms = int(parse_qs(scope["query_string"].decode()).get("ms", ["100"])[0])
        await asyncio.sleep(min(ms, 10_000) / 1000)
        body = json.dumps({"slept_ms": ms}).encode()
    else:
        body = json.dumps({"hello": "asgi"}).encode()
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", ctype)]})
    await send({"type": "http.response.body", "body": body})
