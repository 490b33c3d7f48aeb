"""The HTTP face of the apiserver: Kubernetes REST paths over the registry, as a Starlette app.

``build_app(store, authenticator)`` returns the ASGI app; ``serve(...)`` runs it with uvicorn inside
the caller's event loop, so ``ironpool up`` can host the apiserver in-process. The hot paths (get,
list, create) avoid per-request model round trips: objects travel as the store's JSON bytes where
possible and are validated only on writes.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import math
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from ironpool.api import errors
from ironpool.api.resources import ResourceInfo, by_path
from ironpool.apiserver.auth import Authenticator, Authorizer, ObjectCheck, User
from ironpool.apiserver.binding import BINDABLE
from ironpool.apiserver.bodies import APPLY_PATCH, JSON, STRATEGIC_PATCH, LargeBodies, media_type, read_body
from ironpool.apiserver.bootstrap import Bootstrap
from ironpool.apiserver.connections import mark_authenticated, uvicorn_options
from ironpool.apiserver.eviction import EVICTABLE
from ironpool.apiserver.fieldmanager import manager_from_user_agent
from ironpool.apiserver.inflight import DEFAULT_PER_USER, InFlight
from ironpool.apiserver.listing import ListOptions, parse_resource_version
from ironpool.apiserver.metrics import Metrics
from ironpool.apiserver.namespace_controller import NamespaceController
from ironpool.apiserver.networking_controller import NetworkingController
from ironpool.apiserver.openapi import (
    discovery_core,
    discovery_core_v1,
    discovery_group,
    discovery_groups,
    openapi_document,
    openapi_v3_discovery,
    openapi_v3_group_version,
)
from ironpool.apiserver.options import ServerOptions
from ironpool.apiserver.rbac.authorizer import Authorization, authorize_url
from ironpool.apiserver.rbac.review import SSAR_PATH, self_subject_access_review
from ironpool.apiserver.registry import Registry
from ironpool.apiserver.schemas import drop_unknown_fields, shape_of
from ironpool.apiserver.tables import TableWriter, include_object, table_version, writer_for
from ironpool.apiserver.tls import TlsFiles, client_subject
from ironpool.apiserver.version import server_version
from ironpool.store.interface import Store

log = logging.getLogger("ironpool.apiserver")

_FIELD_VALIDATION = ("Strict", "Warn", "Ignore")
_ALL_VERBS = ["GET", "POST", "PUT", "PATCH", "DELETE"]
DEFAULT_WATCH_TIMEOUT = 1800.0
BOOKMARK_INTERVAL = 30.0
MAX_LIMIT = 2**63 - 1  # an int64, as Kubernetes reads limit
MAX_PAGE = 2**31
MAX_TIMEOUT_SECONDS = 2**31 - 1
FUTURE_REVISION_WAIT = 3.0  # how long a watch from a revision not reached yet waits (Kubernetes: 3 s)


def json_response(data: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(orjson.dumps(data), status_code=status, media_type=JSON, headers=headers)


def error_response(exc: errors.ApiError) -> Response:
    headers = None if exc.retry_after_seconds is None else {"Retry-After": str(exc.retry_after_seconds)}
    return json_response(exc.to_status(), exc.code, headers)


@dataclass(frozen=True)
class RequestInfo:
    """What a request path names: a resource, and optionally a namespace, an object, a subresource
    (Kubernetes' ``RequestInfo``)."""

    info: ResourceInfo
    namespace: str | None
    name: str | None
    subresource: str | None


def parse_path(path: str) -> RequestInfo:
    """Resolve ``/api/v1/...`` or ``/apis/{group}/{version}/...``; 404 for anything else."""
    parts = [p for p in path.split("/") if p]
    if len(parts) >= 3 and parts[0] == "api":
        group, version, rest = "", parts[1], parts[2:]
    elif len(parts) >= 4 and parts[0] == "apis":
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        raise errors.NotFound(f"the server could not find the requested resource ({path})")
    namespace: str | None = None
    if rest[0] == "namespaces" and len(rest) >= 3 and not (len(rest) == 3 and rest[2] == "status"):
        namespace, rest = rest[1], rest[2:]
    info = by_path(group, version, rest[0])
    if namespace is not None and not info.namespaced:
        raise errors.NotFound(f"{info.plural} are cluster-scoped; there is no {path}")
    if len(rest) > 3 or (len(rest) == 3 and rest[2] not in ("status", "binding", "eviction")):
        raise errors.NotFound(f"the server could not find the requested resource ({path})")
    name = rest[1] if len(rest) >= 2 else None
    subresource = rest[2] if len(rest) == 3 else None
    if subresource == "status" and not info.has_status:
        raise errors.NotFound(f"{info.plural} have no status subresource")
    if subresource == "binding" and info.kind not in BINDABLE:
        raise errors.NotFound(f"{info.plural} have no binding subresource")
    if subresource == "eviction" and info.kind not in EVICTABLE:
        raise errors.NotFound(f"{info.plural} have no eviction subresource")
    return RequestInfo(info, namespace, name, subresource)


# Paths repeat (clients poll the same objects); resolving one costs a few microseconds.
cached_request_info = functools.lru_cache(maxsize=8192)(parse_path)


def truthy(value: str | None) -> bool:
    return value is not None and value.lower() in ("true", "1", "yes")


def dry_run(request: Request) -> bool:
    value = request.query_params.get("dryRun")
    if value is None:
        return False
    if value != "All":
        raise errors.BadRequest(f"dryRun: only 'All' is supported, got {value!r}")
    return True


@dataclass(frozen=True)
class WriteOptions:
    """The query parameters of a write: who makes it, and what to do with unknown fields."""

    manager: str
    field_validation: str
    force: bool

    @classmethod
    def of(cls, request: Request, apply: bool = False) -> WriteOptions:
        q = request.query_params
        manager = q.get("fieldManager") or ""
        if len(manager) > 128 or not manager.isprintable():
            raise errors.BadRequest("fieldManager: must be at most 128 printable characters")
        if apply and not manager:
            raise errors.BadRequest("fieldManager: required for apply patches (application/apply-patch+yaml)")
        validation = q.get("fieldValidation") or "Strict"
        if validation not in _FIELD_VALIDATION:
            raise errors.BadRequest(f"fieldValidation: must be one of {', '.join(_FIELD_VALIDATION)}, "
                                    f"got {validation!r}")
        force = truthy(q.get("force"))
        if force and not apply:
            raise errors.BadRequest("force: only allowed for apply patches (application/apply-patch+yaml)")
        return cls(manager or manager_from_user_agent(request.headers.get("user-agent")), validation, force)

    def unknown_fields(self, info: ResourceInfo, body: Any, sub: str | None = None) -> list[str]:
        """With ``Warn`` or ``Ignore``, drop the fields the kind does not know from ``body``;
        ``Strict`` leaves them for validation to refuse."""
        if self.field_validation == "Strict":
            return []
        return drop_unknown_fields(body, shape_of(info))


def _warnings(dropped: list[str], validation: str) -> dict[str, str]:
    if validation != "Warn" or not dropped:
        return {}
    # One Warning header value per unknown field, as Kubernetes sends them.
    return {"Warning": ", ".join(f'299 - "unknown field \\"{f}\\""' for f in dropped)}


def list_options(request: Request) -> ListOptions:
    q = request.query_params
    limit_s = q.get("limit") or "0"
    try:
        limit = int(limit_s)
    except ValueError:
        raise errors.BadRequest(f"limit: {limit_s!r} is not an integer") from None
    if not 0 <= limit <= MAX_LIMIT:
        raise errors.BadRequest(f"limit: must be between 0 and {MAX_LIMIT}, got {limit_s}")
    return ListOptions(
        label_selector=q.get("labelSelector", ""),
        field_selector=q.get("fieldSelector", ""),
        limit=min(limit, MAX_PAGE),  # more than any store holds: the same as all
        continue_token=q.get("continue", ""),
        resource_version=q.get("resourceVersion", ""),
        send_initial_events=truthy(q.get("sendInitialEvents")),
    )


class ApiServer:
    """Request handling: authentication, routing to the registry, metrics, errors as Status."""

    def __init__(self, store: Store, authenticator: Authenticator, authorize: Authorizer,
                 inflight_per_user: int = DEFAULT_PER_USER) -> None:
        self.store = store
        self.authorize = authorize
        self.registry = Registry(store)
        self.namespaces = NamespaceController(self.registry)
        self.networking = NetworkingController(self.registry)
        own = authorize if isinstance(authorize, Authorization) else None
        self.bootstrap = Bootstrap(self.registry, own)  # starts the authorizer's indexes too
        self._started = False
        self.authenticator = authenticator
        self.metrics = Metrics(store)
        self.inflight = InFlight(inflight_per_user)
        self.large_bodies = LargeBodies()
        self._openapi: bytes | None = None
        self.public_metrics = False

    def authenticate(self, request: Request) -> User:
        user = self.authenticator.authenticate(
            request.headers.get("authorization"), client_subject(request.scope)
        )
        mark_authenticated(request.scope)
        return user

    async def read_body(self, request: Request, *, patch: bool = False, optional: bool = False) -> Any:
        """The decoded body (:func:`.bodies.read_body`); a large-body slot it takes is held until
        the request is answered."""
        stack: contextlib.AsyncExitStack = request.state.exit_stack
        return await read_body(request, self.large_bodies, stack, patch=patch, optional=optional)

    async def handle(self, request: Request) -> Response:
        started = time.perf_counter()
        verb, resource = request.method, "unknown"
        try:
            user = self.authenticate(request)
            request_info = cached_request_info(request.url.path)
            resource = request_info.info.plural
            if not self._started:
                await self._start()
            with self.inflight.hold(user.name):
                async with contextlib.AsyncExitStack() as stack:
                    request.state.exit_stack = stack
                    verb, response = await self.dispatch(request, user, request_info)
        except errors.ApiError as exc:
            response = error_response(exc)
        except ClientDisconnect:  # the client went away mid-body: nobody to answer, nothing to log
            log.debug("client disconnected during %s %s", request.method, request.url.path)
            response = Response(status_code=400)
        except Exception as exc:  # a bug must become a 500 Status, not a dropped connection
            log.exception("internal error handling %s %s", request.method, request.url.path)
            response = error_response(errors.InternalError(f"internal error: {type(exc).__name__}: {exc}"))
        self.metrics.observe(verb, resource, response.status_code, time.perf_counter() - started)
        return response

    async def _start(self) -> None:
        """Before the first request: the system namespace, and namespaces left terminating."""
        await self.bootstrap.ensure()
        if not self._started:
            self._started = True
            await self.namespaces.resume()
            await self.networking.resume()

    async def dispatch(self, request: Request, user: User, t: RequestInfo) -> tuple[str, Response]:
        method = request.method
        info, ns, name = t.info, t.namespace, t.name
        reg = self.registry
        if name is None:
            if method == "GET":
                verb = "watch" if truthy(request.query_params.get("watch")) else "list"
                cond = self.authorize(user, verb, info.plural, ns, None)
                if cond is not None and cond.selector is not None:
                    cond.selector(request.query_params.get("fieldSelector", ""))
                if verb == "watch":
                    return "WATCH", await self.watch(request, t)
                table = table_version(request.headers.get("accept"))
                if table is not None:
                    include = include_object(request.query_params.get("includeObject"))
                    page = await reg.list_page(info, ns, list_options(request))
                    body = writer_for(info).table(page.items, page.metadata, include, table)
                    return "LIST", Response(body, media_type=JSON)
                return "LIST", Response(await reg.list(info, ns, list_options(request)), media_type=JSON)
            if method == "POST":
                cond = self.authorize(user, "create", info.plural, ns, None)
                if info.namespaced and ns is None:
                    raise errors.MethodNotAllowed(f"create {info.plural} under /namespaces/{{namespace}}/")
                body = await self.read_body(request)
                opts = WriteOptions.of(request)
                dropped = opts.unknown_fields(info, body)
                created = await reg.create(
                    info, ns, body, dry_run=dry_run(request), check=cond.objects if cond else None,
                    manager=opts.manager,
                )
                return "POST", json_response(created, 201, _warnings(dropped, opts.field_validation))
            raise errors.MethodNotAllowed(f"{method} is not supported on a collection of {info.plural}")
        if info.namespaced and ns is None:
            raise errors.NotFound(
                f"namespaced {info.plural} live under /namespaces/{{namespace}}/{info.plural}"
            )
        sub = t.subresource
        if sub == "binding" and method != "POST":
            raise errors.MethodNotAllowed(f"{method} is not supported on {request.url.path}: POST a Binding")
        if sub == "eviction" and method != "POST":
            raise errors.MethodNotAllowed(f"{method} is not supported on {request.url.path}: "
                                          "POST an Eviction")
        if method == "GET":
            cond = self.authorize(user, "get", _resource(info, sub), ns, name)
            if cond is not None and cond.objects is not None:  # an index unsure of a get asks the store
                await cond.objects(None, None, self.store)
            raw = await reg.get_raw(info, ns, name)
            table = table_version(request.headers.get("accept")) if sub is None else None
            if table is not None:
                include = include_object(request.query_params.get("includeObject"))
                raw = writer_for(info).table([raw], {}, include, table)
            return "GET", Response(raw, media_type=JSON)
        if method in ("PUT", "PATCH"):
            patch = method == "PATCH"
            cond = self.authorize(user, "patch" if patch else "update", _resource(info, sub), ns, name)
            ctype = media_type(request)
            body = await self.read_body(request, patch=patch)
            opts = WriteOptions.of(request, apply=patch and ctype == APPLY_PATCH)
            dropped = opts.unknown_fields(info, body)
            check = cond.objects if cond else None
            if not patch:
                obj = await reg.update(info, ns, name, body, subresource=sub, dry_run=dry_run(request),
                                       check=check, manager=opts.manager)
            elif ctype == APPLY_PATCH:
                def may_create() -> ObjectCheck | None:
                    # Applying to a missing object creates it: that takes the right to create.
                    created = self.authorize(user, "create", info.plural, ns, None)
                    return created.objects if created else None

                obj = await reg.apply(info, ns, name, body, manager=opts.manager, force=opts.force,
                                      subresource=sub, dry_run=dry_run(request), check=check,
                                      may_create=may_create)
            else:
                obj = await reg.patch(info, ns, name, body, subresource=sub, dry_run=dry_run(request),
                                      check=check, manager=opts.manager, strategic=ctype == STRATEGIC_PATCH)
            return method, json_response(obj, headers=_warnings(dropped, opts.field_validation))
        if method == "POST" and sub == "binding":
            cond = self.authorize(user, "create", _resource(info, sub), ns, name)
            status = await reg.bind(info, ns, name, await self.read_body(request), dry_run=dry_run(request),
                                    check=cond.objects if cond else None)
            return "POST", json_response(status, 201)
        if method == "POST" and sub == "eviction":
            cond = self.authorize(user, "create", _resource(info, sub), ns, name)
            body = await self.read_body(request, optional=True)
            status = await reg.evict(info, ns, name, body, dry_run=dry_run(request),
                                     check=cond.objects if cond else None)
            return "POST", json_response(status, 201)
        if method == "DELETE" and sub is None:
            cond = self.authorize(user, "delete", info.plural, ns, name)
            options = await self.read_body(request, optional=True)
            obj = await reg.delete(
                info, ns, name, options, dry_run=dry_run(request), check=cond.objects if cond else None
            )
            return "DELETE", json_response(obj)
        raise errors.MethodNotAllowed(f"{method} is not supported on {request.url.path}")

    async def watch(self, request: Request, t: RequestInfo) -> Response:
        options = list_options(request)
        q = request.query_params
        timeout_s = q.get("timeoutSeconds")
        try:
            timeout = float(timeout_s) if timeout_s else DEFAULT_WATCH_TIMEOUT
        except ValueError:
            raise errors.BadRequest(f"timeoutSeconds: {timeout_s!r} is not a number") from None
        if not math.isfinite(timeout) or not 0 <= timeout <= MAX_TIMEOUT_SECONDS:
            raise errors.BadRequest(
                f"timeoutSeconds: must be between 0 and {MAX_TIMEOUT_SECONDS}, got {timeout_s}")
        start = parse_resource_version(options.resource_version, "resourceVersion")
        if start and not options.send_initial_events:
            await self._wait_for_revision(start)
        bookmarks = truthy(q.get("allowWatchBookmarks"))
        options.predicate()  # a malformed selector is a 400 before the stream starts
        version = table_version(request.headers.get("accept"))
        table = None
        if version is not None:
            table = WatchTable(writer_for(t.info), include_object(q.get("includeObject")), version)
        return StreamingResponse(
            self._watch_stream(t, options, timeout, bookmarks, table),
            media_type=JSON,
            headers={"Cache-Control": "no-cache"},
        )

    async def _wait_for_revision(self, revision: int) -> None:
        """Wait a little for a revision this apiserver has not seen yet (another apiserver may have
        written it), then answer 504 as Kubernetes does ("Too large resource version")."""
        deadline = time.monotonic() + FUTURE_REVISION_WAIT
        while (current := await self.store.current_revision()) < revision:
            if time.monotonic() >= deadline:
                raise TooLargeResourceVersion(
                    f"Too large resource version: {revision}, current: {current}", retry_after_seconds=1,
                    causes=[errors.Cause("resourceVersion", "Too large resource version",
                                         "ResourceVersionTooLarge")],
                )
            await asyncio.sleep(0.05)

    async def _watch_stream(
        self, t: RequestInfo, options: ListOptions, timeout: float, bookmarks: bool,
        table: WatchTable | None = None,
    ) -> AsyncIterator[bytes]:
        info = t.info
        events = aiter(self.registry.watch(info, t.namespace, options))
        deadline = time.monotonic() + timeout
        last_rev = options.resource_version or "0"
        pending: asyncio.Future[tuple[str, dict[str, Any] | None, bytes | None, int]] | None = None
        self.metrics.watchers.inc()
        try:
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                if pending is None:
                    pending = asyncio.ensure_future(anext(events))
                done, _ = await asyncio.wait({pending}, timeout=min(remaining, BOOKMARK_INTERVAL))
                if not done:
                    if bookmarks and remaining > BOOKMARK_INTERVAL:
                        yield _bookmark(info, last_rev)
                    continue
                try:
                    type_, obj, raw, rev = pending.result()
                except StopAsyncIteration:
                    break
                finally:
                    pending = None
                last_rev = str(rev)
                body = raw if raw is not None else orjson.dumps(obj)
                if table is not None and type_ != "BOOKMARK":
                    body = table.event(body, last_rev)
                yield b'{"type":"' + type_.encode() + b'","object":' + body + b"}\n"
        except errors.ApiError as exc:
            yield orjson.dumps({"type": "ERROR", "object": exc.to_status()}) + b"\n"
        except Exception as exc:  # headers are sent: report in-band, as Kubernetes does
            log.exception("watch of %s failed", info.plural)
            status = errors.InternalError(f"watch failed: {type(exc).__name__}: {exc}").to_status()
            yield orjson.dumps({"type": "ERROR", "object": status}) + b"\n"
        finally:
            self.metrics.watchers.dec()
            if pending is not None:
                # The generator is running inside this task: let the cancellation finish it
                # before closing, or aclose() finds it still running.
                pending.cancel()
                await asyncio.wait({pending})
            await events.aclose()  # type: ignore[attr-defined]

    # -- unauthenticated and discovery endpoints ------------------------------------------------

    async def healthz(self, request: Request) -> Response:
        return Response(b"ok", media_type="text/plain")

    async def readyz(self, request: Request) -> Response:
        try:
            await self.store.current_revision()
        except Exception as exc:
            return Response(f"store not ready: {exc}".encode(), status_code=503, media_type="text/plain")
        return Response(b"ok", media_type="text/plain")

    async def version(self, request: Request) -> Response:
        return json_response(server_version())

    async def _authenticated(self, request: Request) -> Response | None:
        """None when the request authenticates and may get this non-resource URL, else the 401/403."""
        try:
            user = self.authenticate(request)
            await self.bootstrap.ensure()
            authorize_url(self.authorize, user, "get", request.url.path)
        except errors.ApiError as exc:
            return error_response(exc)
        return None

    async def metrics_endpoint(self, request: Request) -> Response:
        if not self.public_metrics and (refused := await self._authenticated(request)) is not None:
            return refused
        body, content_type = await self.metrics.render()
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
            return refused or json_response(build(**request.path_params))

        return endpoint


class TooLargeResourceVersion(errors.ApiError):
    """504: a watch from a revision the store has not reached."""

    code = 504
    reason = "Timeout"


class WatchTable:
    """Watch events as Tables of one row; only the first carries the column definitions."""

    def __init__(self, writer: TableWriter, include: str, version: str) -> None:
        self.writer, self.include, self.version = writer, include, version
        self.headers = True

    def event(self, raw: bytes, revision: str) -> bytes:
        meta = {"resourceVersion": revision}
        body = self.writer.table([raw], meta, self.include, self.version, self.headers)
        self.headers = False
        return body


def _resource(info: ResourceInfo, sub: str | None) -> str:
    return f"{info.plural}/{sub}" if sub else info.plural


def _bookmark(info: ResourceInfo, revision: str) -> bytes:
    obj = {"apiVersion": info.api_version, "kind": info.kind, "metadata": {"resourceVersion": revision}}
    return orjson.dumps({"type": "BOOKMARK", "object": obj}) + b"\n"


def build_app(
    store: Store, authenticator: Authenticator, authorize: Authorizer | None = None,
    options: ServerOptions | None = None,
) -> Starlette:
    """The apiserver's ASGI app over ``store`` (the caller owns its lifecycle); RBAC unless told."""
    options = options or ServerOptions()
    authorize = authorize or Authorization(store, options.authorization_mode)
    server = ApiServer(store, authenticator, authorize, options.inflight_per_user)
    server.public_metrics = options.public_metrics
    server.inflight = InFlight(options.inflight_per_user, options.memory_limit)
    routes = [
        Route("/healthz", server.healthz, methods=["GET"]),
        Route("/livez", server.healthz, methods=["GET"]),
        Route("/readyz", server.readyz, methods=["GET"]),
        Route("/metrics", server.metrics_endpoint, methods=["GET"]),
        Route("/version", server.version, methods=["GET"]),
        Route("/openapi/v3", server.openapi_v3, methods=["GET"]),
        Route("/openapi/v3/{gv:path}", server.openapi_v3_group_version, methods=["GET"]),
        Route("/openapi.json", server.openapi, methods=["GET"]),
        Route("/api", server.discovery(discovery_core), methods=["GET"]),
        Route("/api/v1", server.discovery(discovery_core_v1), methods=["GET"]),
        Route("/apis", server.discovery(discovery_groups), methods=["GET"]),
        Route("/apis/{group}/{version}", server.discovery(discovery_group), methods=["GET"]),
        Route(SSAR_PATH, functools.partial(self_subject_access_review, server), methods=["POST"]),
        Route("/api/{rest:path}", server.handle, methods=_ALL_VERBS),
        Route("/apis/{rest:path}", server.handle, methods=_ALL_VERBS),
    ]
    app = Starlette(routes=routes)
    app.state.apiserver = server

    async def not_found(request: Request, exc: Exception) -> Response:
        return error_response(
            errors.NotFound(f"the server could not find the requested resource ({request.url.path})")
        )

    async def not_allowed(request: Request, exc: Exception) -> Response:
        return error_response(
            errors.MethodNotAllowed(f"{request.method} is not supported on {request.url.path}")
        )

    app.add_exception_handler(404, not_found)
    app.add_exception_handler(405, not_allowed)
    app.add_middleware(ResourcePaths, server=server)
    return app


class ResourcePaths:
    """Sends resource requests straight to the handler, skipping the router's regex scan.

    The router still serves them too (same handler), so this is purely a shortcut for the hot path.
    """

    def __init__(self, app: ASGIApp, server: ApiServer) -> None:
        self.app = app
        self.server = server

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            path: str = scope["path"]
            if ((path.startswith("/api/") and path.count("/") >= 3) or (
                    path.startswith("/apis/") and path.count("/") >= 4)) and path != SSAR_PATH:
                response = await self.server.handle(Request(scope, receive))
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


async def serve(
    store: Store,
    authenticator: Authenticator,
    host: str = "127.0.0.1",
    port: int = 8443,
    authorize: Authorizer | None = None,
    tls: TlsFiles | None = None,
    options: ServerOptions | None = None,
) -> None:
    """Serve the API on ``host:port`` in the running event loop until cancelled or signalled.

    With ``tls`` it serves HTTPS (and accepts client certificates of its client CA), otherwise
    plain HTTP.
    """
    import uvicorn

    options = options or ServerOptions()
    protocol_options, _ = uvicorn_options(tls, options.connections)
    config = uvicorn.Config(
        build_app(store, authenticator, authorize, options),
        host=host,
        port=port,
        loop="none",
        lifespan="off",
        access_log=False,
        proxy_headers=False,
        log_level="warning",
        timeout_graceful_shutdown=2,
        backlog=4096,
        **protocol_options,
    )
    await uvicorn.Server(config).serve()


__all__ = ["build_app", "serve"]
