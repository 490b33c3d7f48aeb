"""The servers of ``ironpool up``, each startable and stoppable inside one event loop.

* :class:`ApiServerRunner` - uvicorn serving the apiserver's app over a store (HTTPS when given
  its certificate);
* :class:`MachineRuntimeRunner` - the libvirt machine runtime (grpc.aio) on a unix socket;
* :class:`VolumeRuntimeRunner` - the libvirt volume runtime (grpc.aio) on a unix socket.

They reuse the components' own building blocks (``build_app``, ``MachineDriver``/``serve``,
``VolumeDriver``/``VolumeRuntimeServicer``) and differ from the components' commands only in
leaving signal handling to ``ironpool up``: one Ctrl-C stops everything in order.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
from collections.abc import Callable, Generator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import uvicorn

from ironpool.apiserver import TlsFiles
from ironpool.apiserver.options import ServerOptions

log = logging.getLogger(__name__)


class StartError(Exception):
    """A component could not start; the message names it and the cause."""


async def wait_started(task: asyncio.Task[Any], started: asyncio.Event, what: str, timeout: float) -> None:
    """Wait for ``started`` while watching ``task``: a task that dies first is the error reported."""
    waiter = asyncio.ensure_future(started.wait())
    try:
        done, _ = await asyncio.wait({task, waiter}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiter.cancel()
    if started.is_set():
        return
    if task in done:
        exc = task.exception() if not task.cancelled() else None
        raise StartError(f"{what} stopped while starting: {exc or 'cancelled'}") from exc
    task.cancel()
    raise StartError(f"{what} did not start within {timeout:.0f}s")


# --------------------------------------------------------------------------------------------- apiserver


class _NoSignalServer(uvicorn.Server):
    """A uvicorn server that leaves SIGINT/SIGTERM to ``ironpool up`` and reports its startup."""

    on_started: Callable[[], None] | None = None

    @contextlib.contextmanager
    def capture_signals(self) -> Generator[None, None, None]:
        yield

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started and self.on_started is not None:
            self.on_started()


class ApiServerRunner:
    """The REST apiserver on ``host:port`` over a SQLite (or etcd) store URL."""

    def __init__(self, store_url: str, token_file: Path, host: str, port: int,
                 tls: TlsFiles | None = None, options: ServerOptions | None = None) -> None:
        self.store_url = store_url
        self.options = options or ServerOptions()
        self.token_file = token_file
        self.host, self.port = host, port
        self.tls = tls
        self._server: _NoSignalServer | None = None
        self._task: asyncio.Task[None] | None = None
        self._store: Any = None

    @property
    def url(self) -> str:
        """Where clients on this host reach it (a wildcard listen address is reached on loopback)."""
        host = {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(self.host, self.host)
        host = f"[{host}]" if ":" in host else host
        return f"{'https' if self.tls else 'http'}://{host}:{self.port}"

    def _bind(self) -> socket.socket:
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        # IPPROTO_TCP, not 0: asyncio sets TCP_NODELAY only on sockets whose proto says TCP; without it
        # Nagle holds back a response's second segment until the client's delayed ACK, 40 ms a request.
        sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((self.host, self.port))
        except OSError as exc:
            sock.close()
            raise StartError(f"apiserver: cannot listen on {self.host}:{self.port}: {exc.strerror} "
                             "(choose another --listen)") from exc
        self.port = sock.getsockname()[1]
        return sock

    async def start(self, timeout: float = 30.0) -> None:
        from ironpool.apiserver import uvicorn_options
        from ironpool.apiserver.app import build_app
        from ironpool.apiserver.auth import Authenticator
        from ironpool.store.interface import open_store

        authenticator = Authenticator.from_file(self.token_file)
        sock = self._bind()
        self._store = open_store(self.store_url)
        await self._store.current_revision()  # opens the database now: a broken file fails here
        config = uvicorn.Config(
            build_app(self._store, authenticator, options=self.options), loop="none", lifespan="off",
            access_log=False, proxy_headers=False, log_level="warning", timeout_graceful_shutdown=2,
            backlog=4096, **uvicorn_options(self.tls, self.options.connections)[0],
        )
        server = _NoSignalServer(config)
        self._server = server
        started = asyncio.Event()
        server.on_started = started.set
        self._task = asyncio.create_task(server.serve(sockets=[sock]), name="apiserver")
        await wait_started(self._task, started, "apiserver", timeout)

    async def stop(self) -> None:
        if self._server is not None and self._task is not None:
            self._server.should_exit = True
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await asyncio.wait_for(self._task, 10)
        if self._store is not None:
            await self._store.close()
            self._store = None


# --------------------------------------------------------------------------------------- machine runtime


@dataclass
class MachineRuntimeSettings:
    """What the machine runtime needs from ``ironpool up``."""

    libvirt_uri: str
    classes_file: Path
    images: Path
    state_dir: Path
    socket: Path
    domain_type: str = "auto"
    shutdown_timeout: float = 10.0
    network_mode: str = "user"
    network_bridge: str = ""
    image_cache: Path | None = None  # default: beside the catalog folder


class MachineRuntimeRunner:
    """The libvirt machine runtime (IRI ``MachineRuntime``) served on a unix socket."""

    def __init__(self, settings: MachineRuntimeSettings) -> None:
        self.settings = settings
        self.domain_type = ""
        self._core: Any = None
        self._task: asyncio.Task[None] | None = None

    @property
    def endpoint(self) -> str:
        return f"unix://{self.settings.socket}"

    def _open_core(self) -> Any:
        from ironpool.runtime import libvirt_util
        from ironpool.runtime.events import EventRing
        from ironpool.runtime.images import open_resolver
        from ironpool.runtime.machine.classes import load_classes
        from ironpool.runtime.machine.domain_xml import DomainOptions
        from ironpool.runtime.machine.driver import MachineDriver
        from ironpool.runtime.machine.host import Host
        from ironpool.runtime.machine.nics import NetworkSettings

        s = self.settings
        networks = NetworkSettings(s.network_mode, s.network_bridge)
        classes = load_classes(s.classes_file)
        host = Host(s.libvirt_uri)
        self.domain_type = libvirt_util.choose_domain_type(host.conn, s.domain_type)
        images = open_resolver(s.images, s.image_cache or s.images.parent / "image-cache")
        core = MachineDriver(
            host, classes, images, s.state_dir,
            options=DomainOptions(domain_type=self.domain_type), shutdown_timeout=s.shutdown_timeout,
            events=EventRing(100, 300.0), networks=networks,
        )
        core.start()
        return core

    async def start(self, timeout: float = 60.0) -> None:
        from ironpool.runtime.machine.console_server import ConsoleServer
        from ironpool.runtime.machine.server import serve
        from ironpool.runtime.qemu_access import QemuAccessError

        try:
            self._core = await asyncio.to_thread(self._open_core)
        except (ConnectionError, ValueError, QemuAccessError) as exc:
            raise StartError(f"machine runtime: {exc}") from exc
        console = ConsoleServer(self._core, "127.0.0.1", 0)
        started = asyncio.Event()
        self._task = asyncio.create_task(
            serve(self._core, self.endpoint, console, ready=lambda _addr: started.set()),
            name="machine-runtime",
        )
        await wait_started(self._task, started, "machine runtime", timeout)

    def count(self, labels: dict[str, str]) -> int:
        """How many of the runtime's machines carry ``labels``."""
        return len(self._core.list_machines("", labels)) if self._core is not None else 0

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(Exception, asyncio.CancelledError):
                await self._task
        if self._core is not None:
            # The connection stays open: the process is ending, and closing it under libvirt's event
            # thread makes libvirt print lock warnings.
            self._core.close()
            self._core = None


