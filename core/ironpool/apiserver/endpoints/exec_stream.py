"""The console stream of ``machines/exec``: the client's websocket relayed to the pool's daemon.

Kubernetes serves ``pods/exec`` as an upgrade: the kube-apiserver authorizes ``create`` on
``pods/exec``, finds the node's kubelet and proxies the stream to it, which talks to the runtime.
IronCore's apiserver does the same for ``machines/exec`` with the machinepoollet of the Machine's
pool, which calls IRI ``Exec`` and streams the URL it returns. Here:

1. the client opens a websocket on ``.../machines/{name}/exec`` offering ``v5.channel.k8s.io`` or
   ``v4.channel.k8s.io`` (:mod:`ironpool.api.channels`), with its token or client certificate;
2. the user is authenticated and authorized (``create`` on ``machines/exec``: RBAC's ``edit`` and
   ``admin`` grant it, ``view`` does not, no pool identity may), the pool's daemon found
   (:class:`~ironpool.apiserver.registry.subresources.exec_handler.ExecHandler`: 400 unbound, 409 not
   running, 503 no endpoint) and dialled with the apiserver's bearer token for poollets;
   every refusal is an HTTP answer with a ``Status`` body, before the upgrade; ``?history=true``
   is passed on (:mod:`ironpool.api.console_history`: the console's recent output first);
3. then bytes flow both ways: stdin (channel 0) to the poollet, everything the console prints to
   the client on stdout (channel 1). Websocket pings on both legs
   (:attr:`~ironpool.apiserver.options.ServerOptions.stream_ping_interval`) keep an idle console
   open; the client leaving (closing the websocket, or ``v5``'s close of stdin) closes the poollet's
   leg, which closes the runtime's, and the console ending sends a ``Success`` Status on channel 3
   before a normal close.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable

import orjson
from starlette.requests import HTTPConnection
from starlette.types import Receive, Scope, Send
from starlette.websockets import WebSocket, WebSocketDisconnect
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus

from ironpool.api import errors
from ironpool.api.channels import CLOSE, ERROR, STDIN, STDOUT, SUBPROTOCOLS, V5, frame, unframe
from ironpool.api.console_history import wants_history, with_history
from ironpool.apiserver.auth import Authorizer, User
from ironpool.apiserver.endpoints.request_parsing import cached_request_info
from ironpool.apiserver.endpoints.responses import error_response
from ironpool.apiserver.registry.generic import Registry
from ironpool.apiserver.registry.subresources.exec_handler import ExecHandler, ExecTarget

log = logging.getLogger(__name__)

_SUCCESS = orjson.dumps({"metadata": {}, "status": "Success"})
_MAX_MESSAGE = 1 << 20


class ExecStreams:
    """Serves the websocket upgrades of the resource paths: ``<plural>/exec`` and nothing else."""

    def __init__(self, identify: Callable[[HTTPConnection], Awaitable[User]], authorize: Authorizer,
                 registry: Registry, poollet_token: str | None, ping_interval: float = 20.0,
                 open_timeout: float = 10.0) -> None:
        self.identify = identify
        self.authorize = authorize
        self.registry = registry
        self.poollet_token = poollet_token
        self.ping_interval = ping_interval
        self.open_timeout = open_timeout
        self.handler = ExecHandler()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        ws = WebSocket(scope, receive, send)
        try:
            subprotocol, upstream = await self._open(ws)
        except errors.ApiError as exc:
            await _refuse(ws, exc)
            return
        except Exception as exc:  # a bug must become a 500 Status, not a dropped connection
            log.exception("internal error opening %s", scope.get("path"))
            await _refuse(ws, errors.InternalError(f"internal error: {type(exc).__name__}: {exc}"))
            return
        async with upstream:
            await ws.accept(subprotocol=subprotocol)
            await relay(ws, upstream, subprotocol)

    async def _open(self, ws: WebSocket) -> tuple[str, ClientConnection]:
        """Who asks, whether they may, where the console is, and the poollet's leg, opened."""
        user = await self.identify(ws)
        t = cached_request_info(ws.scope["path"])
        sub = t.subresource
        if sub is None or sub.name != self.handler.name or t.name is None:
            raise errors.BadRequest(f"websocket upgrades are served on <plural>/exec only, not on "
                                    f"{ws.scope['path']}")
        if t.info.namespaced and t.namespace is None:
            raise errors.NotFound(f"namespaced {t.info.plural} live under /namespaces/{{namespace}}/"
                                  f"{t.info.plural}")
        if self.authorize(user, "create", t.resource, t.namespace, t.name, group=t.group) is not None:
            # A grant on conditions is about a stored object a write would change; a console changes
            # none, so there is nothing to check them against: refuse rather than guess.
            raise errors.Forbidden(f"{t.resource} {t.name!r} is forbidden: User {user.name!r} holds only a "
                                   "conditional grant, which a console cannot satisfy")
        offered = ws.scope.get("subprotocols") or []
        subprotocol = next((p for p in SUBPROTOCOLS if p in offered), None)
        if subprotocol is None:
            raise errors.BadRequest(f"{t.resource} needs the websocket subprotocol "
                                    f"{' or '.join(SUBPROTOCOLS)}; offered: {', '.join(offered) or 'none'}")
        history = wants_history(ws.scope.get("query_string", b"").decode("latin-1"))
        target = await self.handler.target(self.registry, t.info, t.namespace, t.name)
        return subprotocol, await self._dial(target, history)

    async def _dial(self, target: ExecTarget, history: bool = False) -> ClientConnection:
        if not self.poollet_token:
            raise errors.ServiceUnavailable(
                "this apiserver has no credentials for machinepoollets (--machinepoollet-token-file): "
                "it relays no consoles")
        headers = {"Authorization": f"Bearer {self.poollet_token}"}
        where = f"the machinepoollet of pool {target.pool} ({target.url})"
        try:
            return await connect(with_history(target.url, history), additional_headers=headers,
                                 open_timeout=self.open_timeout, ping_interval=self.ping_interval,
                                 ping_timeout=self.ping_interval, max_size=_MAX_MESSAGE, proxy=None)
        except InvalidStatus as exc:
            status = exc.response.status_code
            message = exc.response.body.decode(errors="replace").strip() if exc.response.body else ""
            if status == 404:
                raise errors.NotFound(message or f"{where}: no such machine") from None
            if status == 409:
                raise errors.Conflict(message or f"{where}: the console is not available") from None
            if status in (401, 403):
                raise errors.ServiceUnavailable(f"{where} refused this apiserver's credentials") from None
            raise errors.ServiceUnavailable(f"{where} answered {status}: {message}") from None
        except (OSError, TimeoutError, InvalidHandshake) as exc:
            raise errors.ServiceUnavailable(f"cannot reach {where}: {exc}") from None


