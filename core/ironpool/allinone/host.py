"""What every ironpool host process runs: the libvirt machine and volume runtimes and the two
poollets, in one asyncio process with one data directory.

``ironpool up`` (:mod:`ironpool.allinone.up`) adds a control plane beside them; ``ironpool join``
(:mod:`ironpool.allinone.join`) reaches a remote one. Both share the data directory layout, the lock,
the log file, the start and stop order of these parts, and what ``ironpool down`` finds and removes.
"""

from __future__ import annotations

import abc
import asyncio
import contextlib
import dataclasses
import logging
import logging.handlers
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ironpool.allinone.backup import read_restore_record
from ironpool.allinone.datadir import (
    DataDir,
    InstanceLock,
    default_pool_name,
    default_storage_pool,
)
from ironpool.allinone.progress import Progress
from ironpool.allinone.servers import MachineRuntimeRunner, StartError, VolumeRuntimeRunner, wait_started
from ironpool.poollet.collector import CollectOptions
from ironpool.poollet.keys import MACHINE_POOL_LABEL
from ironpool.runtime.machine import vcpu_slice

log = logging.getLogger(__name__)


def default_classes() -> list[Path]:
    """The classes shipped with the package (``examples/classes`` in the repository points there),
    so an installed ironpool offers them as a checkout does."""
    return [Path(__file__).resolve().parent / "default_classes"]


@dataclass
class HostOptions:
    """How this host's runtimes and poollets run, whoever runs the control plane."""

    data_dir: Path
    libvirt_uri: str = "qemu:///system"
    pool: str = field(default_factory=default_pool_name)
    provider_id: str = ""
    storage_pool: str = ""  # default: one per data dir (default_storage_pool)
    share_storage_pool: bool = False
    classes: list[Path] = field(default_factory=default_classes)
    images: Path | None = None
    tiny_image: bool = True
    domain_type: str = "auto"
    vcpu_slice_ms: float = vcpu_slice.DEFAULT_MS  # the runtime's --vcpu-slice-ms
    max_booting: int | None = None  # the runtime's --max-booting (None: the host's CPUs)
    network_mode: str = "user"  # how Networks without a mode label are realised on this host
    network_bridge: str = ""
    capacity_cpu: int | None = None
    capacity_memory: int | None = None
    reserved_cpu: int = 0
    reserved_memory: int = 0
    #: virtual cores per host core machines may be given; the runtime and the poollet both apply it
    cpu_allocation_ratio: float = 1.0
    capacity_storage: int | None = None
    heartbeat_interval: float = 10.0
    #: the machinepoollet's --fence-after (ironpool.poollet.fencing); 0: never
    fence_after: float = 30.0
    relist_period: float = 2.0
    gc: CollectOptions = field(default_factory=CollectOptions)
    workers: int = 8
    log_level: str = "INFO"

    def __post_init__(self) -> None:
        from ironpool.poollet.fencing import check_fence_after

        check_fence_after(self.fence_after, self.heartbeat_interval)
        if not self.provider_id:
            self.provider_id = f"ironpool://{socket.gethostname()}"
        if not self.storage_pool:
            self.storage_pool = default_storage_pool(self.data_dir)


@dataclass
class _Task:
    name: str
    task: asyncio.Task[None]


