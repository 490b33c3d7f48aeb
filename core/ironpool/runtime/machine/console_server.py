"""The serial console endpoint behind ``Exec``: a one-time-token websocket bridged to libvirt.

``Exec`` returns ``<base-url>/exec/<token>`` (as IronCore's providers do); the first websocket
connection to that path gets the domain's serial console via ``virDomainOpenConsole`` as binary
messages both ways. A token is good once and for ``token_ttl`` seconds; one session per machine.
``?history=true`` on that URL sends the tail of the domain's serial log first
(:mod:`ironpool.api.console_history`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import threading
import time
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

import libvirt
from websockets.asyncio.server import Server, ServerConnection, serve
from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response

from ironpool.api.console_history import HISTORY_BYTES, wants_history
from ironpool.api.errors import BadRequest
from ironpool.runtime.errors import FailedPrecondition

from .driver import MachineDriver

log = logging.getLogger(__name__)

_STREAM_EVENTS = (
    libvirt.VIR_STREAM_EVENT_READABLE | libvirt.VIR_STREAM_EVENT_ERROR | libvirt.VIR_STREAM_EVENT_HANGUP
)


@dataclass(frozen=True)
class _Token:
    machine_id: str
    expires: float


class _ConsoleStream:
    """A non-blocking libvirt console stream whose output lands in an asyncio queue."""

    def __init__(self, conn: libvirt.virConnect, dom: libvirt.virDomain, loop: asyncio.AbstractEventLoop):
        self._loop = loop
        self.output: asyncio.Queue[bytes | None] = asyncio.Queue()
        self._closed = False
        self._lock = threading.Lock()
        self._stream = conn.newStream(libvirt.VIR_STREAM_NONBLOCK)
        dom.openConsole(None, self._stream, 0)
        self._stream.eventAddCallback(_STREAM_EVENTS, self._on_event, None)

    def _emit(self, data: bytes | None) -> None:
        self._loop.call_soon_threadsafe(self.output.put_nowait, data)

    def _on_event(self, stream: libvirt.virStream, events: int, _opaque: object) -> None:
        # On the libvirt event thread: drain what is readable, never block.
        if events & libvirt.VIR_STREAM_EVENT_READABLE:
            while True:
                try:
                    data = stream.recv(65536)
                except libvirt.libvirtError:
                    self._finish()
                    return
                if isinstance(data, int):  # -2: would block
                    break
                if not data:
                    self._finish()
                    return
                self._emit(data)
        if events & (libvirt.VIR_STREAM_EVENT_ERROR | libvirt.VIR_STREAM_EVENT_HANGUP):
            self._finish()

    def _finish(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
        with contextlib.suppress(libvirt.libvirtError):
            self._stream.eventRemoveCallback()
        with contextlib.suppress(libvirt.libvirtError):
            self._stream.abort()
        self._emit(None)

    def send(self, data: bytes) -> None:
        """Write all of ``data`` to the console (blocking briefly when the stream is full)."""
        view = memoryview(data)
        deadline = time.monotonic() + 5
        while view and not self._closed:
            sent = self._stream.send(bytes(view))
            if sent == -2:
                if time.monotonic() > deadline:
                    raise TimeoutError("console input stalled")
                time.sleep(0.01)
                continue
            view = view[sent:]

    def close(self) -> None:
        self._finish()


class ConsoleServer:
    """Issues one-time console URLs and serves them over websockets."""

    def __init__(
        self,
        driver: MachineDriver,
        host: str = "127.0.0.1",
        port: int = 0,
        base_url: str = "",
        token_ttl: float = 60.0,
    ) -> None:
        self.driver = driver
        self.host, self.port = host, port
        self._base_url = base_url.rstrip("/")
        self.token_ttl = token_ttl
        self._tokens: dict[str, _Token] = {}
        self._active: set[str] = set()
        self._lock = threading.Lock()
        self._server: Server | None = None

    @property
    def base_url(self) -> str:
        return self._base_url or f"ws://{self.host}:{self.port}"

    async def start(self) -> None:
        self._server = await serve(
            self._handle,
            self.host,
            self.port,
            process_request=self._check,
            max_size=1 << 20,
            ping_interval=None,
        )
        self.port = self._server.sockets[0].getsockname()[1] if self.port == 0 else self.port
        log.info("console endpoint on %s", self.base_url)

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    def new_session(self, machine_id: str) -> str:
        """A one-time URL for the serial console of a running machine (blocking: call in a thread)."""
        if not self.driver.guest(machine_id).is_active():
            raise FailedPrecondition(f"machine {machine_id!r} is not running; its console is closed")
        with self._lock:
            if machine_id in self._active:
                raise FailedPrecondition(f"machine {machine_id!r} already has an active console session")
            now = time.monotonic()
            for tok in [t for t, v in self._tokens.items() if v.expires < now]:
                del self._tokens[tok]
            token = secrets.token_urlsafe(24)
            self._tokens[token] = _Token(machine_id, now + self.token_ttl)
        return f"{self.base_url}/exec/{token}"

    def _claim(self, path: str) -> str | None:
        path = path.partition("?")[0]
        if not path.startswith("/exec/"):
            return None
        with self._lock:
            tok = self._tokens.pop(path[len("/exec/") :], None)
            if tok is None or tok.expires < time.monotonic() or tok.machine_id in self._active:
                return None
            self._active.add(tok.machine_id)
            return tok.machine_id

    async def _check(self, connection: ServerConnection, request: Request) -> Response | None:
        try:
            history = wants_history(request.path.partition("?")[2])
        except BadRequest as exc:
            return connection.respond(HTTPStatus.BAD_REQUEST, f"{exc}\n")
        machine_id = self._claim(request.path)
        if machine_id is None:
            return connection.respond(HTTPStatus.NOT_FOUND, "unknown or expired console token\n")
        connection_state: Any = connection
        connection_state.ironpool_machine_id = machine_id
        connection_state.ironpool_history = history
        return None

    def _history(self, machine_id: str) -> bytes:
        """The tail of the machine's serial log (:mod:`ironpool.api.console_history`), from a line's
        start where there is one; b'' when there is no log."""
        try:
            with open(self.driver.console_log(machine_id), "rb") as f:
                size = f.seek(0, os.SEEK_END)
                f.seek(max(0, size - HISTORY_BYTES))
                data = f.read(HISTORY_BYTES)
        except OSError:
            return b""
        if size > HISTORY_BYTES and b"\n" in data:
            data = data[data.index(b"\n") + 1:]
        return data

    async def _handle(self, ws: ServerConnection) -> None:
        machine_id: str = getattr(ws, "ironpool_machine_id", "")
        loop = asyncio.get_running_loop()
        stream: _ConsoleStream | None = None
        try:
            # The history is read before the stream opens: what the guest prints from then on comes
            # live, once (a line printed between the two may be missed, never shown twice).
            history = await asyncio.to_thread(self._history, machine_id) \
                if getattr(ws, "ironpool_history", False) else b""
            try:
                guest = await asyncio.to_thread(self.driver.guest, machine_id)
                stream = await asyncio.to_thread(_ConsoleStream, self.driver.host.conn, guest.dom, loop)
            except Exception as exc:
                await ws.close(1011, f"cannot open console: {exc}"[:120])
                return
            console = stream

            async def pump_out() -> None:
                if history:
                    await ws.send(history)
                while (data := await console.output.get()) is not None:
                    await ws.send(data)
                await ws.close(1000, "console closed")

            async def pump_in() -> None:
                async for message in ws:
                    payload = message.encode() if isinstance(message, str) else message
                    await asyncio.to_thread(console.send, payload)

            out_task, in_task = asyncio.create_task(pump_out()), asyncio.create_task(pump_in())
            _done, pending = await asyncio.wait({out_task, in_task}, return_when=asyncio.FIRST_COMPLETED)
            for task in pending:
                task.cancel()
            for task in (out_task, in_task):
                with contextlib.suppress(
                    asyncio.CancelledError, ConnectionClosed, libvirt.libvirtError, TimeoutError
                ):
                    await task
        finally:
            if stream is not None:
                await asyncio.to_thread(stream.close)
            with self._lock:
                self._active.discard(machine_id)
