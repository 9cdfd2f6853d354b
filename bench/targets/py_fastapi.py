"""The FastAPI JSON route of the Python host benchmarks (bench/harness.py):

    python -m ember py_fastapi:app        uvicorn py_fastapi:app        granian --interface asgi py_fastapi:app

A plain FastAPI route returning a dict: FastAPI validates and serialises it per request.
The response class renders JSON as json.dumps does, so the body is the seeds' body
byte for byte (FastAPI's default JSON has no spaces).
"""
import json

from fastapi import FastAPI
from fastapi.responses import JSONResponse


class SeedJSONResponse(JSONResponse):
    def render(self, content) -> bytes:
        return json.dumps(content).encode("utf-8")


app = FastAPI(default_response_class=SeedJSONResponse, openapi_url=None)


@app.get("/")
async def hello():
    return {"code": 1, "msg": "Hello WebAPI"}