class HostProcess(abc.ABC):
    """The runtimes and poollets of one host; subclasses say what else runs and in which order."""

    label = "ironpool"  # how logs and errors name the process

    def __init__(self, options: HostOptions, progress: Progress | None = None) -> None:
        self.options = options
        self.progress = progress or Progress()
        self.dirs = DataDir(options.data_dir.absolute())
        self.machine_runtime: MachineRuntimeRunner | None = None
        self.volume_runtime: VolumeRuntimeRunner | None = None
        self.tasks: list[_Task] = []
        self.clients: list[Any] = []
        self.runtime_clients: list[Any] = []
        self._lock = InstanceLock(self.dirs.lock_file)
        self._log_handler: logging.Handler | None = None
        self.failed: str | None = None
        #: the token the apiserver presents to this host's machinepoollet console endpoint; None: the
        #: poollet serves no console (a joined host, whose apiserver has no way to learn it yet)
        self.console_token: str | None = None

    # -- to be given by subclasses -----------------------------------------------------------

    @abc.abstractmethod
    async def start(self, stop: asyncio.Event) -> None:
        """Start this host's parts (and, for ``ironpool up``, the control plane) until ``stop``."""

    async def stop_control_plane(self) -> None:  # noqa: B027 - optional: a joined host has none
        """Whatever the subclass runs after the runtimes have stopped (an apiserver)."""

    # -- logging -----------------------------------------------------------------------------

    def setup_logging(self) -> None:
        handler = logging.handlers.RotatingFileHandler(self.dirs.log_file, maxBytes=20 << 20, backupCount=3)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        root = logging.getLogger()
        root.addHandler(handler)
        root.setLevel(self.options.log_level.upper())
        self._log_handler = handler

    def _teardown_logging(self) -> None:
        if self._log_handler is not None:
            logging.getLogger().removeHandler(self._log_handler)
            self._log_handler.close()
            self._log_handler = None

    def open_data_dir(self) -> None:
        """Create the data dir's folders, take its lock and start logging to its log file."""
        self.dirs.prepare()
        self._lock.acquire()
        self.setup_logging()
        restored = read_restore_record(self.dirs)
        if restored is not None:
            taken = str(restored.get("backupCreatedAt", "?"))
            log.warning("this data dir was restored at %s from a backup taken at %s: machines and volumes "
                        "made after the backup are reported as orphans and removed only after the "
                        "%.0fs grace period", restored.get("restoredAt", "?"), taken, self.options.gc.grace)
            self.options.gc = dataclasses.replace(self.options.gc, restored_from=taken)

    # -- parts -------------------------------------------------------------------------------

    def spawn(self, name: str, coro: Awaitable[None]) -> None:
        self.tasks.append(_Task(name, asyncio.ensure_future(coro)))

    async def until_ready(self, name: str, ready: asyncio.Event, timeout: float) -> None:
        try:
            await wait_started(self.tasks[-1].task, ready, name, timeout)
        except StartError as exc:
            raise StartError(f"{exc} (see {self.dirs.log_file})") from exc

    async def start_runtimes(self, images: Path, machine_classes: Path, volume_classes: Path,
                             record: dict[str, str]) -> None:
        """The machine and volume runtimes on unix sockets in the data dir; ``record`` (plus the libvirt
        URI, storage pool and pool) goes to ``installation.json`` for ``ironpool down``."""
        from ironpool.runtime.machine.app import MachineRuntimeConfig
        from ironpool.runtime.machine.capacity import CapacityPolicy
        from ironpool.runtime.machine.nics import NetworkSettings
        from ironpool.runtime.volume.app import VolumeRuntimeConfig

        opts, dirs, p = self.options, self.dirs, self.progress
        p.begin()
        try:
            networks = NetworkSettings(opts.network_mode, opts.network_bridge)
            capacity = CapacityPolicy(opts.cpu_allocation_ratio, opts.reserved_memory, opts.capacity_cpu,
                                      opts.capacity_memory, opts.reserved_cpu)
        except ValueError as exc:
            raise StartError(f"machine runtime: {exc}") from exc
        self.machine_runtime = MachineRuntimeRunner(MachineRuntimeConfig(
            classes_file=machine_classes, images_dir=images, libvirt_uri=opts.libvirt_uri,
            address=f"unix://{dirs.machine_socket}", state_dir=dirs.machine_state,
            domain_type=opts.domain_type, vcpu_slice_ns=vcpu_slice.ms_to_ns(opts.vcpu_slice_ms),
            max_booting=opts.max_booting,
            streaming_port=0, networks=networks, image_cache=dirs.image_cache, capacity=capacity,
        ))
        await self.machine_runtime.start()
        mr = self.machine_runtime
        mine = await asyncio.to_thread(mr.count, {MACHINE_POOL_LABEL: opts.pool})
        p.ok("machine runtime", f"{mr.endpoint}  ({mr.domain_type}, {mine} machine(s) of this pool)")

        p.begin()
        self.volume_runtime = VolumeRuntimeRunner(VolumeRuntimeConfig(
            classes_file=volume_classes, libvirt_uri=opts.libvirt_uri, storage_pool=opts.storage_pool,
            pool_path=dirs.volumes, images_dir=images, address=f"unix://{dirs.volume_socket}",
            owner=dirs.owner, share_pool=opts.share_storage_pool, image_cache=dirs.image_cache,
        ))
        await self.volume_runtime.start()
        vr = self.volume_runtime
        opts.storage_pool = vr.storage_pool  # an existing pool on our folder keeps its name
        dirs.write_installation({"libvirtURI": opts.libvirt_uri, "storagePool": opts.storage_pool,
                                 "pool": opts.pool, **record})
        p.ok("volume runtime", f"{vr.endpoint}  (storage pool {opts.storage_pool}, {vr.volumes} volume(s))")

    async def start_poollets(self, machine_client: Any, volume_client: Any, stop: asyncio.Event) -> None:
        """The machinepoollet and volumepoollet of ``options.pool``, each with its own API client."""
        from ironpool.iri.client import AsyncMachineRuntimeClient, AsyncVolumeRuntimeClient
        from ironpool.poollet.capacity import HostResources, given_capacity
        from ironpool.poollet.machinepoollet import MachinePoolletOptions, run_machinepoollet
        from ironpool.poollet.volumepoollet import VolumePoolletOptions, run_volumepoollet

        opts = self.options
        assert self.machine_runtime is not None and self.volume_runtime is not None
        shared: dict[str, Any] = {
            "pool": opts.pool, "provider_id": opts.provider_id, "workers": opts.workers,
            "heartbeat_interval": opts.heartbeat_interval, "relist_period": opts.relist_period, "gc": opts.gc,
        }
        # The console endpoint listens on loopback beside the apiserver of `ironpool up`, and the pool
        # says so with an InternalIP the apiserver dials before the Hostname.
        console: dict[str, Any] = {}
        addresses: tuple[tuple[str, str], ...] = (("Hostname", socket.gethostname()),)
        if self.console_token:
            console = {"exec_address": ("127.0.0.1", 0), "exec_token": self.console_token}
            addresses = (("InternalIP", "127.0.0.1"), *addresses)
        await self._start_poollet("machinepoollet", run_machinepoollet, machine_client,
                                  AsyncMachineRuntimeClient.connect(self.machine_runtime.endpoint),
                                  MachinePoolletOptions(
                                      **shared, **console, addresses=addresses,
                                      capacity=given_capacity(opts.capacity_cpu, opts.capacity_memory),
                                      reserved=HostResources(opts.reserved_cpu, opts.reserved_memory),
                                      cpu_allocation_ratio=opts.cpu_allocation_ratio,
                                      fence_after=opts.fence_after),
                                  stop, f"MachinePool {opts.pool}")
        await self._start_poollet("volumepoollet", run_volumepoollet, volume_client,
                                  AsyncVolumeRuntimeClient.connect(self.volume_runtime.endpoint),
                                  VolumePoolletOptions(**shared, capacity_bytes=opts.capacity_storage),
                                  stop, f"VolumePool {opts.pool}")

    async def _start_poollet(self, name: str, run: Callable[..., Awaitable[None]], client: Any, iri: Any,
                             options: Any, stop: asyncio.Event, what: str) -> None:
        """Run a poollet (``run(client, iri, options, stop, ready)``) until ``stop``; back once ready."""
        self.progress.begin()
        self.runtime_clients.append(iri)
        ready = asyncio.Event()
        self.spawn(name, run(client, iri, options, stop, ready))
        await self.until_ready(name, ready, 60)
        self.progress.ok(name, what)

    def host_summary(self) -> list[tuple[str, str]]:
        """Where this host's parts are, for the summary printed once it runs."""
        assert self.machine_runtime and self.volume_runtime
        return [
            ("machine IRI", self.machine_runtime.endpoint),
            ("volume IRI", self.volume_runtime.endpoint),
            ("pools", f"MachinePool {self.options.pool}, VolumePool {self.options.pool} "
                      f"(providerID {self.options.provider_id})"),
            ("storage pool", f"{self.options.storage_pool} at {self.dirs.volumes}"),
            ("images", str(self.options.images or self.dirs.images)),
            ("data dir", str(self.dirs.root)),
            ("log", str(self.dirs.log_file)),
        ]

    # -- run / stop --------------------------------------------------------------------------

    async def _watch_tasks(self, stop: asyncio.Event) -> None:
        """Return when ``stop`` is set or a component ends on its own (then: stop everything)."""
        stopper = asyncio.ensure_future(stop.wait())
        try:
            pending = {t.task for t in self.tasks} | {stopper}
            done, _ = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopper.cancel()
        for t in self.tasks:
            if t.task in done and not stop.is_set():
                exc = t.task.exception() if not t.task.cancelled() else None
                self.failed = f"{t.name} stopped unexpectedly: {exc or 'it returned'}"
                log.error("%s", self.failed, exc_info=exc)
                self.progress.fail(t.name, f"stopped unexpectedly: {exc or 'it returned'}")
                stop.set()

    async def shutdown(self, stop: asyncio.Event) -> None:
        """Stop in reverse order of start: the tasks, the runtimes, the API clients, the control plane."""
        stop.set()
        for t in reversed(self.tasks):
            try:
                await asyncio.wait_for(asyncio.shield(t.task), 15)
            except TimeoutError:
                log.warning("%s did not stop within 15s; cancelling it", t.name)
                t.task.cancel()
                with contextlib.suppress(BaseException):
                    await t.task
            except BaseException as exc:  # reported; the shutdown goes on
                if not isinstance(exc, asyncio.CancelledError):
                    log.warning("%s ended with %r", t.name, exc)
        for c in self.runtime_clients:
            with contextlib.suppress(Exception):
                await c.close()
        for runner in (self.volume_runtime, self.machine_runtime):
            if runner is not None:
                with contextlib.suppress(Exception):
                    await runner.stop()
        for client in self.clients:
            with contextlib.suppress(Exception):
                await client.aclose()
        await self.stop_control_plane()
        log.info("%s stopped", self.label)
        self._teardown_logging()
        self._lock.release()

    async def run_until(self, stop: asyncio.Event, on_started: Callable[[Any], None] | None,
                        error: type[Exception]) -> None:
        """Start, wait for ``stop`` (or a component failing), shut down. Raises ``error`` on a start
        failure or a part ending on its own.

        ``stop`` set while starting (Ctrl-C during the image build, say) abandons the start at once.
        """
        starting = asyncio.ensure_future(self.start(stop))
        stopper = asyncio.ensure_future(stop.wait())
        try:
            await asyncio.wait({starting, stopper}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            stopper.cancel()
        if not starting.done():
            starting.cancel()
            with contextlib.suppress(BaseException):
                await starting
            await self.shutdown(stop)
            return
        exc = starting.exception()
        if exc is not None:
            log.error("%s failed to start: %s", self.label, exc, exc_info=exc)
            await self.shutdown(stop)
            raise error(str(exc)) from exc
        if on_started is not None:
            on_started(self)
        await self._watch_tasks(stop)
        await self.shutdown(stop)
        if self.failed:
            raise error(self.failed)
