"""FastAPI test app: path params, JSON body, dependency, background task, streaming, 422."""
import asyncio
import contextlib

from fastapi import BackgroundTasks, Depends, FastAPI, Header, HTTPException, Request
from fastapi.responses import PlainTextResponse, StreamingResponse
from pydantic import BaseModel

done = []


@contextlib.asynccontextmanager
async def lifespan(app):
    app.state.greeting = "hello from lifespan"
    yield


app = FastAPI(lifespan=lifespan)


class Item(BaseModel):
    name: str
    price: float
    tags: list[str] = []


def paging(skip: int = 0, limit: int = 10, x_tenant: str = Header(default="none")):
    return {"skip": skip, "limit": limit, "tenant": x_tenant}


@app.get("/")
async def root():
    return {"code": 1, "msg": "Hello WebAPI"}


@app.get("/items/{item_id}")
async def read_item(item_id: int, q: str | None = None):
    return {"item_id": item_id, "q": q}


@app.post("/items", status_code=201)
async def create_item(item: Item):
    return {"name": item.name, "price_with_tax": round(item.price * 1.2, 2), "tags": item.tags}


@app.get("/paged")
async def paged(params: dict = Depends(paging)):
    return params


@app.get("/sync")
def sync_route(n: int = 1):  # runs in the thread pool
    return {"square": n * n}


@app.post("/background")
async def background(tasks: BackgroundTasks, word: str):
    tasks.add_task(done.append, word)
    return {"queued": word}


@app.get("/background")
async def background_log():
    return {"done": done}


@app.get("/stream")
async def stream(n: int = 5):
    async def numbers():
        for i in range(n):
            await asyncio.sleep(0.001)
            yield f"line {i}\n"
    return StreamingResponse(numbers(), media_type="text/plain")


@app.get("/state")
async def state(request: Request):
    return PlainTextResponse(request.app.state.greeting)


@app.get("/teapot")
async def teapot():
    raise HTTPException(status_code=418, detail="short and stout", headers={"X-Tea": "yes"})


@app.get("/crash")
async def crash():
    raise RuntimeError("boom")
