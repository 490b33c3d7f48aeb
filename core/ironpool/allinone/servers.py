"""The servers ``ironpool up`` and ``ironpool join`` run in their one event loop, each started through
its component's own assembly, so that whatever a component's command does when it starts (its
flags' defaults, its collector tuning, its listening socket) it does here too:

* :class:`ApiServerRunner` - :func:`ironpool.apiserver.app.serve` over a store;
* :class:`MachineRuntimeRunner` - :func:`ironpool.runtime.machine.app.build` and
  :func:`ironpool.runtime.machine.server.serve`;
* :class:`VolumeRuntimeRunner` - :func:`ironpool.runtime.volume.app.build` and
  :func:`ironpool.runtime.volume.server.serve`.

Each serves as a task with a stop event of its own, so the process stops its parts in the order it
chooses, and leaves SIGINT and SIGTERM to the process: one Ctrl-C stops everything in order.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Coroutine
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ironpool.apiserver import TlsFiles
from ironpool.apiserver.options import ServerOptions

if TYPE_CHECKING:  # loaded when a runtime starts: `ironpool --help` loads neither libvirt nor grpc
    from ironpool.runtime.machine.app import MachineRuntimeConfig
    from ironpool.runtime.machine.driver import MachineDriver
    from ironpool.runtime.volume.app import VolumeRuntimeConfig
    from ironpool.runtime.volume.driver import VolumeDriver

log = logging.getLogger(__name__)


class StartError(Exception):
    """A component could not start; the message names it and the cause."""


async def wait_started(task: asyncio.Task[Any], started: asyncio.Event, what: str, timeout: float) -> None:
    """Wait for ``started`` while watching ``task``: a task that ends first is the error reported."""
    waiter = asyncio.ensure_future(started.wait())
    try:
        done, _ = await asyncio.wait({task, waiter}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        waiter.cancel()
    if started.is_set():
        return
    if task in done:
        exc = task.exception() if not task.cancelled() else None
        if exc is not None:
            raise StartError(f"{what}: {exc}") from exc
        raise StartError(f"{what} stopped while starting")
    task.cancel()
    raise StartError(f"{what} did not start within {timeout:.0f}s")


class _Served:
    """A component's serve coroutine run as a task of this process until :meth:`stop`."""

    what = "server"

    def __init__(self) -> None:
        self._stop = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def _serve(self, serving: Coroutine[Any, Any, None], started: asyncio.Event,
                     timeout: float) -> None:
        self._task = asyncio.create_task(serving, name=self.what)
        await wait_started(self._task, started, self.what, timeout)

    async def _stop_serving(self, timeout: float = 15.0) -> None:
        task, self._task = self._task, None
        if task is None:
            return
        self._stop.set()
        try:
            await asyncio.wait_for(asyncio.shield(task), timeout)
        except TimeoutError:
            log.warning("%s did not stop within %.0fs; cancelling it", self.what, timeout)
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
        except (Exception, asyncio.CancelledError) as exc:  # reported; the shutdown goes on
            log.warning("%s ended with %r", self.what, exc)


# --------------------------------------------------------------------------------------------- apiserver


