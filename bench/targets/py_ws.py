"""The WebSocket routes of the reference app as a plain ASGI app, for the anchors of
bench/ws_bench.py (uvicorn with the `websockets` library): /ws echoes, /ws/chat sends every
message to every connection on it, the sender included; /stream?n=N&size=S streams N chunks."""

chat = set()


async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        while True:
            msg = await receive()
            if msg["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif msg["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    if scope["type"] == "http":
        q = dict(kv.split(b"=", 1) for kv in scope["query_string"].split(b"&") if b"=" in kv)
        n, size = int(q.get(b"n", 0)), int(q.get(b"size", 1))
        await send({"type": "http.response.start", "status": 200,
                    "headers": [(b"content-type", b"application/octet-stream")]})
        for i in range(n):
            await send({"type": "http.response.body", "body": bytes([97 + i % 26]) * size, "more_body": True})
        await send({"type": "http.response.body", "body": b""})
        return
    if scope["type"] != "websocket":
        return
    await receive()  # websocket.connect
    await send({"type": "websocket.accept"})
    room = scope["path"] == "/ws/chat"
    if room:
        chat.add(send)
    try:
        while True:
            msg = await receive()
            if msg["type"] == "websocket.disconnect":
                return
            out = {"type": "websocket.send"}
            if msg.get("bytes") is not None:
                out["bytes"] = msg["bytes"]
            else:
                out["text"] = msg["text"]
            if room:
                for peer in list(chat):
                    try:
                        await peer(out)
                    except Exception:
                        chat.discard(peer)
            else:
                await send(out)
    finally:
        chat.discard(send)
