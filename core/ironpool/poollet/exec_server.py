"""The machinepoollet's endpoint: the serial consoles of its pool's Machines, for the apiserver.

IronCore's machinepoollet serves ``/apis/compute.ironcore.dev/namespaces/{ns}/machines/{name}/exec``
on ``--address`` (``:20250``) and publishes the port in its MachinePool's
``status.daemonEndpoints.machinepoolletEndpoint.port``; the apiserver's ``machines/exec`` dials it, the
poollet calls IRI ``Exec`` and proxies the stream at the URL the runtime returns. Here the same path
(with the version, as the apiserver's own) is a websocket of raw bytes both ways:

- only the apiserver may open it: the request must carry ``Authorization: Bearer <token>`` with the
  token this poollet was given (``--exec-token-file``; 401 otherwise). A user never reaches here
  directly: the apiserver authorized them (``create`` on ``machines/exec``) before it dialled;
- the Machine must be one of this pool's (404), its IRI machine found by the Machine's uid label,
  and the runtime must open its console (IRI ``FailedPrecondition``, not running or a session
  already open: 409), all answered before the upgrade, with the reason as the body;
- ``?history=true`` is passed on to the runtime's URL (:mod:`ironpool.api.console_history`);
- then bytes are relayed between the apiserver's leg and the runtime's console until one ends, and
  the other is closed; pings every ``ping_interval`` seconds keep both legs open while idle.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
import re
from collections.abc import Awaitable, Callable
from http import HTTPStatus

import grpc
from websockets.asyncio.client import ClientConnection, connect
from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response

from ironpool.api import errors
from ironpool.api.console_history import wants_history, with_history

log = logging.getLogger(__name__)

_PATH = re.compile(r"^/apis/compute\.ironcore\.dev/v1alpha1/namespaces/([^/]+)/machines/([^/]+)/exec$")
_MAX_MESSAGE = 1 << 20

#: ``find(namespace, name)``: the IRI machine id of this pool's Machine, or LookupError saying why not
FindMachine = Callable[[str, str], Awaitable[str]]
#: ``exec(machine_id)``: the URL of the machine's console (IRI ``Exec``)
OpenConsole = Callable[[str], Awaitable[str]]


class ConsoleEndpoint:
    """Serves the consoles of one pool's Machines to whoever holds ``token`` (the apiserver)."""

    def __init__(self, find: FindMachine, open_console: OpenConsole, token: str, host: str = "127.0.0.1",
                 port: int = 20250, ping_interval: float = 20.0) -> None:
        if not token:
            raise ValueError("exec token: must not be empty (the endpoint would admit anyone)")
        self.find, self.open_console = find, open_console
        self._token = token.encode()
        self.host, self.port = host, port
        self.ping_interval = ping_interval
        self._server: Server | None = None
        self._upstreams: dict[ServerConnection, ClientConnection] = {}
        self._watching: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        """Listen (port 0: a free one, then :attr:`port` says which)."""
        self._server = await serve(self._relay, self.host, self.port, process_request=self._check,
                                   ping_interval=self.ping_interval, ping_timeout=self.ping_interval,
                                   max_size=_MAX_MESSAGE)
        self.port = self._server.sockets[0].getsockname()[1] if self.port == 0 else self.port
        log.info("machinepoollet console endpoint on %s:%d", self.host, self.port)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None

    def _authorized(self, request: Request) -> bool:
        scheme, _, presented = request.headers.get("Authorization", "").partition(" ")
        return scheme.lower() == "bearer" and hmac.compare_digest(presented.strip().encode(), self._token)

    async def _check(self, connection: ServerConnection, request: Request) -> Response | None:
        """Everything that can fail, before the upgrade: the refusal is an HTTP status with a reason."""
        if not self._authorized(request):
            return connection.respond(HTTPStatus.UNAUTHORIZED, "a console is opened by the apiserver only\n")
        path, _, query = request.path.partition("?")
        match = _PATH.match(path)
        if match is None:
            return connection.respond(HTTPStatus.NOT_FOUND, f"no console at {request.path}\n")
        namespace, name = match.groups()
        try:
            history = wants_history(query)
        except errors.BadRequest as exc:
            return connection.respond(HTTPStatus.BAD_REQUEST, f"{exc}\n")
        try:
            machine_id = await self.find(namespace, name)
            url = with_history(await self.open_console(machine_id), history)
        except LookupError as exc:
            return connection.respond(HTTPStatus.NOT_FOUND, f"{exc.args[0] if exc.args else exc}\n")
        except grpc.aio.AioRpcError as exc:
            status = {grpc.StatusCode.NOT_FOUND: HTTPStatus.NOT_FOUND,
                      grpc.StatusCode.FAILED_PRECONDITION: HTTPStatus.CONFLICT}.get(exc.code(),
                                                                                    HTTPStatus.BAD_GATEWAY)
            return connection.respond(status, f"{exc.details() or exc.code().name}\n")
        try:
            upstream = await connect(url, open_timeout=10, ping_interval=self.ping_interval,
                                     ping_timeout=self.ping_interval, max_size=_MAX_MESSAGE, proxy=None)
        except Exception as exc:  # the runtime's streaming server refused or is unreachable
            return connection.respond(HTTPStatus.BAD_GATEWAY, f"the runtime's console {url}: {exc}\n")
        self._upstreams[connection] = upstream
        # Should the handshake fail after this, no handler claims the runtime's session, which would
        # stay open and refuse every later console of the machine: close it with the connection.
        task = asyncio.get_running_loop().create_task(self._unclaimed(connection))
        self._watching.add(task)  # the loop keeps only a weak reference to a task
        task.add_done_callback(self._watching.discard)
        return None

    async def _unclaimed(self, connection: ServerConnection) -> None:
        await connection.wait_closed()
        upstream = self._upstreams.pop(connection, None)
        if upstream is not None:
            await upstream.close()

    async def _relay(self, ws: ServerConnection) -> None:
        upstream = self._upstreams.pop(ws)
        async with upstream:
            await relay_bytes(ws, upstream)


Socket = ServerConnection | ClientConnection


async def relay_bytes(a: Socket, b: Socket) -> None:
    """Messages both ways between two websockets until one closes; then both are closed."""

    async def pump(src: Socket, dst: Socket) -> None:
        with contextlib.suppress(ConnectionClosed):
            async for message in src:
                await dst.send(message)

    tasks = (asyncio.create_task(pump(a, b)), asyncio.create_task(pump(b, a)))
    await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
    for task in tasks:
        task.cancel()
    for task in tasks:
        with contextlib.suppress(asyncio.CancelledError, ConnectionClosed):
            await task
    await asyncio.gather(a.close(), b.close(), return_exceptions=True)
