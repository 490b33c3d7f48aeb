"""``POST /ui/manifests``: the YAML (or JSON) a person pasted into the placement preview, as JSON.

A browser has no YAML parser; the apiserver has one. The helper only parses: it reads no stored object,
so it needs an authenticated user (no anonymous work) but no permission; the preview itself then asks
the REST paths with the user's own rights. A document that is no object with ``apiVersion``, ``kind``
and ``metadata.name`` is refused (400) naming the document and the field.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import yaml
from starlette.requests import Request
from starlette.responses import Response

from ironpool.api import errors
from ironpool.apiserver.endpoints.responses import error_response, json_response

if TYPE_CHECKING:
    from ironpool.apiserver.app import ApiServer

MAX_BYTES = 1 << 20  # a paste or an uploaded file, not a bulk import
_Loader: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def parse_manifests(text: str) -> list[dict[str, Any]]:
    """Every object of a YAML stream, ``kind: ...List`` unpacked; :class:`errors.BadRequest` naming the
    document (1-based) and field of the first one that is not a manifest."""
    try:
        docs = list(yaml.load_all(text, Loader=_Loader))  # a safe loader (CSafeLoader when built)
    except yaml.YAMLError as exc:
        raise errors.BadRequest(f"invalid YAML: {exc}") from None
    out: list[dict[str, Any]] = []
    for number, doc in enumerate(docs, start=1):
        if doc is None:
            continue
        items = doc.get("items") if isinstance(doc, dict) and str(doc.get("kind", "")).endswith("List") \
            else None
        for item in items if isinstance(items, list) else [doc]:
            where = f"document {number}"
            if not isinstance(item, dict):
                raise errors.BadRequest(f"{where}: a manifest must be a mapping, got {type(item).__name__}")
            for field in ("apiVersion", "kind"):
                if not isinstance(item.get(field), str) or not item[field]:
                    raise errors.BadRequest(f"{where}: {field} is required")
            meta = item.get("metadata")
            if not isinstance(meta, dict) or not isinstance(meta.get("name"), str) or not meta["name"]:
                raise errors.BadRequest(f"{where} ({item['kind']}): metadata.name is required")
            out.append(item)
    return out


class ManifestsEndpoint:
    """The handler of ``POST /ui/manifests`` on one apiserver."""

    def __init__(self, server: ApiServer) -> None:
        self.server = server

    async def handle(self, request: Request) -> Response:
        try:
            await self.server.identify(request)
            body = await request.body()
            if len(body) > MAX_BYTES:
                raise errors.BadRequest(f"the manifests are {len(body)} bytes; at most {MAX_BYTES} are read")
            try:
                text = body.decode()
            except UnicodeDecodeError:
                raise errors.BadRequest("the manifests must be UTF-8 text") from None
            return json_response({"items": parse_manifests(text)})
        except errors.ApiError as exc:
            return error_response(exc)
