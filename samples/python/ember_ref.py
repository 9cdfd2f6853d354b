"""The Ember reference app (tests/REFERENCE_APP.md) on the Python binding.

    python3 samples/python/ember_ref.py [port]      (default 8080; 0 = pick a free port)

Env: EMBER_DISPATCH=auto|inline|pool (default auto), EMBER_WORKERS=N (default 0 = cores).
EMBER_TLS_CERT + EMBER_TLS_KEY (PEM files): also listen with TLS on EMBER_TLS_PORT (default 0)
and print a second line `listening on https://127.0.0.1:PORT`. EMBER_ACCESS_LOG=<file>
(EMBER_ACCESS_LOG_FORMAT=combined|json). /metrics is the engine's. SIGHUP reloads the
certificates and reopens the access log.
"""

import asyncio
import hashlib
import json
import logging
import os
import signal
import sys
import threading

try:
    import ember
except ImportError:
    # Run straight from a checkout without installing the binding.
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bindings", "python"))
    import ember

from ember import Response

HELLO = Response(b'{"code": 1, "msg": "Hello WebAPI"}', content_type="application/json")
MAX_SLOW_MS = 600_000
MAX_STREAM_WRITES = 1048576
MAX_STREAM_SIZE = 1048576


def json_response(obj, status=200):
    # Spaces after ':' and ',' as in the contract; non-ASCII stays UTF-8 like the C app.
    return Response(json.dumps(obj, ensure_ascii=False).encode("utf-8"), status=status,
                    content_type="application/json")


