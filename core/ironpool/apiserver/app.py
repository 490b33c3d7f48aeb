"""The apiserver assembled: its rooms wired into one Starlette app, and that app served.

``build_app(store, authenticator)`` returns the ASGI app; ``serve(...)`` runs it with uvicorn inside
the caller's event loop, so ``ironpool up`` can host the apiserver in-process.

:class:`ApiServer` is what every request meets first: authentication, the in-flight limits, then the
resource paths' handlers (:mod:`.endpoints.resources`) over the registry (:mod:`.registry`), with
errors as Kubernetes ``Status`` and the request metrics. The non-resource endpoints (health,
version, metrics, OpenAPI, discovery) are :mod:`.endpoints.nonresource`; what runs before the first
request (the system namespace, default RBAC, the controllers' catch-up) is :meth:`ApiServer.start`.
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
from starlette.requests import ClientDisconnect, HTTPConnection, Request
from starlette.responses import Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from ironpool.api import errors
from ironpool.api.resources import resolve
from ironpool.apiserver.auth.authentication import Authenticator, User
from ironpool.apiserver.auth.authorizer import Authorization
from ironpool.apiserver.auth.impersonation import impersonate, requested
from ironpool.apiserver.auth.interface import Authorizer
from ironpool.apiserver.auth.websocket_token import websocket_bearer
from ironpool.apiserver.controllers.bootstrap import Bootstrap
from ironpool.apiserver.controllers.clusterrole_aggregation import ClusterRoleAggregationController
from ironpool.apiserver.controllers.namespace import NamespaceController
from ironpool.apiserver.controllers.networking import NetworkingController
from ironpool.apiserver.controllers.resourcequota import ResourceQuotaController
from ironpool.apiserver.endpoints.access_review import SSAR_PATH, self_subject_access_review
from ironpool.apiserver.endpoints.bodies import LargeBodies, read_body
from ironpool.apiserver.endpoints.cluster_info import CLUSTER_INFO_PATH, ClusterInfoEndpoint
from ironpool.apiserver.endpoints.exec_stream import ExecStreams
from ironpool.apiserver.endpoints.metrics import Metrics
from ironpool.apiserver.endpoints.nonresource import NonResourceEndpoints
from ironpool.apiserver.endpoints.openapi import (
    discovery_core,
    discovery_core_v1,
    discovery_group,
    discovery_groups,
)
from ironpool.apiserver.endpoints.request_parsing import cached_request_info
from ironpool.apiserver.endpoints.resources import ResourceEndpoints
from ironpool.apiserver.endpoints.responses import error_response
from ironpool.apiserver.endpoints.self_reviews import (
    REVIEW_PATHS,
    SSR_PATH,
    SSRR_PATH,
    self_subject_review,
    self_subject_rules_review,
)
from ironpool.apiserver.endpoints.tables import TableWarmer
from ironpool.apiserver.endpoints.watch_stream import WatchStreams
from ironpool.apiserver.options import ServerOptions
from ironpool.apiserver.registry.generic import Registry
from ironpool.apiserver.serving.connections import mark_authenticated, uvicorn_options
from ironpool.apiserver.serving.inflight import InFlight
from ironpool.apiserver.serving.listening import ListenError, UvicornServer, listen
from ironpool.apiserver.serving.memory_settle import settle_memory
from ironpool.apiserver.serving.seats import Seats
from ironpool.apiserver.serving.tls import TlsFiles, client_subject, without_session_tickets
from ironpool.apiserver.serving.watch_slots import WatchSlots
from ironpool.apiserver.ui import ManifestsEndpoint, UiAssets
from ironpool.gc_tuning import collect_less
from ironpool.store.interface import Store

log = logging.getLogger("ironpool.apiserver")

_ALL_VERBS = ["GET", "POST", "PUT", "PATCH", "DELETE"]


class ApiServer:
    """Request handling: authentication, routing to the registry, metrics, errors as Status."""

    def __init__(self, store: Store, authenticator: Authenticator, authorize: Authorizer,
                 options: ServerOptions | None = None) -> None:
        options = options or ServerOptions()
        self.store = store
        self.authorize = authorize
        self.registry = Registry(store)
        self.namespaces = NamespaceController(self.registry)
        self.networking = NetworkingController(self.registry)
        self.quotas = ResourceQuotaController(self.registry)
        self.aggregation = ClusterRoleAggregationController(self.registry)
        self.registry.observers.append(TableWarmer((resolve("machinepools"), resolve("volumepools"))))
        own = authorize if isinstance(authorize, Authorization) else None
        self.bootstrap = Bootstrap(self.registry, own)  # starts the authorizer's indexes too
        self._started = False
        self.authenticator = authenticator
        self.metrics = Metrics(store)
        self.inflight = InFlight(options.inflight_per_user, options.memory_limit)
        self.large_bodies = LargeBodies()
        self.public_metrics = options.public_metrics
        self.watches = WatchStreams(store, self.registry, self.metrics, WatchSlots(options.watches_per_user),
                                    Seats())
        self.resources = ResourceEndpoints(self.registry, store, authorize, self.watches, self.read_body)
        self.streams = ExecStreams(self.identify, authorize, self.registry, options.machinepoollet_token,
                                   options.stream_ping_interval)

    def authenticate(self, request: HTTPConnection) -> User:
        """Who sent the request (its certificate or token), before any impersonation."""
        # A browser's websocket carries its token as a subprotocol (:mod:`.auth.websocket_token`).
        header = request.headers.get("authorization") or websocket_bearer(request.scope)
        user = self.authenticator.authenticate(header, client_subject(request.scope))
        mark_authenticated(request.scope, user.name)  # 429 past the user's share of connections
        return user

    async def identify(self, request: HTTPConnection) -> User:
        """The user a request acts as: who sent it, or whom it impersonates (:mod:`.auth.impersonation`,
        decided once the authorizer's indexes are up)."""
        user = self.authenticate(request)
        asked = requested(request.scope["headers"])
        if not self._started:
            await self.start()
        if asked is not None:
            user = impersonate(user, asked, self._may_impersonate)
        return user

    def _may_impersonate(self, user: User, group: str, resource: str, namespace: str | None,
                         name: str) -> bool:
        if isinstance(self.authorize, Authorization):
            return self.authorize.may_impersonate(user, group, resource, namespace, name)
        return user.is_admin  # another authorizer knows no impersonate verb: administrators only

    async def read_body(self, request: Request, *, patch: bool = False, optional: bool = False) -> Any:
        """The decoded body (:func:`.endpoints.bodies.read_body`); a large-body slot it takes is held until
        the request is answered."""
        stack: contextlib.AsyncExitStack = request.state.exit_stack
        return await read_body(request, self.large_bodies, stack, patch=patch, optional=optional)

    async def handle(self, request: Request) -> Response:
        started = time.perf_counter()
        verb, resource = request.method, "unknown"
        try:
            user = await self.identify(request)
            request_info = cached_request_info(request.scope["path"])  # request.url is parsed anew each time
            resource = request_info.info.plural
            with self.inflight.hold(user.name):
                async with contextlib.AsyncExitStack() as stack:
                    request.state.exit_stack = stack
                    verb, response = await self.resources.serve(request, user, request_info)
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
            await self.quotas.resume()
            await self.aggregation.resume()


def build_app(
    store: Store, authenticator: Authenticator, authorize: Authorizer | None = None,
    options: ServerOptions | None = None,
) -> Starlette:
    """The apiserver's ASGI app over ``store`` (the caller owns its lifecycle); RBAC unless told."""
    options = options or ServerOptions()
    authorize = authorize or Authorization(store, options.authorization_mode)
    server = ApiServer(store, authenticator, authorize, options)
    endpoints = NonResourceEndpoints(server)
    ui = UiAssets()
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
        Route(SSRR_PATH, functools.partial(self_subject_rules_review, server), methods=["POST"]),
        Route(SSR_PATH, functools.partial(self_subject_review, server), methods=["POST"]),
        Route("/ui", ui.redirect, methods=["GET"]),
        Route("/ui/", ui.index, methods=["GET"]),
        Route("/ui/manifests", ManifestsEndpoint(server).handle, methods=["POST"]),
        Route("/ui/{name}", ui.file, methods=["GET"]),
        Route(CLUSTER_INFO_PATH, ClusterInfoEndpoint(options.cluster_ca_pem).handle, methods=["GET"]),
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
    """Sends resource requests straight to the handler, skipping the router's regex scan, and the
    websocket upgrades of resource paths (a console, ``machines/exec``) to the apiserver's streams.

    The router still serves the HTTP requests too (same handler), so for them this is purely a
    shortcut for the hot path.
    """

    def __init__(self, app: ASGIApp, server: ApiServer) -> None:
        self.app = app
        self.server = server

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http":
            path: str = scope["path"]
            if ((path.startswith("/api/") and path.count("/") >= 3) or (
                    path.startswith("/apis/") and path.count("/") >= 4)) and path not in REVIEW_PATHS \
                    and path != CLUSTER_INFO_PATH:
                response = await self.server.handle(Request(scope, receive))
                await response(scope, receive, send)
                return
        elif scope["type"] == "websocket" and scope["path"].startswith(("/api/", "/apis/")):
            await self.server.streams(scope, receive, send)
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
    tunes the process's garbage collector for serving (:mod:`ironpool.gc_tuning`), builds the
    admission and authorization indexes before the first request asks for them and gives memory
    back after bursts (:mod:`.serving.memory_settle`). Raises :class:`~.listening.ListenError` when
    it cannot listen there.
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
        ws_ping_interval=options.stream_ping_interval,
        ws_ping_timeout=options.stream_ping_interval,
        backlog=4096,
        **protocol_options,
    )
    config.load()
    if config.ssl is not None:
        without_session_tickets(config.ssl)
    on_started = functools.partial(ready, bound) if ready is not None else None
    server = UvicornServer(config, on_started, signals=stop is None)
    collect_less()  # this process serves requests: see ironpool.gc_tuning
    loop = asyncio.get_running_loop()
    starting = loop.create_task(_start_early(app.state.apiserver), name="ironpool-apiserver-start")
    settling = loop.create_task(settle_memory(), name="ironpool-apiserver-memory")
    stopping = loop.create_task(_exit_when(stop, server), name="ironpool-apiserver-stop") if stop else None
    try:
        await server.serve(sockets=sockets)
    finally:
        starting.cancel()
        settling.cancel()
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