# ---------------------------------------------------------------------------------------- volume runtime


@dataclass
class VolumeRuntimeSettings:
    """What the volume runtime needs from ``ironpool up``."""

    libvirt_uri: str
    storage_pool: str
    pool_path: Path
    classes_file: Path
    images: Path
    socket: Path
    workers: int = 8
    owner: str | None = None
    share_pool: bool = False
    image_cache: Path | None = None  # default: beside the catalog folder


class VolumeRuntimeRunner:
    """The libvirt volume runtime (IRI ``VolumeRuntime``) on a ``dir`` storage pool, on a unix socket."""

    def __init__(self, settings: VolumeRuntimeSettings) -> None:
        self.settings = settings
        self.volumes = 0
        self.problems: list[str] = []
        self._core: Any = None
        self._server: Any = None
        self._executor: ThreadPoolExecutor | None = None

    @property
    def endpoint(self) -> str:
        return f"unix://{self.settings.socket}"

    @property
    def storage_pool(self) -> str:
        """The pool's name once started (an existing pool on the same folder keeps its own)."""
        return str(self._core.pool.name) if self._core is not None else self.settings.storage_pool

    async def start(self) -> None:
        import grpc.aio

        from ironpool.iri.gen.volume.v1alpha1 import api_pb2_grpc as volume_grpc
        from ironpool.runtime.errors import IriError
        from ironpool.runtime.images import open_resolver
        from ironpool.runtime.service import bind_address
        from ironpool.runtime.volume.classes import load_classes
        from ironpool.runtime.volume.driver import VolumeDriver
        from ironpool.runtime.volume.host import StorageHost
        from ironpool.runtime.volume.images import VolumeImages
        from ironpool.runtime.volume.pool import PoolConfigError, StoragePool
        from ironpool.runtime.volume.server import VolumeRuntimeServicer

        s = self.settings
        try:
            host = StorageHost(s.libvirt_uri)
        except ConnectionError as exc:
            raise StartError(f"volume runtime: {exc}") from exc
        core = VolumeDriver(
            StoragePool(host, s.storage_pool, s.pool_path), load_classes(s.classes_file),
            VolumeImages(open_resolver(s.images, s.image_cache or s.images.parent / "image-cache")),
            owner=s.owner, share_pool=s.share_pool,
        )
        self._executor = ThreadPoolExecutor(max_workers=s.workers, thread_name_prefix="volume-runtime")
        loop = asyncio.get_running_loop()
        try:
            await loop.run_in_executor(self._executor, core.start)
        except (PoolConfigError, IriError) as exc:
            self._executor.shutdown(wait=False)
            raise StartError(f"volume runtime: {exc}") from exc
        self._core = core
        self.problems = list(core.problems)
        for problem in core.problems:
            log.warning("volume runtime reconcile: %s", problem)
        self.volumes = len(core.list_volumes())
        server = grpc.aio.server()
        volume_grpc.add_VolumeRuntimeServicer_to_server(VolumeRuntimeServicer(core, self._executor), server)
        bind_address(server, self.endpoint)
        await server.start()
        self._server = server

    async def stop(self) -> None:
        if self._server is not None:
            await self._server.stop(grace=2)
            self._server = None
        if self._executor is not None:
            self._executor.shutdown(wait=True)
            self._executor = None
        if self._core is not None:
            self._core.close()
            self._core.pool.host.close()
            self._core = None
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self.settings.socket)