def build_app() -> ember.Server:
    app = ember.Server(
        dispatch=os.environ.get("EMBER_DISPATCH", "auto"),
        workers=int(os.environ.get("EMBER_WORKERS", "0") or 0),
        max_body_bytes=1048576,
        header_timeout=1.0,
        idle_timeout=5.0,
        handler_timeout=3.0,
        max_header_bytes=16384,
        max_headers=100,
        metrics_path="/metrics",
        access_log=os.environ.get("EMBER_ACCESS_LOG") or None,
        access_log_format=os.environ.get("EMBER_ACCESS_LOG_FORMAT", "combined"),
        max_stream_body_bytes=4 << 30,
        # Behind a load balancer (tests/REFERENCE_APP.md): the engine's health path and
        # the proxies allowed to name the client.
        health_path=os.environ.get("EMBER_HEALTH_PATH") or None,
        trusted_proxies=[c for c in os.environ.get("EMBER_TRUSTED_PROXIES", "").split(",") if c],
    )
    if os.environ.get("EMBER_TLS_CERT") and os.environ.get("EMBER_TLS_KEY"):
        app.listen_tls(int(os.environ.get("EMBER_TLS_PORT", "0") or 0),
                       tls=ember.TlsConfig(os.environ["EMBER_TLS_CERT"], os.environ["EMBER_TLS_KEY"]))

    @app.get("/")
    def hello(req):
        return HELLO

    @app.get("/users/{id}")
    def user(req):
        return json_response({"id": req.params["id"]})

    @app.post("/echo")
    def echo(req):
        ctype = req.headers.get("content-type", "application/octet-stream")
        return Response(req.body, content_type=ctype)

    @app.get("/inspect")
    def inspect(req):
        headers = {}
        for name, value in req.raw_headers:
            # The contract wants U+FFFD for bytes that are not UTF-8 (req.headers would
            # fall back to Latin-1 instead).
            key, text = name.decode("latin-1"), value.decode("utf-8", "replace")
            headers[key] = headers[key] + ", " + text if key in headers else text
        return json_response({
            "method": req.method,
            "path": req.raw_path,
            "query": req.query_string,
            "headers": headers,
            "remote_addr": req.remote_addr,
        })

    @app.get("/slow")
    async def slow(req):
        raw = req.query.get("ms", "")
        if not (raw.isascii() and raw.isdigit()) or int(raw) > MAX_SLOW_MS:
            return json_response({"error": "expected ms=0..600000"}, status=400)
        ms = int(raw)
        # The engine's thread is free while this sleeps; the answer comes from the
        # binding's asyncio thread (the deferred path). A late answer after the 503 of
        # the handler timeout is dropped quietly by the binding.
        await asyncio.sleep(ms / 1000)
        return json_response({"slept_ms": ms})

    @app.get("/fail")
    def fail(req):
        raise RuntimeError("this handler always fails")

    # -- streaming and WebSocket (issue 8) ------------------------------------------------
    @app.get("/sse")
    async def sse(req):
        # The SSE helper: retry first, then events 1..3 100 ms apart, resuming after the
        # client's Last-Event-ID. Coroutine-based, so no thread waits during the pauses.
        async with ember.sse.EventStream(req, retry=1000) as events:
            last = events.last_event_id or ""
            n = int(last) + 1 if last.isascii() and last.isdigit() else 1
            while n <= 3:
                await events.send({"n": n}, event="tick", id=n)
                n += 1
                if n <= 3:
                    await asyncio.sleep(0.1)

    @app.get("/stream")
    def stream(req):
        n, size = req.query.get("n", ""), req.query.get("size", "")
        if not (n.isascii() and n.isdigit() and size.isascii() and size.isdigit()) \
                or int(n) > MAX_STREAM_WRITES or not 1 <= int(size) <= MAX_STREAM_SIZE:
            return json_response({"error": "expected n=0..1048576&size=1..1048576"}, status=400)
        n, size = int(n), int(size)

        def writes():
            # One write per item; the binding pumps it on the engine's writable notices,
            # so nothing is produced ahead of what the client takes.
            for i in range(n):
                yield bytes((97 + i % 26,)) * size
        return ember.StreamingResponse(writes(), content_type="application/octet-stream")

    @app.post("/upload", stream_body=True)
    def upload(req):
        # The body in 64 KiB pieces, never whole; the engine answers 413 past the limit.
        digest, count = hashlib.sha256(), 0
        for piece in req.stream:
            digest.update(piece)
            count += len(piece)
        return json_response({"bytes": count, "sha256": digest.hexdigest()})

    @app.websocket("/ws")
    async def ws_echo(ws):
        async for message in ws:  # str for text, bytes for binary: sent back the same kind
            await ws.send(message)

    # The chat in the callback form: each message goes to the whole group /ws/chat,
    # sender included, as one frame encoded once by the engine.
    app.websocket("/ws/chat", on_message=lambda ws, message: app.broadcast("/ws/chat", message))

    # Static files, compression, the output cache, CORS and filtering are the engine's.
    www = os.environ.get("EMBER_WWW") or "samples/www"
    app.static("/static", www, cache_control="public, max-age=60")
    app.static("/app", www, precompressed=False, spa=True, cache_control="no-cache")   # a single-page app
    app.compression(gzip=True, br=True, min_bytes=1024, zstd=True)
    app.compression_path("/echo", False)
    app.output_cache(64 << 20)
    app.cors("/api", "https://app.example", methods="GET, POST", headers="Content-Type, X-Api-Key",
             expose="X-Api-Version", max_age=600)
    app.deny_ip("127.0.0.2")
    app.max_url_bytes(8192)
    app.allow_methods("GET, HEAD, POST, PUT, DELETE, PATCH, OPTIONS")
    app.deny_path("*.bak")
    app.deny_path("/private/*")

    calls = [0]
    calls_lock = threading.Lock()
    bad_query = json_response({"error": "bad query"}, status=400)

    def number(q, name, default, top):
        raw = q.get(name)
        if raw is None:
            return default
        if not (raw.isascii() and raw.isdigit()) or len(raw) > 9 or int(raw) > top:
            raise ValueError(name)
        return int(raw)

    @app.get("/cached")
    def cached(req):
        q = req.query
        try:
            ttl, pad = number(q, "ttl", 60, 3600), number(q, "pad", 0, 100000)
            cookie, private = number(q, "cookie", 0, 1), number(q, "private", 0, 1)
        except ValueError:
            return bad_query
        if ttl == 0:
            return bad_query
        with calls_lock:
            calls[0] += 1
            n = calls[0]
        body = '{"calls": %d' % n + (', "pad": "%s"' % ("x" * pad) if pad else "") + "}"
        headers = []
        if cookie:
            headers.append(("Set-Cookie", "seen=1"))
        if private:
            headers.append(("Cache-Control", "private"))
        return Response(body.encode("ascii"), headers=headers, content_type="application/json", cache_for=ttl)

    @app.post("/cache/purge")
    def purge(req):
        prefix = req.query.get("prefix", "")
        return json_response({"purged": app.cache_purge(prefix)})

    pong = Response(b'{"pong": true}', headers={"X-Api-Version": "1"}, content_type="application/json")
    app.route(["GET", "POST"], "/api/ping")(lambda req: pong)

    return app


def main() -> int:
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr,
                        format="%(asctime)s %(name)s %(levelname)s %(message)s")
    port = int(sys.argv[1]) if len(sys.argv) > 1 else 8080
    app = build_app()

    def ready(p):
        print(f"listening on http://127.0.0.1:{p}", flush=True)
        for tls_port in app.tls_ports:
            print(f"listening on https://127.0.0.1:{tls_port}", flush=True)

    def on_hup(signum, frame):
        # Renewed certificates and logrotate need no restart.
        try:
            if app.tls_ports:
                app.reload_tls()
            if os.environ.get("EMBER_ACCESS_LOG"):
                app.reopen_access_log()
        except ember.EmberError as e:
            print(f"ember_ref: SIGHUP: {e}", file=sys.stderr)

    if hasattr(signal, "SIGHUP"):
        signal.signal(signal.SIGHUP, on_hup)
    try:
        # Until SIGINT / SIGTERM, then a graceful stop. The lines are printed from `ready`,
        # when the signal handlers are already installed.
        # On SIGTERM: drain EMBER_DRAIN_MS (health 503), then refuse new connections for
        # EMBER_REFUSE_MS while open ones finish, then stop.
        app.run(port, ready=ready, drain=int(os.environ.get("EMBER_DRAIN_MS", "0") or 0) / 1000,
                refuse=int(os.environ.get("EMBER_REFUSE_MS", "0") or 0) / 1000)
    except ember.EmberError as e:
        print(f"ember_ref: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
