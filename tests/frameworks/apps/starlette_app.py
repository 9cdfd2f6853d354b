"""Starlette test app: routing, path params, form, cookies, redirect, middleware, lifespan."""
import contextlib

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.responses import JSONResponse, PlainTextResponse, RedirectResponse, Response
from starlette.routing import Route


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
], middleware=[Middleware(Stamp)], lifespan=lifespan)
