"""The connection to an etcd cluster: endpoints, TLS, retries and failover, over etcd's gRPC API.

The request and stub types are etcd's v3 protobufs as the ``aetcd`` package ships them
(``aetcd.rpc``). aetcd's own ``Client`` is not used: it dials one endpoint without TLS, and a store
behind several apiservers needs both a list of members and TLS with client certificates.

One channel per member, made on first use inside the running event loop. Calls go to the current
member; when it cannot be reached the next one becomes current. Reads are retried freely.
A write whose answer was lost (the member died, the leader changed) may or may not have been
applied; it is retried too, and the caller (:mod:`.etcd`) recognises its own earlier write in a
retry's failure (see ``EtcdStore._resolve``), so a write is acknowledged exactly when it committed.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import grpc

from ironpool.store.interface import RevisionCompacted, StoreError

log = logging.getLogger("ironpool.store.etcd")

T = TypeVar("T")

#: how long a call keeps trying (other members, a new leader) before it fails
DEFAULT_RETRY_DEADLINE = 15.0
#: how long one attempt of a point call (a get, a write's Txn) waits before it tries the next member.
#: A follower that forwarded a proposal to a leader that then died never answers it; with 5 s here a
#: leader's death stopped writes for about 5 s although the election takes under one. Answers take
#: milliseconds even on a loaded machine, and a write retried after a slow answer is recognised as
#: its own (see the module docstring), so a short attempt only costs a retry.
CALL_TIMEOUT = 1.5
#: the same for calls that may move megabytes (a range of a long list) or a whole keyspace (compaction)
LONG_CALL_TIMEOUT = 10.0
_RETRY_CODES = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED})
_CHANNEL_OPTIONS = (
    ("grpc.max_receive_message_length", -1),
    ("grpc.max_send_message_length", 8 * 1024 * 1024),
    # etcd refuses keepalive pings more often than every 5 s; a dead member is found within ~15 s
    # even when its socket never closes (a hung host), and at once when its process dies.
    ("grpc.keepalive_time_ms", 10_000),
    ("grpc.keepalive_timeout_ms", 5_000),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.max_pings_without_data", 0),
)


def rpc() -> Any:
    """etcd's protobuf messages and stubs (``aetcd.rpc``); the ``etcd`` extra installs them."""
    try:
        from aetcd import rpc as etcd_rpc
    except ImportError:  # pragma: no cover - depends on the installation
        raise StoreError("the etcd store needs the 'etcd' extra: pip install 'ironpool[etcd]'") from None
    return etcd_rpc


@dataclass(frozen=True)
class EtcdTls:
    """TLS to etcd: the CA that signed the members' certificates, and this client's certificate
    and key (kube-apiserver's ``--etcd-cafile``, ``--etcd-certfile``, ``--etcd-keyfile``)."""

    ca_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None

    def __post_init__(self) -> None:
        if (self.cert_file is None) != (self.key_file is None):
            raise ValueError("--etcd-certfile and --etcd-keyfile go together")

    def credentials(self) -> grpc.ChannelCredentials:
        def read(path: str | None, what: str) -> bytes | None:
            if path is None:
                return None
            try:
                return Path(path).read_bytes()
            except OSError as exc:
                raise ValueError(f"{what}: cannot read {path}: {exc}") from None

        return grpc.ssl_channel_credentials(
            read(self.ca_file, "--etcd-cafile"),
            read(self.key_file, "--etcd-keyfile"),
            read(self.cert_file, "--etcd-certfile"),
        )


def parse_endpoints(text: str) -> list[str]:
    """``h1:2379,h2:2379,[::1]:2379`` as a list; ValueError naming the one that is not HOST:PORT."""
    endpoints: list[str] = []
    for item in text.split(","):
        item = item.strip()
        host, sep, port = item.rpartition(":")
        if not item or not sep or not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(f"--store: etcd endpoint {item!r} is not HOST:PORT")
        endpoints.append(item)
    return endpoints


