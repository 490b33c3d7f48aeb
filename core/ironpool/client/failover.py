"""Several apiservers behind one client: which one it talks to, and when a request goes to another.

A client configured with several URLs (``https://a:8443,https://b:8443``) sends every request to its
current server. When that server cannot be reached (connection refused or timed out: the request
was never sent) the request goes to the next one, whatever its method. A safe request (GET) whose
answer was lost on the way is sent again too; a write whose answer was lost is not: it may have
been applied, and the caller learns that it cannot know (``ServerUnreachable``), as with one server.
A watch cut by its server's death ends like any cut watch, and the caller's next watch from its
last resourceVersion goes to the next server, which serves the same revisions from the same store.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from ironpool.client.transport_errors import ConnectError, RemoteProtocolError, TransportError

log = logging.getLogger("ironpool.client")

_SAFE = frozenset({"GET", "HEAD"})
_NOT_SENT = ConnectError  # ConnectTimeout is one


class ServerList:
    """The apiserver URLs of a client and the current one."""

    def __init__(self, servers: Sequence[str]) -> None:
        if not servers:
            raise ValueError("at least one apiserver URL is needed")
        self.servers = [s.rstrip("/") for s in servers]
        self.index = 0

    @property
    def current(self) -> str:
        return self.servers[self.index]

    def url(self, path: str) -> str:
        return self.current + path

    def again(self, method: str, exc: TransportError, attempt: int, used: str) -> bool:
        """Whether to send a request once more after ``exc`` on attempt ``attempt`` (0-based) at
        ``used``; moves to the next server first when ``used`` looks gone."""
        several = len(self.servers) > 1
        if attempt >= max(len(self.servers), 1 if method in _SAFE else 0):
            return False  # every server had its chance
        if isinstance(exc, _NOT_SENT):
            if not several:
                return False
            self._move_from(used, exc)
            return True
        if method not in _SAFE:
            return False
        # A pooled keep-alive connection the server closed (a restart, an idle timeout) fails before
        # any answer: send once more, on a fresh connection, to the same server first.
        if attempt > 0 or not isinstance(exc, RemoteProtocolError):
            self._move_from(used, exc)
        return True

    def _move_from(self, used: str, exc: Exception) -> None:
        if len(self.servers) > 1 and self.current == used:
            self.index = (self.index + 1) % len(self.servers)
            log.warning("apiserver %s failed (%s); using %s", used, type(exc).__name__, self.current)
