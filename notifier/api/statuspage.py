"""The status page's HTML pages and files (``static/``): the groups (``/``), a group
(``/groups/{cluster}/{group}``), the incidents, one incident and the silences. The pages are
plain files; what they show they read from ``/api``.

Only the files shipped beside the app are served, from memory (they are small, and a file read
per request costs the scans a thread hop or two): a name is looked up, never turned into a path,
so traversal, NUL bytes and names too long for the filesystem are all a 404.
"""

from __future__ import annotations

import functools
import hashlib
import mimetypes
from email.utils import formatdate
from pathlib import Path

from fastapi import APIRouter, HTTPException
from fastapi.responses import FileResponse, Response

STATIC = Path(__file__).parent / "static"

HTML_PAGES = {
    "/incidents": "incidents.html",
    "/incidents/{incident_id}": "incident.html",
    "/silences": "silences.html",
}
"""Pages served from disk as they are (``FileResponse``)."""

router = APIRouter(include_in_schema=False)


class _StaticFile:
    """A file of the status page, read once, with the headers ``FileResponse`` would send."""

    def __init__(self, path: Path) -> None:
        self.content = path.read_bytes()
        stat = path.stat()
        self.media_type = mimetypes.guess_type(path.name)[0] or "text/plain"
        etag = hashlib.md5(f"{stat.st_mtime}-{stat.st_size}".encode(), usedforsecurity=False)
        self.headers = {
            "last-modified": formatdate(stat.st_mtime, usegmt=True),
            "etag": f'"{etag.hexdigest()}"',
        }

    def response(self) -> Response:
        return Response(self.content, media_type=self.media_type, headers=self.headers)


@functools.cache
def _assets() -> dict[str, _StaticFile]:
    return {path.name: _StaticFile(path) for path in STATIC.iterdir() if path.is_file()}


@router.get("/")
async def index() -> Response:
    return _assets()["index.html"].response()


@router.get("/groups/{cluster}/{group}")
async def group_page(cluster: str, group: str) -> Response:
    return _assets()["group.html"].response()


@router.get("/static/{name}")
async def static(name: str) -> Response:
    asset = _assets().get(name)
    if asset is None:
        raise HTTPException(404, "not found")
    return asset.response()


def _add_html(route: str, path: Path) -> None:
    async def html() -> FileResponse:
        return FileResponse(path)

    router.add_api_route(route, html, methods=["GET"])


for _route, _page in HTML_PAGES.items():
    _add_html(_route, STATIC / _page)
