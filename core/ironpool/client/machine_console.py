"""A Machine's serial console through the apiserver (``machines/exec``), as ``ironpool console`` and
tests use it.

:class:`MachineConsole` opens the websocket with the client configuration's server, token and CA,
offering Kubernetes' ``v5.channel.k8s.io`` and ``v4.channel.k8s.io`` (:mod:`ironpool.api.channels`):
input goes on stdin, the console's output comes on stdout, the session's end as a Status on the error
channel. A refusal (403, 409, 400...) is a :class:`ConsoleRefused` with the apiserver's message.
:func:`attach` joins it to a terminal (raw mode) or to pipes, until ``Ctrl+]`` (as ``virsh console``),
the end of the input, or the console closing.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import select
import ssl
import termios
import threading
import time
import tty
from collections.abc import Callable
from typing import IO, Any
from urllib.parse import quote, urlsplit, urlunsplit

import orjson
from websockets.exceptions import ConnectionClosed, InvalidHandshake, InvalidStatus
from websockets.sync.client import ClientConnection, connect
from websockets.typing import Subprotocol

from ironpool.api.channels import CLOSE, ERROR, STDERR, STDIN, STDOUT, SUBPROTOCOLS, V5, frame, unframe
from ironpool.client.config import ClientConfig
from ironpool.client.rest import _transport_options

ESCAPE = b"\x1d"  # Ctrl+], as virsh console and telnet
_MAX_MESSAGE = 1 << 20
# websockets logs what goes wrong on its reading thread ("unexpected internal error" with a traceback,
# as when the apiserver closes the connection right after refusing the handshake) and raises it to the
# caller as well, which says what happened: its own log would only repeat that under a traceback.
_WEBSOCKET_LOG = logging.getLogger(__name__ + ".websocket")
_WEBSOCKET_LOG.setLevel(logging.CRITICAL)


class ConsoleRefused(Exception):
    """The apiserver refused the console: ``code`` (HTTP status) and its Status ``message``."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code


def console_url(server: str, namespace: str, name: str) -> str:
    """The websocket URL of ``machines/exec`` on an apiserver URL (``https`` → ``wss``)."""
    parts = urlsplit(server.split(",")[0].strip())
    scheme = {"https": "wss", "http": "ws"}.get(parts.scheme)
    if scheme is None:
        raise ValueError(f"apiserver URL {server!r} must be http:// or https://")
    path = (f"{parts.path.rstrip('/')}/apis/compute.ironcore.dev/v1alpha1/namespaces/"
            f"{quote(namespace, safe='')}/machines/{quote(name, safe='')}/exec")
    return urlunsplit((scheme, parts.netloc, path, "", ""))