class ApiServerRunner(_Served):
    """The REST apiserver on ``host:port`` (port 0: a free one) over a SQLite (or etcd) store URL."""

    what = "apiserver"

    def __init__(self, store_url: str, token_file: Path, host: str, port: int,
                 tls: TlsFiles | None = None, options: ServerOptions | None = None) -> None:
        super().__init__()
        self.store_url = store_url
        self.options = options or ServerOptions()
        self.token_file = token_file
        self.host, self.port = host, port
        self.tls = tls
        self._store: Any = None

    @property
    def url(self) -> str:
        """Where clients on this host reach it (a wildcard listen address is reached on loopback)."""
        host = {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(self.host, self.host)
        host = f"[{host}]" if ":" in host else host
        return f"{'https' if self.tls else 'http'}://{host}:{self.port}"

    async def start(self, timeout: float = 30.0) -> None:
        from ironpool.apiserver import Authenticator, ListenError, serve
        from ironpool.store.interface import open_store

        authenticator = Authenticator.from_file(self.token_file)
        self._store = open_store(self.store_url)
        await self._store.current_revision()  # opens the database now: a broken file fails here
        started = asyncio.Event()

        def ready(port: int) -> None:
            self.port = port
            started.set()

        serving = serve(self._store, authenticator, self.host, self.port, tls=self.tls, options=self.options,
                        stop=self._stop, ready=ready)
        try:
            await self._serve(serving, started, timeout)
        except StartError as exc:
            if isinstance(exc.__cause__, ListenError):
                raise StartError(f"{exc} (choose another --listen)") from exc.__cause__
            raise

    async def stop(self) -> None:
        await self._stop_serving(10.0)
        if self._store is not None:
            await self._store.close()
            self._store = None


# --------------------------------------------------------------------------------------- machine runtime


class MachineRuntimeRunner(_Served):
    """The libvirt machine runtime (IRI ``MachineRuntime``), configured as its command is."""

    what = "machine runtime"

    def __init__(self, config: MachineRuntimeConfig) -> None:
        super().__init__()
        self.config = config
        self._driver: MachineDriver | None = None

    @property
    def endpoint(self) -> str:
        return self.config.address

    @property
    def domain_type(self) -> str:
        """The libvirt domain type chosen at start (``kvm`` or ``qemu``)."""
        return self._driver.options.domain_type if self._driver is not None else ""

    async def start(self, timeout: float = 60.0) -> None:
        from ironpool.runtime.machine.app import build
        from ironpool.runtime.machine.server import serve
        from ironpool.runtime.qemu_access import QemuAccessError

        try:
            driver, console = await asyncio.to_thread(build, self.config)
        except (ConnectionError, ValueError, QemuAccessError) as exc:
            raise StartError(f"{self.what}: {exc}") from exc
        self._driver = driver
        started = asyncio.Event()
        serving = serve(driver, self.config.address, console, self._stop, lambda _addr: started.set())
        await self._serve(serving, started, timeout)

    def count(self, labels: dict[str, str]) -> int:
        """How many of the runtime's machines carry ``labels``."""
        return len(self._driver.list_machines("", labels)) if self._driver is not None else 0

    async def stop(self) -> None:
        await self._stop_serving()
        if self._driver is not None:
            # The connection stays open: the process is ending, and closing it under libvirt's event
            # thread makes libvirt print lock warnings.
            self._driver.close()
            self._driver = None


# ---------------------------------------------------------------------------------------- volume runtime


class VolumeRuntimeRunner(_Served):
    """The libvirt volume runtime (IRI ``VolumeRuntime``) on a ``dir`` storage pool, configured as its
    command is."""

    what = "volume runtime"

    def __init__(self, config: VolumeRuntimeConfig) -> None:
        super().__init__()
        self.config = config
        self.volumes = 0
        self.problems: list[str] = []
        self._driver: VolumeDriver | None = None

    @property
    def endpoint(self) -> str:
        return self.config.address

    @property
    def storage_pool(self) -> str:
        """The pool's name once started (an existing pool on the same folder keeps its own)."""
        return self._driver.pool.name if self._driver is not None else self.config.storage_pool

    async def start(self, timeout: float = 300.0) -> None:
        from ironpool.runtime.volume.app import build
        from ironpool.runtime.volume.server import serve

        try:
            driver = self._driver = await asyncio.to_thread(build, self.config)
        except (ConnectionError, ValueError) as exc:
            raise StartError(f"{self.what}: {exc}") from exc
        started = asyncio.Event()
        serving = serve(driver, self.config.address, self._stop, self.config.workers,
                        lambda _addr: started.set())
        await self._serve(serving, started, timeout)
        self.problems = list(driver.problems)
        self.volumes = len(driver.list_volumes())

    async def stop(self) -> None:
        await self._stop_serving()
        self._driver = None
