"""The endpoints outside the resource paths: health (``/healthz``, ``/livez``, ``/readyz``, public),
``/version``, ``/metrics``, OpenAPI v2 and v3 and discovery (``/api``, ``/apis``), which need an
authenticated user allowed the non-resource URL."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import orjson
from starlette.requests import Request
from starlette.responses import Response

from ironpool.api import errors
from ironpool.apiserver.auth.authorizer import authorize_url
from ironpool.apiserver.endpoints.bodies import JSON
from ironpool.apiserver.endpoints.openapi import (
    openapi_document,
    openapi_v3_discovery,
    openapi_v3_group_version,
)
from ironpool.apiserver.endpoints.responses import error_response, json_response
from ironpool.apiserver.endpoints.version import server_version

if TYPE_CHECKING:
    from ironpool.apiserver.app import ApiServer


class NonResourceEndpoints:
    """The handlers of the non-resource URLs of one :class:`ironpool.apiserver.app.ApiServer`."""

    def __init__(self, server: ApiServer) -> None:
        self.server = server
        self._openapi: bytes | None = None

    async def healthz(self, request: Request) -> Response:
        return Response(b"ok", media_type="text/plain")

    async def readyz(self, request: Request) -> Response:
        try:
            if not self.server.started:
                await self.server.start()  # ready once it can serve without a start-up pause
            await self.server.store.current_revision()
        except Exception as exc:
            return Response(f"store not ready: {exc}".encode(), status_code=503, media_type="text/plain")
        return Response(b"ok", media_type="text/plain")

    async def version(self, request: Request) -> Response:
        return json_response(server_version())

    async def _authenticated(self, request: Request) -> Response | None:
        """None when the request authenticates and may get this non-resource URL, else the 401/403."""
        try:
            user = await self.server.identify(request)
            authorize_url(self.server.authorize, user, "get", request.url.path)
        except errors.ApiError as exc:
            return error_response(exc)
        return None

    async def metrics_endpoint(self, request: Request) -> Response:
        if not self.server.public_metrics and (refused := await self._authenticated(request)) is not None:
            return refused
        body, content_type = await self.server.metrics.render()
        return Response(body, media_type=content_type)

    async def openapi(self, request: Request) -> Response:
        if (refused := await self._authenticated(request)) is not None:
            return refused
        if self._openapi is None:
            self._openapi = orjson.dumps(openapi_document())
        return Response(self._openapi, media_type=JSON)

    async def openapi_v3(self, request: Request) -> Response:
        if (refused := await self._authenticated(request)) is not None:
            return refused
        return Response(openapi_v3_discovery(), media_type=JSON)

    async def openapi_v3_group_version(self, request: Request) -> Response:
        if (refused := await self._authenticated(request)) is not None:
            return refused
        body = openapi_v3_group_version(request.path_params["gv"])
        if body is None:
            return error_response(errors.NotFound(f"no OpenAPI document for {request.url.path}"))
        # The discovery document names this URL with a hash of the content: it never changes.
        cache = "public, immutable, max-age=31536000" if "hash" in request.query_params else "no-cache"
        return Response(body, media_type=JSON, headers={"Cache-Control": cache})

    def discovery(self, build: Callable[..., Any]) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            refused = await self._authenticated(request)
            if refused is not None:
                return refused
            try:
                return json_response(build(**request.path_params))
            except errors.ApiError as exc:  # a group-version not served: 404 as a Status, not a 500
                return error_response(exc)

        return endpoint
