"""Starlette test app: routing, path params, form, cookies, redirect, middleware, lifespan, WebSocket."""
import contextlib

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route, WebSocketRoute
from starlette.websockets import WebSocketDisconnect


@contextlib.asynccontextmanager
async def lifespan(app):
    yield {"started": "yes"}


async def homepage(request):
    return JSONResponse({"code": 1, "msg": "Hello WebAPI"})


async def user(request):
    return PlainTextResponse(f"user {request.path_params['name']} {request.query_params.get('x', '-')}")


async def form(request):
    data = await request.form()
    return JSONResponse({k: v for k, v in data.items()})


async def echo(request):
    body = await request.body()
    return Response(body, media_type=request.headers.get("content-type", "application/octet-stream"))


async def cookies(request):
    r = PlainTextResponse("cookie " + request.cookies.get("seen", "none"))
    r.set_cookie("seen", "1", httponly=True)
    return r


async def go(request):
    return RedirectResponse("/", status_code=303)


async def state(request):
    return PlainTextResponse(request.state.started)


# The close codes the WebSocket endpoint saw from its clients (GET /ws-closes reads them).
CLOSES = []


async def ws_room(websocket):
    room = websocket.path_params["room"]
    if room == "locked":
        await websocket.close(code=1008)  # before accepting: the server refuses with 403
        return
    offered = websocket.scope["subprotocols"]
    await websocket.accept(subprotocol="chat.v2" if "chat.v2" in offered else None)
    await websocket.send_json({"room": room, "who": websocket.query_params.get("who"),
                               "header": websocket.headers.get("x-client"), "offered": offered})
    try:
        while True:
            message = await websocket.receive()
            if message["type"] == "websocket.disconnect":
                CLOSES.append(message["code"])
                return
            text = message.get("text")
            if text == "bye":
                await websocket.close(code=4000 + len(room), reason="bye " + room)
                return
            if text is not None:
                await websocket.send_text(text[::-1] if text.startswith("rev:") else text)
            else:
                await websocket.send_bytes(message["bytes"])
    except WebSocketDisconnect as e:
        CLOSES.append(e.code)


async def ws_closes(request):
    return JSONResponse(CLOSES)


class Stamp(BaseHTTPMiddleware):
    async def dispatch(self, request, call_next):
        response = await call_next(request)
        response.headers["X-Stamp"] = "stamped"
        return response


app = Starlette(routes=[
    Route("/", homepage),
    Route("/users/{name}", user),
    Route("/form", form, methods=["POST"]),
    Route("/echo", echo, methods=["POST", "PUT"]),
    Route("/cookies", cookies),
    Route("/go", go),
    Route("/state", state),
    Route("/ws-closes", ws_closes),
    WebSocketRoute("/ws/{room}", ws_room),
], middleware=[Middleware(Stamp)], lifespan=lifespan)
