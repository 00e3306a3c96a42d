"""A real FastAPI app for the OpenAPI runtime tests; its own document is what pincer reads."""

from __future__ import annotations

from fastapi import FastAPI, Header, HTTPException, Query
from pydantic import BaseModel

API_KEY = "key-9d41c7e2b8a05f36"  # the secret the tests put in pincer's store


class Item(BaseModel):
    name: str
    price: float
    tags: list[str] = []


app = FastAPI(title="Inventory", version="1.0")
ITEMS: dict[int, Item] = {1: Item(name="hammer", price=9.5, tags=["tools"])}


def check(key: str | None) -> None:
    if key != API_KEY:
        raise HTTPException(status_code=401, detail="bad or missing X-Api-Key")


@app.get("/items/{item_id}", operation_id="getItem", summary="Read one item")
def get_item(item_id: int, verbose: bool = False, x_api_key: str | None = Header(default=None)) -> dict:
    check(x_api_key)
    if item_id not in ITEMS:
        raise HTTPException(status_code=404, detail=f"no item {item_id}")
    item = ITEMS[item_id].model_dump()
    return {"id": item_id, **item, **({"verbose": True} if verbose else {})}


@app.post("/items", operation_id="createItem", status_code=201)
def create_item(item: Item, x_api_key: str | None = Header(default=None)) -> dict:
    check(x_api_key)
    new_id = max(ITEMS) + 1
    ITEMS[new_id] = item
    return {"id": new_id, **item.model_dump()}


@app.get("/whoami", operation_id="whoami", summary="Echo the credential back (a leaking API)")
def whoami(x_api_key: str | None = Header(default=None)) -> dict:
    check(x_api_key)
    return {"you_sent": x_api_key}


@app.get("/search", operation_id="search")
def search(tag: list[str] | None = Query(default=None), x_api_key: str | None = Header(default=None)) -> dict:
    check(x_api_key)
    wanted = set(tag or [])
    return {"ids": [i for i, item in ITEMS.items() if wanted <= set(item.tags)]}
