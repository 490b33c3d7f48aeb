"""A TCP proxy on 127.0.0.1 that a test cuts and heals: a host's network path to its control plane.

While cut, every connection through it is closed and new ones are accepted and closed at once (the
client sees its apiserver go away, as behind a partition that resets connections); the processes on
either side keep running. Healed, it forwards again on the same port.
"""

from __future__ import annotations

import contextlib
import socket
import threading


class CutProxy:
    """Forwards ``127.0.0.1:port`` to ``target``; :meth:`cut` and :meth:`heal` the path."""

    def __init__(self, target: tuple[str, int]) -> None:
        self.target = target
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        self._open: set[socket.socket] = set()
        self._lock = threading.Lock()
        self._cut = False
        self._closed = False
        threading.Thread(target=self._accept, name="cut-proxy", daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def cut(self) -> None:
        with self._lock:
            self._cut = True
            for s in self._open:
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
                    s.close()
            self._open.clear()

    def heal(self) -> None:
        with self._lock:
            self._cut = False

    def close(self) -> None:
        self._closed = True
        self.cut()
        self._listener.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                if self._cut:
                    client.close()
                    continue
            try:
                upstream = socket.create_connection(self.target, timeout=5)
            except OSError:
                client.close()
                continue
            upstream.settimeout(None)
            with self._lock:
                self._open.update((client, upstream))
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
                with self._lock:
                    self._open.discard(s)
