"""The playground page at `/` and its assets under `/web/`."""

from __future__ import annotations

from fastapi import APIRouter, FastAPI
from fastapi.responses import FileResponse
from fastapi.staticfiles import StaticFiles

from speechgate.web import STATIC_DIR

router = APIRouter()


@router.get("/", include_in_schema=False)
async def playground() -> FileResponse:
    return FileResponse(STATIC_DIR / "index.html", headers={"cache-control": "no-cache"})


def install(app: FastAPI) -> None:
    app.include_router(router)
    app.mount("/web", StaticFiles(directory=STATIC_DIR), name="web")
