"""``ironpool up``: the whole system for one host in one asyncio process.

Start order: data directory and lock, admin token, classes, tiny image, local CA and serving
certificate, apiserver (SQLite, HTTPS), class seeding, client configuration and kubeconfig, machine
and volume runtimes (unix sockets), scheduler, pool lifecycle, machinepoollet and volumepoollet.
Stop order is the reverse. Everything durable lives in libvirt and the data directory, so a restart
(also after kill -9) resumes with the same state.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import logging.handlers
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ironpool.allinone.access import prepare_tls, write_kubeconfig
from ironpool.allinone.classes import load_class_manifests, seed_classes, write_runtime_files
from ironpool.allinone.datadir import (
    DataDir,
    InstanceLock,
    default_pool_name,
    default_storage_pool,
    ensure_admin_token,
    installation_owner,
)
from ironpool.allinone.image import TINY, ensure_tiny_image
from ironpool.allinone.progress import Progress
from ironpool.allinone.servers import (
    ApiServerRunner,
    MachineRuntimeRunner,
    MachineRuntimeSettings,
    StartError,
    VolumeRuntimeRunner,
    VolumeRuntimeSettings,
    wait_started,
)
from ironpool.apiserver.tls import is_loopback
from ironpool.iri.client import AsyncMachineRuntimeClient
from ironpool.poollet.collector import CollectOptions
from ironpool.poollet.keys import MACHINE_POOL_LABEL

log = logging.getLogger(__name__)


def default_classes() -> list[Path]:
    """The classes shipped with the package (``examples/classes`` in the repository points there),
    so an installed ironpool offers them as a checkout does."""
    return [Path(__file__).resolve().parent / "default_classes"]


@dataclass
class UpOptions:
    """Everything ``ironpool up`` can be told."""

    data_dir: Path
    libvirt_uri: str = "qemu:///system"
    listen_host: str = "127.0.0.1"
    listen_port: int = 6443
    insecure_http: bool = False  # plain HTTP, loopback only
    pool: str = field(default_factory=default_pool_name)
    provider_id: str = ""
    storage_pool: str = ""  # default: one per data dir (default_storage_pool)
    share_storage_pool: bool = False
    classes: list[Path] = field(default_factory=default_classes)
    images: Path | None = None
    tiny_image: bool = True
    domain_type: str = "auto"
    network_mode: str = "user"  # how Networks without a mode label are realised on this host
    network_bridge: str = ""
    capacity_cpu: int | None = None
    capacity_memory: int | None = None
    reserved_cpu: int = 0
    reserved_memory: int = 0
    capacity_storage: int | None = None
    write_client_config: bool = True
    client_config: Path | None = None
    heartbeat_interval: float = 10.0
    relist_period: float = 2.0
    lifecycle_grace: float = 50.0
    gc: CollectOptions = field(default_factory=CollectOptions)
    workers: int = 8
    log_level: str = "INFO"

    def __post_init__(self) -> None:
        if not self.provider_id:
            self.provider_id = f"ironpool://{socket.gethostname()}"
        if not self.storage_pool:
            self.storage_pool = default_storage_pool(self.data_dir)
        if self.insecure_http and not is_loopback(self.listen_host):
            raise ValueError(f"--insecure-http serves plain HTTP only on a loopback address, not "
                             f"{self.listen_host}; drop --insecure-http to serve HTTPS there")


class UpError(Exception):
    """``ironpool up`` could not start; the message says which part and why."""


@dataclass
class _Task:
    name: str
    task: asyncio.Task[None]


class AllInOne:
    """The running system; ``run`` starts it, waits for ``stop`` and shuts it down."""

    def __init__(self, options: UpOptions, progress: Progress | None = None) -> None:
        self.options = options
        self.progress = progress or Progress()
        self.dirs = DataDir(options.data_dir.absolute())
        self.apiserver: ApiServerRunner | None = None
        self.machine_runtime: MachineRuntimeRunner | None = None
        self.volume_runtime: VolumeRuntimeRunner | None = None
        self.tasks: list[_Task] = []
        self.clients: list[Any] = []
        self.runtime_clients: list[Any] = []
        self.admin_token = ""
        self.ca_file: str | None = None
        self.client_config_path: Path | None = None
        self._lock = InstanceLock(self.dirs.lock_file)
        self._log_handler: logging.Handler | None = None
        self.failed: str | None = None

    # -- logging -----------------------------------------------------------------------------

    def _setup_logging(self) -> None:
        handler = logging.handlers.RotatingFileHandler(self.dirs.log_file, maxBytes=20 << 20, backupCount=3)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        root = logging.getLogger()
        root.addHandler(handler)
        root.setLevel(self.options.log_level.upper())
        if root.level > logging.DEBUG:
            # One line per HTTP request from every controller drowns what matters.
            logging.getLogger("httpx").setLevel(logging.WARNING)
        self._log_handler = handler

    def _teardown_logging(self) -> None:
        if self._log_handler is not None:
            logging.getLogger().removeHandler(self._log_handler)
            self._log_handler.close()
            self._log_handler = None

    # -- start -------------------------------------------------------------------------------

    def _client(self) -> Any:
        from ironpool.client.config import ClientConfig
        from ironpool.client.rest import AsyncClient

        assert self.apiserver is not None
        config = ClientConfig(server=self.apiserver.url, token=self.admin_token, ca_file=self.ca_file)
        client = AsyncClient(config)
        self.clients.append(client)
        return client

    def _spawn(self, name: str, coro: Awaitable[None]) -> None:
        self.tasks.append(_Task(name, asyncio.ensure_future(coro)))

    async def _until_ready(self, name: str, ready: asyncio.Event, timeout: float) -> None:
        try:
            await wait_started(self.tasks[-1].task, ready, name, timeout)
        except StartError as exc:
            raise StartError(f"{exc} (see {self.dirs.log_file})") from exc

    async def start(self, stop: asyncio.Event) -> None:
        from ironpool.iri.client import AsyncVolumeRuntimeClient
        from ironpool.poollet.capacity import HostResources, local_host_resources
        from ironpool.poollet.lifecycle import run_pool_lifecycle
        from ironpool.poollet.machinepoollet import MachinePoolletOptions, run_machinepoollet
        from ironpool.poollet.volumepoollet import VolumePoolletOptions, run_volumepoollet
        from ironpool.scheduler.runner import SchedulerRunner

        opts, dirs, p = self.options, self.dirs, self.progress
        p.begin()
        dirs.prepare()
        self._lock.acquire()
        self._setup_logging()
        log.info("ironpool up: data dir %s, pool %s", dirs.root, opts.pool)
        self.admin_token = ensure_admin_token(dirs.tokens)
        classes = load_class_manifests(opts.classes)
        machine_classes, volume_classes = write_runtime_files(classes, dirs.classes)
        p.ok("data dir", str(dirs.root))

        images = opts.images or dirs.images
        if opts.tiny_image:
            p.begin()
            built = await ensure_tiny_image(images, dirs.logs / "build-tiny-image.log")
            p.ok(f"image {TINY}", f"{images / TINY}{' (built)' if built else ''}")

        p.begin()
        tls = None if opts.insecure_http else prepare_tls(dirs.pki, opts.listen_host)
        self.ca_file = tls.client_ca_file if tls else None
        self.apiserver = ApiServerRunner(f"sqlite://{dirs.db}", dirs.tokens, opts.listen_host,
                                         opts.listen_port, tls)
        await self.apiserver.start()
        p.ok("apiserver", self.apiserver.url + ("" if tls else "  (plain HTTP: --insecure-http)"))

        p.begin()
        seed_client = self._client()
        created = await seed_classes(seed_client, classes)
        summary = ", ".join(classes.names("MachineClass") + classes.names("VolumeClass"))
        p.ok("classes", f"{summary}" + (f" ({len(created)} new)" if created else ""))
        if opts.write_client_config:
            from ironpool.client.config import ClientConfig

            self.client_config_path = ClientConfig(
                server=self.apiserver.url, token=self.admin_token, ca_file=self.ca_file,
            ).save(opts.client_config)
            p.ok("client config", str(self.client_config_path))
        write_kubeconfig(dirs.kubeconfig, self.apiserver.url, self.admin_token, self.ca_file)
        p.ok("kubeconfig", str(dirs.kubeconfig))

        p.begin()
        self.machine_runtime = MachineRuntimeRunner(MachineRuntimeSettings(
            libvirt_uri=opts.libvirt_uri, classes_file=machine_classes, images=images,
            state_dir=dirs.machine_state, socket=dirs.machine_socket, domain_type=opts.domain_type,
            network_mode=opts.network_mode, network_bridge=opts.network_bridge,
        ))
        await self.machine_runtime.start()
        mr = self.machine_runtime
        mine = await asyncio.to_thread(mr.count, {MACHINE_POOL_LABEL: opts.pool})
        p.ok("machine runtime", f"{mr.endpoint}  ({mr.domain_type}, {mine} machine(s) of this pool)")

        p.begin()
        self.volume_runtime = VolumeRuntimeRunner(VolumeRuntimeSettings(
            libvirt_uri=opts.libvirt_uri, storage_pool=opts.storage_pool, pool_path=dirs.volumes,
            classes_file=volume_classes, images=images, socket=dirs.volume_socket,
            owner=installation_owner(dirs.root), share_pool=opts.share_storage_pool,
        ))
        await self.volume_runtime.start()
        vr = self.volume_runtime
        opts.storage_pool = vr.storage_pool  # an existing pool on our folder keeps its name
        dirs.write_installation({"libvirtURI": opts.libvirt_uri, "storagePool": opts.storage_pool,
                                 "pool": opts.pool, "api": self.apiserver.url})
        p.ok("volume runtime", f"{vr.endpoint}  (storage pool {opts.storage_pool}, {vr.volumes} volume(s))")

        p.begin()
        scheduler = SchedulerRunner(self._client())
        self._spawn("scheduler", scheduler.run(stop))
        await self._until_ready("scheduler", scheduler.ready, 60)
        p.ok("scheduler", "")

        p.begin()
        self._spawn("pool lifecycle", run_pool_lifecycle(self._client(), opts.lifecycle_grace, stop))
        p.ok("pool lifecycle", f"grace {opts.lifecycle_grace:.0f}s")

        capacity = None
        if opts.capacity_cpu is not None or opts.capacity_memory is not None:
            local = local_host_resources()
            capacity = HostResources(
                opts.capacity_cpu if opts.capacity_cpu is not None else local.cpu,
                opts.capacity_memory if opts.capacity_memory is not None else local.memory,
            )
        p.begin()
        machine_iri = AsyncMachineRuntimeClient.connect(mr.endpoint)
        self.runtime_clients.append(machine_iri)
        mp_ready = asyncio.Event()
        self._spawn("machinepoollet", run_machinepoollet(
            self._client(), machine_iri,
            MachinePoolletOptions(
                pool=opts.pool, provider_id=opts.provider_id, addresses=(("Hostname", socket.gethostname()),),
                workers=opts.workers, heartbeat_interval=opts.heartbeat_interval,
                relist_period=opts.relist_period, capacity=capacity,
                reserved=HostResources(opts.reserved_cpu, opts.reserved_memory), gc=opts.gc,
            ),
            stop, mp_ready,
        ))
        await self._until_ready("machinepoollet", mp_ready, 60)
        p.ok("machinepoollet", f"MachinePool {opts.pool}")

        p.begin()
        volume_iri = AsyncVolumeRuntimeClient.connect(vr.endpoint)
        self.runtime_clients.append(volume_iri)
        vp_ready = asyncio.Event()
        self._spawn("volumepoollet", run_volumepoollet(
            self._client(), volume_iri,
            VolumePoolletOptions(
                pool=opts.pool, provider_id=opts.provider_id, workers=opts.workers,
                heartbeat_interval=opts.heartbeat_interval, relist_period=opts.relist_period,
                capacity_bytes=opts.capacity_storage, gc=opts.gc,
            ),
            stop, vp_ready,
        ))
        await self._until_ready("volumepoollet", vp_ready, 60)
        p.ok("volumepoollet", f"VolumePool {opts.pool}")

    def summary(self) -> list[tuple[str, str]]:
        assert self.apiserver and self.machine_runtime and self.volume_runtime
        rows = [
            ("API", self.apiserver.url),
            ("CA", self.ca_file or "(none: plain HTTP)"),
            ("token file", str(self.dirs.tokens)),
            ("client config", str(self.client_config_path) if self.client_config_path else "(not written)"),
            ("kubeconfig", str(self.dirs.kubeconfig)),
            ("machine IRI", self.machine_runtime.endpoint),
            ("volume IRI", self.volume_runtime.endpoint),
            ("pools", f"MachinePool {self.options.pool}, VolumePool {self.options.pool} "
                      f"(providerID {self.options.provider_id})"),
            ("storage pool", f"{self.options.storage_pool} at {self.dirs.volumes}"),
            ("images", str(self.options.images or self.dirs.images)),
            ("data dir", str(self.dirs.root)),
            ("log", str(self.dirs.log_file)),
        ]
        return rows

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
        """Stop in reverse order: poollets, lifecycle, scheduler, runtimes, apiserver."""
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
        if self.apiserver is not None:
            await self.apiserver.stop()
        log.info("ironpool up stopped")
        self._teardown_logging()
        self._lock.release()

    async def run(self, stop: asyncio.Event, on_started: Callable[[AllInOne], None] | None = None) -> None:
        """Start, wait for ``stop`` (or a component failing), shut down. Raises UpError on start failure.

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
            log.error("ironpool up failed to start: %s", exc, exc_info=exc)
            await self.shutdown(stop)
            raise UpError(str(exc)) from exc
        if on_started is not None:
            on_started(self)
        await self._watch_tasks(stop)
        await self.shutdown(stop)
        if self.failed:
            raise UpError(self.failed)