async def _refuse(ws: WebSocket, exc: errors.ApiError) -> None:
    with contextlib.suppress(Exception):  # the client may be gone already
        await ws.send_denial_response(error_response(exc))


async def relay(ws: WebSocket, upstream: ClientConnection, subprotocol: str) -> None:
    """Bytes both ways until one side ends; then the other is closed (see the module doc)."""

    async def to_client() -> None:
        with contextlib.suppress(ConnectionClosed):
            async for message in upstream:
                await ws.send_bytes(frame(STDOUT, message.encode() if isinstance(message, str) else message))

    async def from_client() -> None:
        with contextlib.suppress(WebSocketDisconnect):
            while True:
                message = await ws.receive()
                if message["type"] == "websocket.disconnect":
                    raise WebSocketDisconnect(message.get("code", 1000))
                data = message.get("bytes")
                if data is None:
                    data = (message.get("text") or "").encode()
                channel, payload = unframe(data)
                if channel == STDIN and payload:
                    await upstream.send(payload)
                elif channel == CLOSE and subprotocol == V5 and payload[:1] == bytes((STDIN,)):
                    return  # the client closed stdin: it detached
                # RESIZE and the rest: a serial console has no window to size

    console, client = asyncio.create_task(to_client()), asyncio.create_task(from_client())
    await asyncio.wait({console, client}, return_when=asyncio.FIRST_COMPLETED)
    for task in (console, client):
        task.cancel()
    for task in (console, client):
        with contextlib.suppress(asyncio.CancelledError, ConnectionClosed, WebSocketDisconnect, RuntimeError):
            await task
    await upstream.close()
    with contextlib.suppress(Exception):  # the client may have gone without a close frame
        await ws.send_bytes(frame(ERROR, _SUCCESS))
        await ws.close(1000)
