"""IRI endpoints: parsing ``unix://``, ``tcp://`` and ``ssh://`` addresses, and discovery.

Discovery follows IronCore's ``iri/remote/common/address.go``: the explicit flag wins, then the
environment variable (``IRI_MACHINE_RUNTIME_ENDPOINT`` / ``IRI_VOLUME_RUNTIME_ENDPOINT``), then
the first existing unix socket among the well-known paths (broker before provider), polled once
a second until the discovery timeout.
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal
from urllib.parse import SplitResult, unquote, urlsplit

RuntimeKind = Literal["machine", "volume"]

ENV_VARS: dict[str, str] = {
    "machine": "IRI_MACHINE_RUNTIME_ENDPOINT",
    "volume": "IRI_VOLUME_RUNTIME_ENDPOINT",
}

WELL_KNOWN_SOCKETS: dict[str, tuple[str, ...]] = {
    "machine": ("/var/run/iri-machinebroker.sock", "/var/run/iri-machineprovider.sock"),
    "volume": ("/var/run/iri-volumebroker.sock", "/var/run/iri-volumeprovider.sock"),
}

# The socket each of our servers listens on by default (IronCore's provider defaults).
DEFAULT_SERVER_SOCKETS: dict[str, str] = {
    "machine": "/var/run/iri-machineprovider.sock",
    "volume": "/var/run/iri-volumeprovider.sock",
}

DISCOVERY_POLL_INTERVAL = 1.0


class EndpointError(ValueError):
    """An endpoint string that cannot be used, or no endpoint could be found."""


@dataclass(frozen=True)
class Endpoint:
    """A parsed IRI endpoint.

    ``scheme`` is ``unix`` (``path``), ``tcp`` (``host``, ``port``) or ``ssh`` (``user``,
    ``host``, ``port``, and ``path`` = the unix socket on the remote host).
    """

    scheme: Literal["unix", "tcp", "ssh"]
    path: str = ""
    host: str = ""
    port: int = 0
    user: str = ""

    def __str__(self) -> str:
        if self.scheme == "unix":
            return f"unix://{self.path}"
        if self.scheme == "tcp":
            return f"tcp://{_host_for_url(self.host)}:{self.port}"
        user = f"{self.user}@" if self.user else ""
        return f"ssh://{user}{_host_for_url(self.host)}:{self.port}{self.path}"

    @property
    def grpc_target(self) -> str:
        """The target string grpc dials directly (not meaningful for ``ssh``)."""
        if self.scheme == "unix":
            return f"unix:{self.path}"
        if self.scheme == "tcp":
            return f"{_host_for_url(self.host)}:{self.port}"
        raise EndpointError(f"{self}: an ssh endpoint needs a tunnel; use ironpool.iri.transport.connect")


def _host_for_url(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def parse_endpoint(value: str) -> Endpoint:
    """Parse an endpoint string; raise :class:`EndpointError` naming what is wrong.

    Accepted: ``unix:///abs/path`` (also ``unix:/abs/path`` and a bare absolute path),
    ``tcp://host:port``, ``ssh://[user@]host[:port]/abs/path/to/socket`` (port 22 by default).
    """
    text = value.strip()
    if not text:
        raise EndpointError("endpoint: empty string")
    if text.startswith("/"):
        return Endpoint("unix", path=text)
    if text.startswith("unix:") and not text.startswith("unix://"):
        path = text[len("unix:") :]
        if not path.startswith("/"):
            raise EndpointError(f"endpoint {value!r}: unix socket path must be absolute")
        return Endpoint("unix", path=path)
    parts = urlsplit(text)
    scheme = parts.scheme.lower()
    if scheme == "unix":
        path = (parts.netloc + parts.path) if parts.netloc else parts.path
        if parts.netloc or not path.startswith("/"):
            raise EndpointError(f"endpoint {value!r}: expected unix:///absolute/path")
        return Endpoint("unix", path=path)
    if scheme == "tcp":
        if parts.path not in ("", "/"):
            raise EndpointError(f"endpoint {value!r}: tcp endpoints take no path")
        host, port = _host_port(value, parts, default_port=None)
        return Endpoint("tcp", host=host, port=port)
    if scheme == "ssh":
        host, port = _host_port(value, parts, default_port=22)
        path = unquote(parts.path)
        if not path.startswith("/") or path == "/":
            raise EndpointError(
                f"endpoint {value!r}: expected ssh://user@host[:port]/absolute/path/to/socket"
            )
        return Endpoint("ssh", path=path, host=host, port=port, user=unquote(parts.username or ""))
    raise EndpointError(f"endpoint {value!r}: scheme must be unix://, tcp:// or ssh://")


def _host_port(value: str, parts: SplitResult, default_port: int | None) -> tuple[str, int]:
    hostname = parts.hostname
    if not hostname:
        raise EndpointError(f"endpoint {value!r}: missing host")
    try:
        port = parts.port
    except ValueError as exc:
        raise EndpointError(f"endpoint {value!r}: invalid port ({exc})") from None
    if port is None:
        if default_port is None:
            raise EndpointError(f"endpoint {value!r}: missing port (tcp://host:port)")
        port = default_port
    return hostname, int(port)


def is_unix_socket(path: str) -> bool:
    try:
        return stat.S_ISSOCK(os.stat(path).st_mode)
    except OSError:
        return False


def resolve_endpoint(
    kind: RuntimeKind,
    flag: str | None = None,
    *,
    timeout: float = 0.0,
    env: Mapping[str, str] | None = None,
    candidates: Sequence[str] | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> str:
    """The endpoint of the ``kind`` runtime, as IronCore discovers it.

    Returns the flag or environment value verbatim (validated), or ``unix://<path>`` for the first
    well-known socket that exists. With ``timeout > 0`` the sockets are polled every second until
    the deadline, as IronCore does while its runtime starts. Raises :class:`EndpointError`.
    """
    if kind not in ENV_VARS:
        raise EndpointError(f"kind: must be 'machine' or 'volume', not {kind!r}")
    if flag:
        parse_endpoint(flag)
        return flag
    environ = os.environ if env is None else env
    from_env = environ.get(ENV_VARS[kind], "")
    if from_env:
        try:
            parse_endpoint(from_env)
        except EndpointError as exc:
            raise EndpointError(f"{ENV_VARS[kind]}: {exc}") from None
        return from_env
    paths = tuple(candidates) if candidates is not None else WELL_KNOWN_SOCKETS[kind]
    deadline = clock() + timeout
    while True:
        for path in paths:
            if is_unix_socket(path):
                return f"unix://{path}"
        remaining = deadline - clock()
        if remaining <= 0:
            break
        sleep(min(DISCOVERY_POLL_INTERVAL, remaining))
    raise EndpointError(
        f"no {kind} runtime endpoint: pass --address, set {ENV_VARS[kind]}, "
        f"or start a runtime on one of {', '.join(paths)}"
    )