def retryable(exc: grpc.RpcError) -> bool:
    """Whether another attempt (maybe on another member) may succeed."""
    code = exc.code() if isinstance(exc, grpc.aio.AioRpcError) else None
    return code in _RETRY_CODES


def store_error(exc: grpc.RpcError, what: str) -> StoreError:
    """The store's error for an etcd failure (compaction is the one callers act on)."""
    details = exc.details() if isinstance(exc, grpc.aio.AioRpcError) else str(exc)
    details = details or str(exc)
    if "compacted" in details:
        return RevisionCompacted(f"{what}: {details}")
    return StoreError(f"etcd {what}: {details}")


class EtcdConnection:
    """Channels to the members of one cluster and the current one; see the module docstring."""

    def __init__(self, endpoints: list[str], tls: EtcdTls | None = None,
                 retry_deadline: float = DEFAULT_RETRY_DEADLINE) -> None:
        if not endpoints:
            raise ValueError("--store: etcd:// needs at least one HOST:PORT")
        self.endpoints = endpoints
        self.tls = tls
        self.retry_deadline = retry_deadline
        self._credentials = tls.credentials() if tls is not None else None
        self._channels: dict[int, grpc.aio.Channel] = {}
        self._stubs: dict[int, tuple[Any, Any, Any]] = {}
        self.current = 0
        self.closed = False

    def _stubs_for(self, index: int) -> tuple[Any, Any, Any]:
        stubs = self._stubs.get(index)
        if stubs is None:
            target = self.endpoints[index]
            if self._credentials is not None:
                channel = grpc.aio.secure_channel(target, self._credentials, options=_CHANNEL_OPTIONS)
            else:
                channel = grpc.aio.insecure_channel(target, options=_CHANNEL_OPTIONS)
            m = rpc()
            self._channels[index] = channel
            stubs = self._stubs[index] = (m.KVStub(channel), m.WatchStub(channel), m.MaintenanceStub(channel))
        return stubs

    def kv(self) -> tuple[int, Any]:
        """``(member index, KV stub)`` of the current member."""
        index = self.current
        return index, self._stubs_for(index)[0]

    def watch_stub(self) -> tuple[int, Any]:
        index = self.current
        return index, self._stubs_for(index)[1]

    def maintenance(self) -> tuple[int, Any]:
        index = self.current
        return index, self._stubs_for(index)[2]

    def failed(self, index: int, exc: BaseException) -> None:
        """``index`` did not answer: move on to the next member (once per failure of the current one)."""
        if index == self.current and len(self.endpoints) > 1:
            self.current = (index + 1) % len(self.endpoints)
            log.warning("etcd %s failed (%s); using %s", self.endpoints[index], _brief(exc),
                        self.endpoints[self.current])

    async def call(self, what: str, attempt: Callable[[int, Any], Awaitable[T]],
                   stub: Callable[[], tuple[int, Any]] | None = None) -> T:
        """Run ``attempt(index, stub)`` on the current member until it answers, moving to other members
        and backing off while the cluster has no leader; StoreError after the retry deadline."""
        pick = stub or self.kv
        deadline = time.monotonic() + self.retry_deadline
        delay = 0.05
        while True:
            if self.closed:
                raise StoreError("store is closed")
            index, s = pick()
            try:
                return await attempt(index, s)
            except asyncio.CancelledError:
                task = asyncio.current_task()
                if self.closed and (task is None or not task.cancelling()):
                    raise StoreError("store is closed") from None  # grpc cancels calls of a closed channel
                raise
            except grpc.aio.AioRpcError as exc:
                if not retryable(exc) or time.monotonic() + delay > deadline:
                    raise store_error(exc, what) from None
                self.failed(index, exc)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 1.0)

    async def close(self) -> None:
        self.closed = True
        channels, self._channels, self._stubs = self._channels, {}, {}
        for channel in channels.values():
            await channel.close()


def _brief(exc: BaseException) -> str:
    if isinstance(exc, grpc.aio.AioRpcError):
        return f"{exc.code().name}: {exc.details()}"
    return f"{type(exc).__name__}: {exc}"