class MachineConsole:
    """An open console: :meth:`send` input, :meth:`recv` or :meth:`read_until` output."""

    def __init__(self, config: ClientConfig, namespace: str, name: str, *, open_timeout: float = 15.0,
                 ping_interval: float = 20.0) -> None:
        options = _transport_options(config)
        url = console_url(config.server, namespace, name)
        headers = {k: v for k, v in options["headers"].items() if k == "Authorization"}
        verify = options["verify"]
        tls: dict[str, Any] = {}
        if url.startswith("wss://"):
            context = verify if isinstance(verify, ssl.SSLContext) else ssl.create_default_context()
            if verify is False:
                context.check_hostname, context.verify_mode = False, ssl.CERT_NONE
            tls["ssl"] = context
        self._stack = contextlib.ExitStack()
        try:
            self._ws: ClientConnection = self._stack.enter_context(connect(
                url, subprotocols=[Subprotocol(p) for p in SUBPROTOCOLS], additional_headers=headers,
                open_timeout=open_timeout, ping_interval=ping_interval, ping_timeout=ping_interval,
                max_size=_MAX_MESSAGE, proxy=None, logger=_WEBSOCKET_LOG, **tls))
        except InvalidStatus as exc:
            raise ConsoleRefused(exc.response.status_code, _status_message(exc.response.body)) from None
        except (OSError, TimeoutError, InvalidHandshake) as exc:
            raise ConsoleRefused(0, f"cannot connect to {url}: {exc}") from None
        self.subprotocol = self._ws.subprotocol
        self.status: dict[str, Any] | None = None  # the Status the server sent as the session ended
        self._buffer = bytearray()

    def __enter__(self) -> MachineConsole:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def received(self) -> bytes:
        """Everything :meth:`read_until` has read so far."""
        return bytes(self._buffer)

    def send(self, data: bytes | str) -> None:
        self._ws.send(frame(STDIN, data.encode() if isinstance(data, str) else data))

    def ping(self) -> threading.Event:
        """A websocket ping through the apiserver; the event is set when its pong comes back."""
        return self._ws.ping()

    def recv(self, timeout: float | None = None) -> bytes | None:
        """The next output (b'' for a message that carries none); None once the console has ended.
        TimeoutError if nothing came in ``timeout`` seconds."""
        try:
            message = self._ws.recv(timeout=timeout)
        except ConnectionClosed:
            return None
        channel, payload = unframe(message.encode() if isinstance(message, str) else message)
        if channel in (STDOUT, STDERR):
            return payload
        if channel == ERROR:
            with contextlib.suppress(orjson.JSONDecodeError):
                self.status = orjson.loads(payload)
        return b""

    def read_until(self, pattern: str, timeout: float) -> str:
        """Read until the output matches ``pattern`` (a regex); the text read so far. TimeoutError
        (with the tail of what came) if it does not in ``timeout`` seconds."""
        regex = re.compile(pattern)
        deadline = time.monotonic() + timeout
        while not regex.search(text := self._buffer.decode(errors="replace")):
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"no console output matched {pattern!r} in {timeout}s; "
                                   f"got {text[-500:]!r}")
            with contextlib.suppress(TimeoutError):
                data = self.recv(timeout=remaining)
                if data is None:
                    raise ConnectionError(f"the console closed before {pattern!r} appeared: {text[-500:]!r}")
                self._buffer += data
        return text

    def detach(self, timeout: float = 5.0) -> None:
        """Leave: with ``v5``, close stdin and wait (up to ``timeout`` seconds) for the server to end
        the session upstream and close, so a console opened next finds the machine free; then close."""
        if self.close_stdin():
            deadline = time.monotonic() + timeout
            with contextlib.suppress(TimeoutError):
                while self.recv(timeout=max(0.0, deadline - time.monotonic())) is not None:
                    pass  # what the console printed meanwhile; the Status comes last
        self.close()

    def close_stdin(self) -> bool:
        """Tell the server we leave (``v5``'s close of stdin); whether it was told (then it ends the
        session and closes)."""
        if self.subprotocol != V5:
            return False
        try:
            self._ws.send(bytes((CLOSE, STDIN)))
        except ConnectionClosed:
            return False
        return True

    def close(self) -> None:
        self._stack.close()


def _status_message(body: bytes | None) -> str:
    if not body:
        return "refused without a reason"
    try:
        status = orjson.loads(body)
    except orjson.JSONDecodeError:
        return body.decode(errors="replace").strip()
    return str(status.get("message") or status) if isinstance(status, dict) else str(status)


def attach(console: MachineConsole, stdin: IO[bytes], stdout: IO[bytes],
           on_ready: Callable[[], None] | None = None) -> str:
    """Join the console to ``stdin``/``stdout`` (raw mode when stdin is a terminal) until ``Ctrl+]``
    or the input's end (``"detached"``) or the console closing (``"closed"``). ``on_ready`` is
    called once keys go to the console (entering raw mode discards what was typed before)."""
    fd = stdin.fileno()
    saved = termios.tcgetattr(fd) if os.isatty(fd) else None
    closed = threading.Event()

    def pump_out() -> None:
        try:
            while (data := console.recv()) is not None:
                if data:
                    stdout.write(data)
                    stdout.flush()
        finally:
            closed.set()
            with contextlib.suppress(OSError):
                os.write(wake_w, b"x")  # the input loop waits on its terminal: tell it

    wake_r, wake_w = os.pipe()
    reader = threading.Thread(target=pump_out, name="console-out", daemon=True)
    try:
        if saved is not None:
            tty.setraw(fd)
        reader.start()
        if on_ready is not None:
            on_ready()
        while True:
            ready, _, _ = select.select([fd, wake_r], [], [])
            if wake_r in ready or closed.is_set():
                return "closed"
            data = os.read(fd, 4096)
            leaving = not data or ESCAPE in data
            data = data.split(ESCAPE, 1)[0]
            try:
                if data:
                    console.send(data)
            except ConnectionClosed:  # the console ended as we typed
                return "closed"
            if leaving:
                return "detached"
    finally:
        if saved is not None:
            termios.tcsetattr(fd, termios.TCSADRAIN, saved)
        # The reader drains until the server, told we leave, has ended the session and closed.
        if console.close_stdin():
            reader.join(timeout=5)
        console.close()
        reader.join(timeout=5)
        os.close(wake_r)
        os.close(wake_w)
