"""The web console's files (:mod:`ironpool.apiserver.ui`), read once from the package and served with
a strict Content-Security-Policy: scripts and connections to this origin only, nothing from elsewhere
(the console works offline), no framing.

``/ui`` redirects to ``/ui/``, which is ``index.html``; ``/ui/<file>`` is one of the files in
``static/`` (a name it does not hold is a 404 ``Status``: no paths, no traversal). Every file has a
strong ETag (its content's hash) so a browser revalidates cheaply.
"""

from __future__ import annotations

import hashlib
import mimetypes
from dataclasses import dataclass
from importlib import resources

from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from ironpool.api import errors
from ironpool.apiserver.endpoints.responses import error_response

#: Scripts, styles, fonts and connections from this origin only; styles may be set inline (xterm.js
#: and the bars' widths do); no frames, no forms posted elsewhere.
CSP = ("default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
       "connect-src 'self'; font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; "
       "frame-ancestors 'none'")
_HEADERS = {"Content-Security-Policy": CSP, "X-Content-Type-Options": "nosniff",
            "Referrer-Policy": "no-referrer", "X-Frame-Options": "DENY", "Cache-Control": "no-cache"}
_TYPES = {".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8",
          ".html": "text/html; charset=utf-8", ".txt": "text/plain; charset=utf-8",
          ".svg": "image/svg+xml"}


@dataclass(frozen=True)
class Asset:
    """One file: its bytes, media type and ETag."""

    body: bytes
    media_type: str
    etag: str


def load_assets() -> dict[str, Asset]:
    """Every file of the package's ``static/`` folder by name."""
    out: dict[str, Asset] = {}
    for entry in resources.files("ironpool.apiserver.ui").joinpath("static").iterdir():
        if not entry.is_file() or entry.name.startswith("."):
            continue
        body = entry.read_bytes()
        suffix = "." + entry.name.rsplit(".", 1)[-1] if "." in entry.name else ""
        media = _TYPES.get(suffix) or mimetypes.guess_type(entry.name)[0] or "application/octet-stream"
        out[entry.name] = Asset(body, media, '"' + hashlib.sha256(body).hexdigest()[:32] + '"')
    return out


class UiAssets:
    """The handlers of ``/ui``, ``/ui/`` and ``/ui/{name}``."""

    def __init__(self) -> None:
        self.assets = load_assets()

    async def redirect(self, request: Request) -> Response:
        return RedirectResponse("/ui/", status_code=307)

    async def index(self, request: Request) -> Response:
        return self._serve(request, "index.html")

    async def file(self, request: Request) -> Response:
        return self._serve(request, request.path_params["name"])

    def _serve(self, request: Request, name: str) -> Response:
        asset = self.assets.get(name)
        if asset is None:
            return error_response(errors.NotFound(f"the web console has no file {name!r}"))
        headers = {**_HEADERS, "ETag": asset.etag}
        if request.headers.get("if-none-match") == asset.etag:
            return Response(status_code=304, headers=headers)
        return Response(asset.body, media_type=asset.media_type, headers=headers)
