"""The HTTP face of the apiserver: Kubernetes REST paths over the registry, as a Starlette app.

``build_app(store, authenticator)`` returns the ASGI app; ``serve(...)`` runs it with uvicorn inside
the caller's event loop, so ``ironpool up`` can host the apiserver in-process. The hot paths (get,
list, create) avoid per-request model round trips: objects travel as the store's JSON bytes where
possible and are validated only on writes.

Here: the resource requests' dispatch to the registry, and the app's assembly. What a request asks
for is read by :mod:`.request_parsing`; watches stream through :mod:`.watch_stream`; health,
version, metrics, OpenAPI and discovery are :mod:`.nonresource`.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import gc
import logging
import time
from collections.abc import Callable
from typing import Any

from starlette.applications import Starlette
from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from ironpool.api import errors
from ironpool.api.resources import ResourceInfo
from ironpool.apiserver.auth import Authenticator, Authorizer, ObjectCheck, User
from ironpool.apiserver.bodies import APPLY_PATCH, JSON, STRATEGIC_PATCH, LargeBodies, media_type, read_body
from ironpool.apiserver.bootstrap import Bootstrap
from ironpool.apiserver.connections import mark_authenticated, uvicorn_options
from ironpool.apiserver.inflight import DEFAULT_PER_USER, InFlight
from ironpool.apiserver.listening import ListenError, UvicornServer, listen
from ironpool.apiserver.metrics import Metrics
from ironpool.apiserver.namespace_controller import NamespaceController
from ironpool.apiserver.networking_controller import NetworkingController
from ironpool.apiserver.nonresource import NonResourceEndpoints
from ironpool.apiserver.openapi import discovery_core, discovery_core_v1, discovery_group, discovery_groups
from ironpool.apiserver.options import ServerOptions
from ironpool.apiserver.rbac.authorizer import Authorization
from ironpool.apiserver.rbac.review import SSAR_PATH, self_subject_access_review
from ironpool.apiserver.registry import Registry
from ironpool.apiserver.request_parsing import (
    RequestInfo,
    WriteOptions,
    cached_request_info,
    dry_run,
    list_options,
    truthy,
    warnings_header,
)
from ironpool.apiserver.responses import error_response, json_response
from ironpool.apiserver.tables import include_object, table_version, writer_for
from ironpool.apiserver.tls import TlsFiles, client_subject
from ironpool.apiserver.watch_stream import WatchStreams
from ironpool.gc_tuning import collect_less
from ironpool.store.interface import Store

log = logging.getLogger("ironpool.apiserver")

_ALL_VERBS = ["GET", "POST", "PUT", "PATCH", "DELETE"]


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
        self.public_metrics = False
        self.watches = WatchStreams(store, self.registry, self.metrics)

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
            request_info = cached_request_info(request.scope["path"])  # request.url is parsed anew each time
            resource = request_info.info.plural
            if not self._started:
                await self.start()
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

    @property
    def started(self) -> bool:
        return self._started

    async def start(self) -> None:
        """Before the first request: the system namespace and default policy, the authorizer's and
        admission's indexes, and what the controllers left undone. :func:`serve` runs it as it starts
        listening (so the first request does not pay for it: 0.4 s of CPU over 5,000 pools) and
        ``/readyz`` reports ready only once it is done; else the first request runs it."""
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
                    return "WATCH", await self.watches.response(request, t)
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
                return "POST", json_response(created, 201, warnings_header(dropped, opts.field_validation))
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
            return method, json_response(obj, headers=warnings_header(dropped, opts.field_validation))
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


def _resource(info: ResourceInfo, sub: str | None) -> str:
    return f"{info.plural}/{sub}" if sub else info.plural


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
    endpoints = NonResourceEndpoints(server)
    routes = [
        Route("/healthz", endpoints.healthz, methods=["GET"]),
        Route("/livez", endpoints.healthz, methods=["GET"]),
        Route("/readyz", endpoints.readyz, methods=["GET"]),
        Route("/metrics", endpoints.metrics_endpoint, methods=["GET"]),
        Route("/version", endpoints.version, methods=["GET"]),
        Route("/openapi/v3", endpoints.openapi_v3, methods=["GET"]),
        Route("/openapi/v3/{gv:path}", endpoints.openapi_v3_group_version, methods=["GET"]),
        Route("/openapi.json", endpoints.openapi, methods=["GET"]),
        Route("/api", endpoints.discovery(discovery_core), methods=["GET"]),
        Route("/api/v1", endpoints.discovery(discovery_core_v1), methods=["GET"]),
        Route("/apis", endpoints.discovery(discovery_groups), methods=["GET"]),
        Route("/apis/{group}/{version}", endpoints.discovery(discovery_group), methods=["GET"]),
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
    *,
    stop: asyncio.Event | None = None,
    ready: Callable[[int], None] | None = None,
) -> None:
    """Serve the API on ``host:port`` in the running event loop: until ``stop`` is set (a process
    that runs other parts beside the apiserver and stops them in order, as ``ironpool up`` does), or,
    without ``stop``, until SIGINT or SIGTERM.

    ``ready`` is told the port once connections are accepted (port 0 picks a free one). With ``tls``
    it serves HTTPS (and accepts client certificates of its client CA), otherwise plain HTTP. It
    tunes the process's garbage collector for serving (:mod:`ironpool.gc_tuning`) and builds the
    admission and authorization indexes before the first request asks for them. Raises
    :class:`~.listening.ListenError` when it cannot listen there.
    """
    import uvicorn

    options = options or ServerOptions()
    sockets = listen(host, port)
    bound = sockets[0].getsockname()[1]
    protocol_options, _ = uvicorn_options(tls, options.connections)
    app = build_app(store, authenticator, authorize, options)
    config = uvicorn.Config(
        app,
        host=host,
        port=bound,
        loop="none",
        lifespan="off",
        access_log=False,
        proxy_headers=False,
        log_level="warning",
        timeout_graceful_shutdown=2,
        backlog=4096,
        **protocol_options,
    )
    on_started = functools.partial(ready, bound) if ready is not None else None
    server = UvicornServer(config, on_started, signals=stop is None)
    collect_less()  # this process serves requests: see ironpool.gc_tuning
    loop = asyncio.get_running_loop()
    starting = loop.create_task(_start_early(app.state.apiserver), name="ironpool-apiserver-start")
    stopping = loop.create_task(_exit_when(stop, server), name="ironpool-apiserver-stop") if stop else None
    try:
        await server.serve(sockets=sockets)
    finally:
        starting.cancel()
        if stopping is not None:
            stopping.cancel()
        for sock in sockets:
            sock.close()


async def _exit_when(stop: asyncio.Event, server: UvicornServer) -> None:
    await stop.wait()
    server.should_exit = True


async def _start_early(server: ApiServer) -> None:
    try:
        await server.start()
    except Exception as exc:  # the store may not answer yet: /readyz and the first request try again
        log.warning("apiserver start-up deferred: %s", exc)
        return
    gc.freeze()  # the indexes the start-up built live as long as the server (ironpool.gc_tuning)


__all__ = ["ListenError", "build_app", "serve"]
