"""Client side of a machine's serial console: the URL an IRI ``Exec`` returns, over websockets.

:func:`attach` is interactive (raw terminal, ``Ctrl+]`` quits, as irictl's ``exec``);
:class:`ConsoleSession` reads and writes programmatically (tests, scripts).
"""

from __future__ import annotations

import contextlib
import os
import re
import select
import sys
import termios
import threading
import time
import tty
from collections.abc import Callable
from typing import IO

from websockets.exceptions import ConnectionClosed
from websockets.sync.client import ClientConnection, connect

ESCAPE = b"\x1d"  # Ctrl+]


class ConsoleError(Exception):
    """The console URL could not be opened (unknown or used token, machine not running)."""


def _open(url: str, timeout: float, stack: contextlib.ExitStack) -> ClientConnection:
    # Entered as a context manager: websockets >= 17 warns about bare connect() objects.
    try:
        return stack.enter_context(connect(url, open_timeout=timeout, max_size=1 << 20, proxy=None))
    except (OSError, TimeoutError) as exc:
        raise ConsoleError(f"console {url}: cannot connect: {exc}") from exc
    except Exception as exc:  # websockets raises InvalidStatus etc. for a rejected token
        raise ConsoleError(f"console {url}: {exc}") from exc


class ConsoleSession:
    """An open console: ``send`` input, ``read_until`` output lines (keeps everything received)."""

    def __init__(self, url: str, timeout: float = 10.0) -> None:
        self._stack = contextlib.ExitStack()
        self._ws = _open(url, timeout, self._stack)
        self._buffer = bytearray()

    def __enter__(self) -> ConsoleSession:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._stack.close()

    def send(self, data: bytes | str) -> None:
        self._ws.send(data.encode() if isinstance(data, str) else data)

    @property
    def received(self) -> bytes:
        return bytes(self._buffer)

    def read_until(self, pattern: str | re.Pattern[str], timeout: float) -> str:
        """Read until a line matches ``pattern``; that line, or TimeoutError with what was seen."""
        regex = re.compile(pattern) if isinstance(pattern, str) else pattern
        deadline = time.monotonic() + timeout
        scanned = 0
        while True:
            text = self._buffer.decode(errors="replace")
            lines = text.splitlines()
            for line in lines[scanned:]:
                if regex.search(line):
                    return line
            scanned = max(0, len(lines) - 1)  # the last line may still grow
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(
                    f"no console line matched {regex.pattern!r} in {timeout}s; got {text[-500:]!r}"
                )
            try:
                message = self._ws.recv(timeout=remaining)
            except TimeoutError:
                continue
            except ConnectionClosed as exc:
                raise ConsoleError(
                    f"console closed before {regex.pattern!r} appeared: {text[-500:]!r}"
                ) from exc
            self._buffer += message.encode() if isinstance(message, str) else message

    def read_lines(self, count: int, timeout: float) -> list[str]:
        """The first ``count`` complete lines received (TimeoutError if fewer arrive in time)."""
        deadline = time.monotonic() + timeout
        while True:
            lines = self._buffer.decode(errors="replace").split("\n")
            if len(lines) > count:
                return [line.rstrip("\r") for line in lines[:count]]
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"got {len(lines) - 1} of {count} console lines in {timeout}s")
            try:
                message = self._ws.recv(timeout=remaining)
            except TimeoutError:
                continue
            self._buffer += message.encode() if isinstance(message, str) else message


def read_lines(url: str, count: int, timeout: float = 30.0) -> list[str]:
    """Open ``url``, return the next ``count`` lines the guest prints, close."""
    with ConsoleSession(url) as session:
        return session.read_lines(count, timeout)


def attach(
    url: str,
    stdin: IO[bytes] | None = None,
    stdout: IO[bytes] | None = None,
    on_ready: Callable[[], None] | None = None,
) -> None:
    """Interactive console until ``Ctrl+]`` or the machine closes it; raw mode on a terminal."""
    in_stream = stdin or sys.stdin.buffer
    out_stream = stdout or sys.stdout.buffer
    stack = contextlib.ExitStack()
    ws = _open(url, 10.0, stack)
    fd = in_stream.fileno()
    saved = termios.tcgetattr(fd) if os.isatty(fd) else None
    done = threading.Event()

    def pump_out() -> None:
        try:
            for message in ws:
                out_stream.write(message.encode() if isinstance(message, str) else message)
                out_stream.flush()
        except ConnectionClosed:
            pass
        finally:
            done.set()

    reader = threading.Thread(target=pump_out, name="console-out", daemon=True)
    try:
        if saved is not None:
            tty.setraw(fd)
        reader.start()
        if on_ready is not None:
            on_ready()
        while not done.is_set():
            ready, _, _ = select.select([fd], [], [], 0.2)
            if not ready:
                continue
            data = os.read(fd, 1024)
            if not data:
                break
            if ESCAPE in data:
                data = data.split(ESCAPE, 1)[0]
                if data:
                    ws.send(data)
                break
            ws.send(data)
    finally:
        if saved is not None:
            termios.tcsetattr(fd, termios.TCSADRAIN, saved)
        with contextlib.suppress(Exception):
            stack.close()
        reader.join(timeout=2)
