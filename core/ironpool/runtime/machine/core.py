"""The machine runtime's logic on libvirt: create, power, volumes, interfaces, delete, status.

Synchronous and thread-safe; the gRPC layer calls it from worker threads. libvirt is the source
of truth: each machine is a persistent domain whose ``<metadata>`` holds its :class:`MachineRecord`,
and the in-memory index is rebuilt from libvirt in :meth:`MachineRuntimeCore.start`. Slow work
(ACPI shutdown with a grace period, teardown) runs on a small worker pool, never in an RPC.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import queue
import shutil
import threading
import time
import uuid
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import libvirt

from ironpool.iri.gen.machine.v1alpha1 import api_pb2 as machine_pb2
from ironpool.runtime import libvirt_util
from ironpool.runtime.errors import (
    AlreadyExists,
    FailedPrecondition,
    Internal,
    InvalidArgument,
    IriError,
    NotFound,
    Unavailable,
)
from ironpool.runtime.images import Image, ImageCatalog, ImageNotFound, InvalidImageName

from . import disks
from .classes import MachineClassSpec, quantity
from .domain_xml import (
    DomainOptions,
    disk_element,
    domain_element,
    find_device,
    interface_element,
    is_user_network,
    metadata_xml,
    nic_alias,
    parse_metadata,
    to_string,
    volume_alias,
)
from .events import EventRing, MachineEvent
from .model import DOMAIN_PREFIX, METADATA_KEY, METADATA_NS, MachineRecord, NicRecord, VolumeRecord
from .validation import (
    MAX_IGNITION_BYTES,
    check_id,
    check_name,
    check_size,
    check_string_map,
    device_target,
    is_valid_id,
)

log = logging.getLogger(__name__)

POWER_ON = machine_pb2.POWER_ON
POWER_OFF = machine_pb2.POWER_OFF
LOCAL_DRIVER = "ironpool-local"
GENERATION_ANNOTATION = "machinepoollet.ironcore.dev/irimachine-generation"
_UNDEFINE_FLAGS = (
    libvirt.VIR_DOMAIN_UNDEFINE_MANAGED_SAVE
    | libvirt.VIR_DOMAIN_UNDEFINE_SNAPSHOTS_METADATA
    | libvirt.VIR_DOMAIN_UNDEFINE_NVRAM
    | libvirt.VIR_DOMAIN_UNDEFINE_CHECKPOINTS_METADATA
)
_ACTIVE_STATES = (
    libvirt.VIR_DOMAIN_RUNNING,
    libvirt.VIR_DOMAIN_BLOCKED,
    libvirt.VIR_DOMAIN_PAUSED,
    libvirt.VIR_DOMAIN_SHUTDOWN,
    libvirt.VIR_DOMAIN_PMSUSPENDED,
)
# libvirt lifecycle event -> (reason, type, action) of the IRI event
_LIFECYCLE: dict[int, tuple[str, str, str]] = {
    libvirt.VIR_DOMAIN_EVENT_DEFINED: ("Defined", "Normal", "Define"),
    libvirt.VIR_DOMAIN_EVENT_UNDEFINED: ("Undefined", "Normal", "Undefine"),
    libvirt.VIR_DOMAIN_EVENT_STARTED: ("Started", "Normal", "Start"),
    libvirt.VIR_DOMAIN_EVENT_SUSPENDED: ("Suspended", "Normal", "Suspend"),
    libvirt.VIR_DOMAIN_EVENT_RESUMED: ("Resumed", "Normal", "Resume"),
    libvirt.VIR_DOMAIN_EVENT_STOPPED: ("Stopped", "Normal", "Stop"),
    libvirt.VIR_DOMAIN_EVENT_SHUTDOWN: ("ShuttingDown", "Normal", "Shutdown"),
    libvirt.VIR_DOMAIN_EVENT_PMSUSPENDED: ("PMSuspended", "Normal", "Suspend"),
    libvirt.VIR_DOMAIN_EVENT_CRASHED: ("Crashed", "Warning", "Crash"),
}


@dataclass
class _Entry:
    """A cached machine: its record plus what the runtime knows beyond libvirt."""

    rec: MachineRecord
    lock: threading.RLock = field(default_factory=threading.RLock)
    cond: threading.Condition = field(init=False)
    error: str = ""  # why a machine that should run does not (shown as Pending)
    tearing_down: bool = False

    def __post_init__(self) -> None:
        self.cond = threading.Condition(self.lock)


@dataclass(frozen=True)
class MachineView:
    """A machine as reported: its record, libvirt state and derived IRI state."""

    rec: MachineRecord
    state: int  # IRI MachineState
    error: str = ""


@dataclass(frozen=True)
class ClassStatus:
    cls: MachineClassSpec
    quantity: int


class MachineRuntimeCore:
    """IRI machine semantics on one libvirt connection."""

    def __init__(
        self,
        conn: libvirt.virConnect,
        classes: Mapping[str, MachineClassSpec],
        catalog: ImageCatalog,
        state_dir: str | Path,
        options: DomainOptions | None = None,
        shutdown_timeout: float = 10.0,
        events: EventRing | None = None,
        workers: int = 4,
        reconnect: Callable[[], libvirt.virConnect] | None = None,
    ) -> None:
        self._conn = conn
        self._reconnect = reconnect
        self._conn_lock = threading.Lock()
        self.classes = dict(classes)
        self.catalog = catalog
        self.state_dir = Path(state_dir).absolute()
        self.options = options or DomainOptions()
        self.shutdown_timeout = shutdown_timeout
        self.events = events or EventRing()
        self._entries: dict[str, _Entry] = {}
        self._reserved: set[str] = set()
        self._lock = threading.Lock()
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="machine-worker")
        self._lifecycle: queue.Queue[tuple[str, int, int] | None] = queue.Queue()
        self._callback_id: int | None = None
        self._dispatcher: threading.Thread | None = None
        self._host_cpus = 0
        self._host_memory = 0

    # -- the libvirt connection --------------------------------------------------------------
    @property
    def conn(self) -> libvirt.virConnect:
        """The live connection; reopened (with the event subscription) after libvirtd went away."""
        conn = self._conn
        if self._reconnect is None or conn.isAlive():
            return conn
        with self._conn_lock:
            if self._conn is not conn and self._conn.isAlive():
                return self._conn
            log.warning("libvirt connection lost; reconnecting")
            try:
                new = self._reconnect()
            except ConnectionError as exc:
                raise Unavailable(str(exc)) from exc
            self._callback_id = new.domainEventRegisterAny(
                None, libvirt.VIR_DOMAIN_EVENT_ID_LIFECYCLE, self._on_lifecycle, None
            )
            with contextlib.suppress(libvirt.libvirtError):
                conn.close()
            self._conn = new
            log.info("libvirt connection re-established")
            return new

    # -- lifecycle of the runtime ------------------------------------------------------------
    def start(self) -> None:
        """Rebuild the index from libvirt, subscribe to lifecycle events, resume pending work."""
        (self.state_dir / "machines").mkdir(parents=True, exist_ok=True)
        info = self.conn.getInfo()
        self._host_memory = int(info[1]) * 1024 * 1024
        self._host_cpus = int(info[2])
        self._dispatcher = threading.Thread(target=self._dispatch, name="machine-events", daemon=True)
        self._dispatcher.start()
        self._callback_id = self.conn.domainEventRegisterAny(
            None, libvirt.VIR_DOMAIN_EVENT_ID_LIFECYCLE, self._on_lifecycle, None
        )
        for dom in self.conn.listAllDomains(0):
            name = dom.name()
            if not name.startswith(DOMAIN_PREFIX):
                continue
            try:
                xml = dom.metadata(
                    libvirt.VIR_DOMAIN_METADATA_ELEMENT, METADATA_NS, libvirt.VIR_DOMAIN_AFFECT_CONFIG
                )
                rec = parse_metadata(xml)
            except (libvirt.libvirtError, ValueError, TypeError, KeyError) as exc:
                log.warning("skipping domain %s: no usable ironpool metadata (%s)", name, exc)
                continue
            if rec.domain_name != name:
                log.warning("skipping domain %s: metadata names machine %s", name, rec.id)
                continue
            if rec.owner != str(self.state_dir):
                log.debug("skipping domain %s: managed by the runtime of %s", name, rec.owner)
                continue
            self._entries[rec.id] = _Entry(rec)
        log.info("loaded %d machines from libvirt", len(self._entries))
        for mid, entry in list(self._entries.items()):
            if entry.rec.deleted_at:
                self._start_teardown(entry)
            else:
                self._pool.submit(self._converge_power, mid)

    def close(self) -> None:
        if self._callback_id is not None:
            with contextlib.suppress(libvirt.libvirtError):
                self.conn.domainEventDeregisterAny(self._callback_id)
            self._callback_id = None
        self._lifecycle.put(None)
        self._pool.shutdown(wait=False, cancel_futures=True)

    # -- paths -------------------------------------------------------------------------------
    def machine_dir(self, machine_id: str) -> Path:
        return self.state_dir / "machines" / machine_id

    def console_log(self, machine_id: str) -> Path:
        return self.machine_dir(machine_id) / "console.log"

    # -- reads -------------------------------------------------------------------------------
    def list_machines(
        self, machine_id: str = "", label_selector: Mapping[str, str] | None = None
    ) -> list[MachineView]:
        """Machines by id (0 or 1; unknown or malformed ids give none) and exact label match."""
        with self._lock:
            if machine_id:
                entry = self._entries.get(machine_id) if is_valid_id(machine_id) else None
                entries = [entry] if entry is not None else []
            else:
                entries = list(self._entries.values())
        selector = dict(label_selector or {})
        entries = [e for e in entries if all(e.rec.labels.get(k) == v for k, v in selector.items())]
        if not entries:
            return []
        states = self._domain_states([e.rec.domain_name for e in entries])
        return [self._view(e, states.get(e.rec.domain_name)) for e in entries]

    def get(self, machine_id: str) -> MachineView:
        entry = self._entry(machine_id)
        return self._view(entry, self._domain_states([entry.rec.domain_name]).get(entry.rec.domain_name))

    def _domain_states(self, names: list[str]) -> dict[str, tuple[int, int]]:
        if len(names) == 1:
            try:
                state, reason = self.conn.lookupByName(names[0]).state()
            except libvirt.libvirtError as exc:
                if libvirt_util.is_no_domain(exc):
                    return {}
                raise
            return {names[0]: (state, reason)}
        # One RPC for all domains instead of one per machine.
        wanted = set(names)
        out: dict[str, tuple[int, int]] = {}
        # NOWAIT: never queue behind a domain job (another runtime starting or stopping a guest).
        flags = libvirt.VIR_CONNECT_GET_ALL_DOMAINS_STATS_NOWAIT
        for dom, stats in self.conn.getAllDomainStats(libvirt.VIR_DOMAIN_STATS_STATE, flags):
            name = dom.name()
            if name in wanted:
                out[name] = (int(stats.get("state.state", 0)), int(stats.get("state.reason", 0)))
        return out

    def _view(self, entry: _Entry, state: tuple[int, int] | None) -> MachineView:
        rec = entry.rec
        return MachineView(rec=rec, state=self._iri_state(entry, state), error=entry.error)

    @staticmethod
    def _iri_state(entry: _Entry, state: tuple[int, int] | None) -> int:
        rec = entry.rec
        if rec.deleted_at or entry.tearing_down:
            return machine_pb2.MACHINE_TERMINATING
        if state is None:
            return machine_pb2.MACHINE_PENDING
        st, reason = state
        if st in (libvirt.VIR_DOMAIN_RUNNING, libvirt.VIR_DOMAIN_BLOCKED, libvirt.VIR_DOMAIN_SHUTDOWN):
            return machine_pb2.MACHINE_RUNNING
        if st in (libvirt.VIR_DOMAIN_PAUSED, libvirt.VIR_DOMAIN_PMSUSPENDED):
            return machine_pb2.MACHINE_SUSPENDED
        if st == libvirt.VIR_DOMAIN_CRASHED:
            return machine_pb2.MACHINE_TERMINATED
        # shut off: IronCore's poollet maps Suspended to Shutdown, which a powered-off machine is.
        if rec.power == POWER_ON and entry.error:
            return machine_pb2.MACHINE_PENDING
        if rec.power == POWER_ON and reason == libvirt.VIR_DOMAIN_SHUTOFF_CRASHED:
            return machine_pb2.MACHINE_TERMINATED
        if rec.power == POWER_ON and reason in (libvirt.VIR_DOMAIN_SHUTOFF_UNKNOWN,):
            return machine_pb2.MACHINE_PENDING  # defined, never started yet
        return machine_pb2.MACHINE_SUSPENDED

    def _entry(self, machine_id: str) -> _Entry:
        check_id(machine_id)
        with self._lock:
            entry = self._entries.get(machine_id)
        if entry is None:
            raise NotFound(f"machine {machine_id!r} not found")
        return entry

    def _live_entry(self, machine_id: str) -> _Entry:
        entry = self._entry(machine_id)
        if entry.rec.deleted_at:
            raise FailedPrecondition(f"machine {machine_id!r} is being deleted")
        return entry

    def _domain(self, rec: MachineRecord) -> libvirt.virDomain:
        try:
            return self.conn.lookupByName(rec.domain_name)
        except libvirt.libvirtError as exc:
            if libvirt_util.is_no_domain(exc):
                raise NotFound(f"machine {rec.id!r}: its libvirt domain {rec.domain_name} is gone") from exc
            raise

    # -- status ------------------------------------------------------------------------------
    def free_resources(self) -> tuple[int, int]:
        """Host CPUs and memory (bytes) minus what the running domains on the host use."""
        used_cpu = used_mem = 0
        # One call for all running domains; NOWAIT so a domain busy with a job never stalls Status.
        flags = (
            libvirt.VIR_CONNECT_GET_ALL_DOMAINS_STATS_ACTIVE
            | libvirt.VIR_CONNECT_GET_ALL_DOMAINS_STATS_NOWAIT
        )
        for dom, stats in self.conn.getAllDomainStats(
            libvirt.VIR_DOMAIN_STATS_VCPU | libvirt.VIR_DOMAIN_STATS_BALLOON, flags
        ):
            vcpus, max_kib = stats.get("vcpu.current"), stats.get("balloon.maximum")
            if vcpus is None or max_kib is None:
                try:
                    _state, max_kib, _mem, vcpus, _t = dom.info()
                except libvirt.libvirtError:
                    continue  # stopped meanwhile
            used_cpu += int(vcpus)
            used_mem += int(max_kib) * 1024
        return self._host_cpus - used_cpu, self._host_memory - used_mem

    def status(self) -> list[ClassStatus]:
        cpu, mem = self.free_resources()
        return [
            ClassStatus(c, quantity(c, cpu, mem)) for c in sorted(self.classes.values(), key=lambda c: c.name)
        ]

    # -- events ------------------------------------------------------------------------------
    def record_event(
        self, rec: MachineRecord, reason: str, message: str, type_: str = "Normal", action: str = ""
    ) -> None:
        self.events.add(
            MachineEvent(
                machine_id=rec.id,
                labels=dict(rec.labels),
                annotations=dict(rec.annotations),
                created_at=rec.created_at,
                reason=reason,
                message=message,
                type=type_,
                action=action or reason,
            )
        )

    def _on_lifecycle(
        self, _conn: libvirt.virConnect, dom: libvirt.virDomain, event: int, detail: int, _opaque: object
    ) -> None:
        # Runs on the libvirt event thread: hand over, never block it.
        self._lifecycle.put((dom.name(), event, detail))

    def _dispatch(self) -> None:
        while True:
            item = self._lifecycle.get()
            if item is None:
                return
            name, event, detail = item
            if not name.startswith(DOMAIN_PREFIX):
                continue
            with self._lock:
                entry = self._entries.get(name[len(DOMAIN_PREFIX) :])
            if entry is None:
                continue
            reason, type_, action = _LIFECYCLE.get(event, ("DomainEvent", "Normal", "Event"))
            if (
                event == libvirt.VIR_DOMAIN_EVENT_STOPPED
                and detail == libvirt.VIR_DOMAIN_EVENT_STOPPED_FAILED
            ):
                reason, type_ = "StartFailed", "Warning"
            elif (
                event == libvirt.VIR_DOMAIN_EVENT_STOPPED
                and detail == libvirt.VIR_DOMAIN_EVENT_STOPPED_CRASHED
            ):
                reason, type_ = "Crashed", "Warning"
            self.record_event(
                entry.rec, reason, f"domain {name}: {reason.lower()} (detail {detail})", type_, action
            )
            with entry.cond:
                entry.cond.notify_all()

    # -- create ------------------------------------------------------------------------------
    def create_machine(self, machine: machine_pb2.Machine) -> MachineView:
        """Validate everything, then make disks, define the domain and start it if powered on.

        Bad input raises before anything is made; a failure half-way removes what was made.
        """
        spec = machine.spec
        class_name = getattr(spec, "class")
        if not class_name:
            raise InvalidArgument("machine.spec.class: must not be empty")
        cls = self.classes.get(class_name)
        if cls is None:
            raise NotFound(
                f"machine.spec.class: machine class {class_name!r} not supported "
                f"(known: {', '.join(sorted(self.classes)) or 'none'})"
            )
        if spec.power not in (POWER_ON, POWER_OFF):
            raise InvalidArgument(f"machine.spec.power: unknown power state {spec.power}")
        check_string_map(machine.metadata.labels, "machine.metadata.labels")
        check_string_map(machine.metadata.annotations, "machine.metadata.annotations")
        if len(spec.ignition_data) > MAX_IGNITION_BYTES:
            raise InvalidArgument(f"machine.spec.ignition_data: larger than {MAX_IGNITION_BYTES} bytes")
        if machine.metadata.id:
            check_id(machine.metadata.id, "machine.metadata.id")
        machine_id = machine.metadata.id or uuid.uuid4().hex
        # Reserve the id so a concurrent create with the same client-chosen id cannot share its files.
        with self._lock:
            if machine_id in self._entries or machine_id in self._reserved:
                raise AlreadyExists(f"machine {machine_id!r} already exists")
            self._reserved.add(machine_id)
        try:
            return self._create(machine, machine_id, cls)
        finally:
            with self._lock:
                self._reserved.discard(machine_id)

    def _create(self, machine: machine_pb2.Machine, machine_id: str, cls: MachineClassSpec) -> MachineView:
        spec = machine.spec
        labels = dict(machine.metadata.labels)
        annotations = dict(machine.metadata.annotations)
        mdir = self.machine_dir(machine_id)
        rec = MachineRecord(
            id=machine_id,
            class_name=cls.name,
            labels=labels,
            annotations=annotations,
            power=int(spec.power),
            hostname=spec.guest_config.hostname,
            ignition=bool(spec.ignition_data),
            cpu=cls.cpu,
            memory_bytes=cls.memory,
            created_at=time.time_ns(),
            generation=1,
            owner=str(self.state_dir),
        )
        boot: Image | None = None
        images: dict[str, Image] = {}
        for i, vol in enumerate(spec.volumes):
            vrec, image = self._volume_record(vol, f"machine.spec.volumes[{i}]", rec, mdir)
            if image is not None and image.kind == "kernel":
                if boot is not None:
                    raise InvalidArgument(
                        f"machine.spec.volumes[{i}].local_disk.image: only one kernel image "
                        f"can boot a machine ({boot.name!r} already does)"
                    )
                boot = image
                rec.boot_image = image.name
            if image is not None and image.kind == "disk":
                images[vrec.name] = image
            rec.volumes.append(vrec)
        for i, nic in enumerate(spec.network_interfaces):
            rec.nics.append(self._nic_record(nic, f"machine.spec.network_interfaces[{i}]", rec))

        # Everything is valid: from here on a failure undoes what was made.
        t_start = time.monotonic()
        defined = False
        try:
            mdir.mkdir(parents=True, exist_ok=False)
            ignition_file = None
            if spec.ignition_data:
                ignition_file = mdir / "ignition.ign"
                ignition_file.write_bytes(spec.ignition_data)
            for vrec in rec.volumes:
                self._make_disk(vrec, images.get(vrec.name))
            xml = to_string(
                domain_element(rec, self.options, self.console_log(machine_id), boot, ignition_file)
            )
            t_define = time.monotonic()
            dom = self.conn.defineXML(xml)
            defined = True
            log.debug(
                "machine %s: disks in %.0f ms, defined in %.0f ms",
                machine_id,
                (t_define - t_start) * 1000,
                (time.monotonic() - t_define) * 1000,
            )
        except BaseException as exc:
            if defined:
                self._undefine_quietly(rec)
            shutil.rmtree(mdir, ignore_errors=True)
            if isinstance(exc, IriError):
                raise
            if isinstance(exc, libvirt.libvirtError):
                raise Internal(f"libvirt: defining the domain failed: {exc.get_error_message()}") from exc
            raise
        entry = _Entry(rec)
        with self._lock:
            self._entries[machine_id] = entry
        self.record_event(rec, "Created", f"machine defined as domain {rec.domain_name}", action="Create")
        if rec.power == POWER_ON:
            with entry.lock:
                self._start_domain(entry, dom)
        return self.get(machine_id)

    def _volume_record(
        self,
        vol: machine_pb2.Volume,
        field: str,
        rec: MachineRecord,
        mdir: Path,
    ) -> tuple[VolumeRecord, Image | None]:
        name = check_name(vol.name, f"{field}.name")
        if rec.volume(name) is not None:
            raise AlreadyExists(f"{field}.name: volume {name!r} already exists on the machine")
        used = {v.target for v in rec.volumes}
        if vol.device:
            target = device_target(vol.device, f"{field}.device")
            if target in used:
                raise InvalidArgument(f"{field}.device: device {vol.device!r} is already used")
            device = vol.device
        else:
            target = next((f"vd{c}" for c in "abcdefghijklmnopqrstuvwxyz" if f"vd{c}" not in used), "")
            if not target:
                raise InvalidArgument(f"{field}.device: no free device name left")
            device = "od" + target[2:]
        has_local, has_conn = vol.HasField("local_disk"), vol.HasField("connection")
        if has_local == has_conn:
            raise InvalidArgument(f"{field}: exactly one of local_disk and connection must be set")
        if has_local:
            size = check_size(vol.local_disk.size_bytes, f"{field}.local_disk.size_bytes")
            image: Image | None = None
            ref = vol.local_disk.image.image if vol.local_disk.HasField("image") else ""
            if ref:
                try:
                    image = self.catalog.resolve(ref)
                except InvalidImageName as exc:
                    raise InvalidArgument(f"{field}.local_disk.image.image: {exc}") from exc
                except ImageNotFound as exc:
                    raise NotFound(f"{field}.local_disk.image.image: {exc}") from exc
            digest = hashlib.sha256(name.encode()).hexdigest()[:16]
            path = (
                ""
                if image is not None and image.kind == "kernel" and size == 0
                else str(mdir / "disks" / f"{digest}.qcow2")
            )
            vrec = VolumeRecord(
                name=name,
                device=device,
                target=target,
                kind="local",
                size_bytes=size,
                image=image.name if image else "",
                handle=f"local:{rec.id}:{digest}",
                path=path,
                format="qcow2",
                owned=bool(path),
            )
            return vrec, image
        conn = vol.connection
        if conn.driver != LOCAL_DRIVER:
            raise InvalidArgument(
                f"{field}.connection.driver: unsupported driver {conn.driver!r} "
                f"(this runtime attaches {LOCAL_DRIVER!r} volumes)"
            )
        attrs = dict(conn.attributes)
        path = attrs.get("path", "")
        if not path or not Path(path).is_absolute():
            raise InvalidArgument(f"{field}.connection.attributes.path: an absolute file path is required")
        if not Path(path).is_file():
            raise NotFound(f"{field}.connection.attributes.path: volume file {path!r} does not exist")
        fmt = attrs.get("format", "qcow2")
        if fmt not in ("qcow2", "raw"):
            raise InvalidArgument(f"{field}.connection.attributes.format: {fmt!r} is not qcow2 or raw")
        size = check_size(conn.effective_storage_bytes, f"{field}.connection.effective_storage_bytes")
        for key in ("iops", "tps"):
            if key in attrs and not attrs[key].isdigit():
                raise InvalidArgument(f"{field}.connection.attributes.{key}: {attrs[key]!r} is not a number")
        return VolumeRecord(
            name=name,
            device=device,
            target=target,
            kind="connection",
            driver=conn.driver,
            handle=conn.handle,
            attributes=attrs,
            effective_storage_bytes=size,
            path=path,
            format=fmt,
            owned=False,
        ), None

    def _nic_record(self, nic: machine_pb2.NetworkInterface, field: str, rec: MachineRecord) -> NicRecord:
        name = check_name(nic.name, f"{field}.name")
        if rec.nic(name) is not None:
            raise AlreadyExists(f"{field}.name: network interface {name!r} already exists on the machine")
        if not is_user_network(nic.network_id) and not libvirt_util.network_exists(self.conn, nic.network_id):
            raise NotFound(f"{field}.network_id: libvirt network {nic.network_id!r} not found")
        return NicRecord(
            name=name,
            network_id=nic.network_id,
            ips=list(nic.ips),
            attributes=dict(nic.attributes),
            labels=dict(nic.labels),
        )

    def _make_disk(self, vrec: VolumeRecord, image: Image | None) -> None:
        if vrec.kind != "local" or not vrec.path:
            return
        if image is not None and image.kind == "disk" and image.path is not None:
            vrec.size_bytes = disks.create_overlay(Path(vrec.path), image.path, image.format, vrec.size_bytes)
        else:
            disks.create_empty(Path(vrec.path), vrec.size_bytes)
            vrec.size_bytes = vrec.size_bytes or disks.DEFAULT_EMPTY_DISK_BYTES

    def _start_domain(self, entry: _Entry, dom: libvirt.virDomain) -> None:
        try:
            if not dom.isActive():
                t = time.monotonic()
                dom.create()
                log.debug(
                    "machine %s: domain started in %.0f ms", entry.rec.id, (time.monotonic() - t) * 1000
                )
            entry.error = ""
        except libvirt.libvirtError as exc:
            entry.error = exc.get_error_message()
            self.record_event(
                entry.rec, "StartFailed", f"starting the domain failed: {entry.error}", "Warning", "Start"
            )
            log.warning("machine %s: start failed: %s", entry.rec.id, entry.error)

    def _undefine_quietly(self, rec: MachineRecord) -> None:
        try:
            dom = self.conn.lookupByName(rec.domain_name)
            if dom.isActive():
                dom.destroy()
            dom.undefineFlags(_UNDEFINE_FLAGS)
        except libvirt.libvirtError as exc:
            if not libvirt_util.is_no_domain(exc):
                log.warning("machine %s: undefine failed: %s", rec.id, exc)

    def _persist(self, entry: _Entry, dom: libvirt.virDomain) -> None:
        flags = libvirt.VIR_DOMAIN_AFFECT_CONFIG
        if dom.isActive():
            flags |= libvirt.VIR_DOMAIN_AFFECT_LIVE
        dom.setMetadata(
            libvirt.VIR_DOMAIN_METADATA_ELEMENT, metadata_xml(entry.rec), METADATA_KEY, METADATA_NS, flags
        )

    @staticmethod
    def _device_flags(dom: libvirt.virDomain) -> int:
        flags = libvirt.VIR_DOMAIN_AFFECT_CONFIG
        if dom.isActive():
            flags |= libvirt.VIR_DOMAIN_AFFECT_LIVE
        return flags

    # -- metadata and power ------------------------------------------------------------------
    def update_annotations(self, machine_id: str, annotations: Mapping[str, str]) -> None:
        values = check_string_map(annotations, "annotations")
        entry = self._live_entry(machine_id)
        with entry.lock:
            old = entry.rec.annotations
            entry.rec.annotations = values
            try:
                self._persist(entry, self._domain(entry.rec))
            except BaseException:
                entry.rec.annotations = old
                raise

    def update_power(self, machine_id: str, power: int) -> None:
        if power not in (POWER_ON, POWER_OFF):
            raise InvalidArgument(f"power: unknown power state {power}")
        entry = self._live_entry(machine_id)
        with entry.lock:
            if entry.rec.power != power:
                old = entry.rec.power
                entry.rec.power = power
                entry.rec.generation += 1
                try:
                    self._persist(entry, self._domain(entry.rec))
                except BaseException:
                    entry.rec.power = old
                    entry.rec.generation -= 1
                    raise
            entry.cond.notify_all()
        self._pool.submit(self._converge_power, machine_id)

    def _converge_power(self, machine_id: str) -> None:
        with self._lock:
            entry = self._entries.get(machine_id)
        if entry is None:
            return
        try:
            with entry.lock:
                if entry.rec.deleted_at:
                    return
                dom = self._domain(entry.rec)
                if entry.rec.power == POWER_ON:
                    self._start_domain(entry, dom)
                elif dom.isActive():
                    self._shutdown(entry, dom, lambda: entry.rec.power == POWER_OFF)
        except (IriError, libvirt.libvirtError) as exc:
            log.warning("machine %s: power change failed: %s", machine_id, exc)
            self.record_event(entry.rec, "PowerChangeFailed", str(exc), "Warning", "Power")

    def _shutdown(self, entry: _Entry, dom: libvirt.virDomain, still_wanted: Callable[[], bool]) -> bool:
        """ACPI power button, then destroy after the grace period. Holds entry.lock (waits release it)."""
        try:
            dom.shutdownFlags(libvirt.VIR_DOMAIN_SHUTDOWN_ACPI_POWER_BTN)
            self.record_event(
                entry.rec, "TriggerShutdownSucceeded", "ACPI power button pressed", action="Shutdown"
            )
        except libvirt.libvirtError as exc:
            if not dom.isActive():
                return True
            self.record_event(
                entry.rec, "TriggerShutdownFailed", exc.get_error_message(), "Warning", "Shutdown"
            )
        deadline = time.monotonic() + self.shutdown_timeout
        while dom.isActive():
            if not still_wanted():
                return False
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            # Lifecycle events wake us; the timeout bounds a missed one.
            entry.cond.wait(min(remaining, 0.5))
        if dom.isActive():
            try:
                dom.destroy()
                self.record_event(
                    entry.rec,
                    "DomainDestroySucceeded",
                    f"guest ignored ACPI shutdown for {self.shutdown_timeout:g}s; destroyed",
                    "Warning",
                    "Destroy",
                )
            except libvirt.libvirtError as exc:
                if dom.isActive():
                    raise
                log.debug("destroy raced with guest shutdown: %s", exc)
        return True

    # -- delete ------------------------------------------------------------------------------
    def delete_machine(self, machine_id: str) -> None:
        """Mark deleted (kept listed with deleted_at) and tear down in the background."""
        entry = self._entry(machine_id)
        with entry.lock:
            if not entry.rec.deleted_at:
                entry.rec.deleted_at = time.time_ns()
                try:
                    self._persist(entry, self._domain(entry.rec))
                except (IriError, libvirt.libvirtError) as exc:
                    log.warning("machine %s: persisting deletion failed: %s", machine_id, exc)
                self.record_event(entry.rec, "DeletionRequested", "machine is being deleted", action="Delete")
                entry.cond.notify_all()
        self._start_teardown(entry)

    def _start_teardown(self, entry: _Entry) -> None:
        with entry.lock:
            if entry.tearing_down:
                return
            entry.tearing_down = True
        self._pool.submit(self._teardown, entry)

    def _teardown(self, entry: _Entry) -> None:
        rec = entry.rec
        try:
            with entry.lock:
                try:
                    dom: libvirt.virDomain | None = self.conn.lookupByName(rec.domain_name)
                except libvirt.libvirtError as exc:
                    if not libvirt_util.is_no_domain(exc):
                        raise
                    dom = None
                if dom is not None:
                    if dom.isActive():
                        self._shutdown(entry, dom, lambda: True)
                    try:
                        dom.undefineFlags(_UNDEFINE_FLAGS)
                    except libvirt.libvirtError as exc:
                        if not libvirt_util.is_no_domain(exc):
                            raise
                for vol in rec.volumes:
                    if vol.owned and vol.path:
                        Path(vol.path).unlink(missing_ok=True)
                shutil.rmtree(self.machine_dir(rec.id), ignore_errors=True)
                with self._lock:
                    self._entries.pop(rec.id, None)
            self.record_event(
                rec, "MachineDeletionSucceeded", "domain undefined and disks removed", action="Delete"
            )
        except Exception as exc:
            log.exception("machine %s: teardown failed", rec.id)
            self.record_event(rec, "MachineDeletionFailed", str(exc), "Warning", "Delete")
            with entry.lock:
                entry.tearing_down = False  # the next DeleteMachine retries

    # -- volumes -----------------------------------------------------------------------------
    def attach_volume(self, machine_id: str, volume: machine_pb2.Volume) -> None:
        entry = self._live_entry(machine_id)
        with entry.lock:
            rec = entry.rec
            vrec, image = self._volume_record(volume, "volume", rec, self.machine_dir(rec.id))
            if image is not None and image.kind == "kernel":
                raise InvalidArgument(
                    f"volume.local_disk.image.image: kernel image {image.name!r} can only "
                    f"boot a machine at creation, not be attached"
                )
            dom = self._domain(rec)
            self._make_disk(vrec, image)
            try:
                if vrec.path:
                    dom.attachDeviceFlags(to_string(disk_element(vrec)), self._device_flags(dom))
            except libvirt.libvirtError as exc:
                if vrec.owned:
                    Path(vrec.path).unlink(missing_ok=True)
                self.record_event(
                    rec, "AttachDetachVolumeFailed", exc.get_error_message(), "Warning", "AttachVolume"
                )
                raise Internal(f"volume {vrec.name!r}: attaching failed: {exc.get_error_message()}") from exc
            rec.volumes.append(vrec)
            rec.generation += 1
            self._persist(entry, dom)
            self.record_event(
                rec,
                "AttachVolumeSucceeded",
                f"volume {vrec.name!r} attached as {vrec.target}",
                action="AttachVolume",
            )

    def detach_volume(self, machine_id: str, name: str) -> None:
        check_name(name, "name")
        entry = self._live_entry(machine_id)
        with entry.lock:
            rec = entry.rec
            vrec = rec.volume(name)
            if vrec is None:
                raise NotFound(f"volume {name!r} not found on machine {machine_id!r}")
            dom = self._domain(rec)
            if vrec.path:
                self._detach_device(dom, "disk", volume_alias(name))
            rec.volumes.remove(vrec)
            rec.generation += 1
            self._persist(entry, dom)
            if vrec.owned and vrec.path:
                Path(vrec.path).unlink(missing_ok=True)
            self.record_event(
                rec, "DetachVolumeSucceeded", f"volume {name!r} detached", action="DetachVolume"
            )

    def _detach_device(self, dom: libvirt.virDomain, tag: str, alias: str) -> None:
        for flags, xml_flags in (
            (libvirt.VIR_DOMAIN_AFFECT_LIVE, 0),
            (libvirt.VIR_DOMAIN_AFFECT_CONFIG, libvirt.VIR_DOMAIN_XML_INACTIVE),
        ):
            if flags == libvirt.VIR_DOMAIN_AFFECT_LIVE and not dom.isActive():
                continue
            dev = find_device(dom.XMLDesc(xml_flags), tag, alias)
            if dev is None:
                continue
            try:
                dom.detachDeviceFlags(to_string(dev), flags)
            except libvirt.libvirtError as exc:
                if flags == libvirt.VIR_DOMAIN_AFFECT_LIVE and not dom.isActive():
                    continue
                raise Internal(f"detaching {alias} failed: {exc.get_error_message()}") from exc

    def update_volume(self, machine_id: str, volume: machine_pb2.Volume) -> None:
        """Resize (grow only) and retune an attached volume; works on a running domain."""
        name = check_name(volume.name, "volume.name")
        entry = self._live_entry(machine_id)
        with entry.lock:
            rec = entry.rec
            vrec = rec.volume(name)
            if vrec is None:
                raise NotFound(f"volume {name!r} not found on machine {machine_id!r}")
            dom = self._domain(rec)
            if vrec.kind == "local":
                if not volume.HasField("local_disk"):
                    raise InvalidArgument("volume.local_disk: volume was a local disk; kind cannot change")
                new_size = check_size(volume.local_disk.size_bytes, "volume.local_disk.size_bytes")
                current = vrec.size_bytes
                field = "volume.local_disk.size_bytes"
            else:
                if not volume.HasField("connection"):
                    raise InvalidArgument("volume.connection: volume was a connection; kind cannot change")
                conn = volume.connection
                if conn.attributes.get("path", vrec.path) != vrec.path:
                    raise InvalidArgument("volume.connection.attributes.path: cannot change the volume file")
                new_size = check_size(
                    conn.effective_storage_bytes, "volume.connection.effective_storage_bytes"
                )
                current = vrec.effective_storage_bytes
                field = "volume.connection.effective_storage_bytes"
            if new_size and new_size < current:
                raise InvalidArgument(f"{field}: cannot shrink from {current} to {new_size} bytes")
            if new_size and vrec.path:
                self._grow(dom, vrec, new_size)
            if vrec.kind == "local":
                vrec.size_bytes = max(new_size, current)
            else:
                vrec.effective_storage_bytes = max(new_size, current)
                attrs = dict(volume.connection.attributes)
                if attrs.get("iops") != vrec.attributes.get("iops") or attrs.get(
                    "tps"
                ) != vrec.attributes.get("tps"):
                    self._retune(dom, vrec, attrs)
                vrec.attributes = attrs
            rec.generation += 1
            self._persist(entry, dom)
            self.record_event(rec, "UpdateVolumeSucceeded", f"volume {name!r} updated", action="UpdateVolume")

    def _grow(self, dom: libvirt.virDomain, vrec: VolumeRecord, size: int) -> None:
        try:
            if dom.isActive():
                capacity = int(dom.blockInfo(vrec.target)[0])
                if size > capacity:
                    dom.blockResize(vrec.target, size, libvirt.VIR_DOMAIN_BLOCK_RESIZE_BYTES)
                return
        except libvirt.libvirtError as exc:
            if dom.isActive():
                raise Internal(
                    f"volume {vrec.name!r}: online resize failed: {exc.get_error_message()}"
                ) from exc
        if disks.virtual_size(Path(vrec.path)) < size:
            disks.resize(Path(vrec.path), size)

    def _retune(self, dom: libvirt.virDomain, vrec: VolumeRecord, attrs: Mapping[str, str]) -> None:
        params: dict[str, int] = {}
        for key, param in (("iops", "total_iops_sec"), ("tps", "total_bytes_sec")):
            value = attrs.get(key, "0")
            if not value.isdigit():
                raise InvalidArgument(f"volume.connection.attributes.{key}: {value!r} is not a number")
            params[param] = int(value)
        try:
            dom.setBlockIoTune(vrec.target, params, self._device_flags(dom))
        except libvirt.libvirtError as exc:
            raise Internal(
                f"volume {vrec.name!r}: setting I/O limits failed: {exc.get_error_message()}"
            ) from exc

    # -- network interfaces ------------------------------------------------------------------
    def attach_nic(self, machine_id: str, nic: machine_pb2.NetworkInterface) -> None:
        entry = self._live_entry(machine_id)
        with entry.lock:
            rec = entry.rec
            nrec = self._nic_record(nic, "network_interface", rec)
            dom = self._domain(rec)
            try:
                dom.attachDeviceFlags(to_string(interface_element(nrec)), self._device_flags(dom))
            except libvirt.libvirtError as exc:
                self.record_event(
                    rec, "AttachDetachNICFailed", exc.get_error_message(), "Warning", "AttachNIC"
                )
                raise Internal(
                    f"network interface {nrec.name!r}: attaching failed: {exc.get_error_message()}"
                ) from exc
            rec.nics.append(nrec)
            rec.generation += 1
            self._persist(entry, dom)
            self.record_event(
                rec, "AttachNICSucceeded", f"network interface {nrec.name!r} attached", action="AttachNIC"
            )

    def detach_nic(self, machine_id: str, name: str) -> None:
        check_name(name, "name")
        entry = self._live_entry(machine_id)
        with entry.lock:
            rec = entry.rec
            nrec = rec.nic(name)
            if nrec is None:
                raise NotFound(f"network interface {name!r} not found on machine {machine_id!r}")
            dom = self._domain(rec)
            self._detach_device(dom, "interface", nic_alias(name))
            rec.nics.remove(nrec)
            rec.generation += 1
            self._persist(entry, dom)
            self.record_event(
                rec, "DetachNICSucceeded", f"network interface {name!r} detached", action="DetachNIC"
            )

    # -- helpers for tests and the console ---------------------------------------------------
    def domain_for(self, machine_id: str) -> libvirt.virDomain:
        """The libvirt domain of a live machine (NotFound / FailedPrecondition otherwise)."""
        return self._domain(self._live_entry(machine_id).rec)
