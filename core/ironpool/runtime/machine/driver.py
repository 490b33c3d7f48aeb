"""The machine runtime's driver: IRI machine semantics on a libvirt :class:`~.host.Host`.

Shaped after Nova's ``virt/libvirt/driver.py`` over ``host.py`` and ``guest.py``. Synchronous and
thread-safe; the gRPC layer calls it from worker threads. libvirt is the source of truth: each
machine is a persistent domain whose ``<metadata>`` holds its :class:`~.model.MachineRecord`, and
the index is rebuilt from libvirt in :meth:`MachineDriver.start`. Slow work (ACPI shutdown with
a grace period, teardown) runs on a small worker pool, never in an RPC.
"""

from __future__ import annotations

import logging
import os
import shutil
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import libvirt

from ironpool.iri import guest_data
from ironpool.iri.gen.machine.v1alpha1 import api_pb2 as machine_pb2
from ironpool.iri.labels import FENCED_ANNOTATION
from ironpool.runtime.errors import Internal, IriError, NotFound
from ironpool.runtime.events import EventRing
from ironpool.runtime.images import Credentials, Image, ImageResolver
from ironpool.runtime.metadata import check_string_map
from ironpool.runtime.qemu_access import check_reachable, make_dirs

from . import disks, firmware, records, seed, volume_secrets, writers
from .boot_admission import BootAdmission
from .capacity import CapacityPolicy
from .classes import MachineClassSpec
from .devices import MachineDevices
from .domain_events import MachineEvents
from .domain_xml import DomainOptions, domain_element, metadata_xml, parse_metadata, to_string
from .guest import Guest
from .host import Host
from .host_networks import HostNetworks
from .ignition import with_hostname
from .index import Entry, MachineIndex
from .model import DOMAIN_PREFIX, MachineRecord, NicRecord
from .nics import NetworkSettings
from .records import POWER_OFF, POWER_ON, ClassStatus, MachineView
from .reservations import ReservationBook
from .usernet import UserNics

log = logging.getLogger(__name__)


class MachineDriver:
    """IRI machine semantics on one libvirt host; device hot-plug is :attr:`devices`."""

    def __init__(
        self,
        host: Host,
        classes: Mapping[str, MachineClassSpec],
        images: ImageResolver,
        state_dir: str | Path,
        options: DomainOptions | None = None,
        shutdown_timeout: float = 10.0,
        events: EventRing | None = None,
        workers: int = 4,
        networks: NetworkSettings | None = None,
        capacity: CapacityPolicy | None = None,
        max_booting: int | None = None,
    ) -> None:
        self.host = host
        self.classes = dict(classes)
        self.images = images
        self.state_dir = Path(state_dir).absolute()
        self.options = options or DomainOptions()
        self.shutdown_timeout = shutdown_timeout
        self.events = events or EventRing(100, 300.0)
        self.index = MachineIndex()
        self.networks = networks or NetworkSettings()
        self.lookups = records.Lookups(
            self._resolve_image, os.path.isfile, host.network_exists, host.bridge_exists, self.networks
        )
        self.host_networks = HostNetworks(host.connection, self.state_dir)
        self.user_nics = UserNics(self.networks)
        self.capacity = capacity or CapacityPolicy()
        self.reservations = ReservationBook(
            self.state_dir, self.classes, lambda: [e.rec for e in self.index.entries()], self.total_capacity)
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="machine-worker")
        self.admission = BootAdmission(host.cpus if max_booting is None else max_booting,
                                       lambda mid: self._pool.submit(self._converge_power, mid),
                                       lambda mid, took, why: self.machine_events.booted(mid, took, why))
        self.machine_events = MachineEvents(self.index, self.events, self.admission)
        self.record_event = self.machine_events.record
        self.devices = MachineDevices(
            index=self.index, images=self.images, lookups=self.lookups, host_networks=self.host_networks,
            user_nics=self.user_nics, machine_dir=self.machine_dir, guest=self._guest, persist=self._persist,
            record_event=self.record_event, release_networks=self._release_networks,
        )

    # -- lifecycle of the runtime ------------------------------------------------------------
    def start(self) -> None:
        """Rebuild the index from libvirt, subscribe to lifecycle events, resume pending work."""
        make_dirs(self.state_dir / "machines")
        self.reservations.load()
        self.images.start()
        check_reachable(self.host.conn, self.options.domain_type, {
            "the machine runtime's disks and files": self.state_dir / "machines",
            **self.images.folders(),
        })
        self.host.subscribe(self.machine_events.on_lifecycle, self.machine_events.on_agent)
        running: dict[str, str] = {}  # machine id: domain, of the guests found running
        for guest in self.host.guests(DOMAIN_PREFIX):
            name = guest.name
            try:
                rec, active = parse_metadata(guest.metadata()), guest.is_active()
            except (libvirt.libvirtError, ValueError, TypeError, KeyError) as exc:
                log.warning("skipping domain %s: no usable ironpool metadata (%s)", name, exc)
                continue
            if rec.domain_name != name:
                log.warning("skipping domain %s: metadata names machine %s", name, rec.id)
                continue
            if rec.owner != str(self.state_dir):
                log.debug("skipping domain %s: managed by the runtime of %s", name, rec.owner)
                continue
            entry = Entry(rec)
            if not rec.deleted_at:
                entry.power_changed()  # not known applied until converged below
                if active:
                    running[rec.id] = name
            self.index.add(entry)
        log.info("loaded %d machines from libvirt", len(self.index))
        self.admission.adopt(running)
        for entry in sorted(self.index.entries(), key=lambda e: e.rec.created_at):
            if not entry.rec.deleted_at and entry.rec.power == POWER_ON and entry.rec.id not in running:
                # Their places in the queue in the order they were created, before the pool's threads race.
                self.admission.admit(entry.rec.id, entry.rec.domain_name)
        for entry in self.index.entries():
            if entry.rec.deleted_at:
                self._start_teardown(entry)
            else:
                for nic in entry.rec.nics:
                    try:
                        self.host_networks.restore(nic)
                    except IriError as exc:
                        log.warning("machine %s: NIC %r: %s", entry.rec.id, nic.name, exc.message)
                self._pool.submit(self._converge_power, entry.rec.id)

    def close(self) -> None:
        self.admission.close()
        self.host.close()
        self.images.close()
        self._pool.shutdown(wait=False, cancel_futures=True)

    def machine_dir(self, machine_id: str) -> Path:
        return self.state_dir / "machines" / machine_id

    def console_log(self, machine_id: str) -> Path:
        return self.machine_dir(machine_id) / "console.log"

    # -- reads -------------------------------------------------------------------------------
    def list_machines(
        self, machine_id: str = "", label_selector: Mapping[str, str] | None = None
    ) -> list[MachineView]:
        """Machines by id (0 or 1; ids never issued give none) and exact label match."""
        entries = self.index.select(machine_id, label_selector)
        if not entries:
            return []
        states = self.host.states([e.rec.domain_name for e in entries])
        return [self._view(e, states.get(e.rec.domain_name)) for e in entries]

    def get(self, machine_id: str) -> MachineView:
        entry = self.index.get(machine_id)
        return self._view(entry, self.host.states([entry.rec.domain_name]).get(entry.rec.domain_name))

    @staticmethod
    def _view(entry: Entry, state: tuple[int, int] | None) -> MachineView:
        rec = entry.rec
        iri_state = records.machine_state(rec, state, entry.error, entry.tearing_down)
        return MachineView(rec, iri_state, entry.error, entry.observed_generation)

    def total_capacity(self) -> tuple[int, int]:
        """Cores and bytes this runtime hands out (see :mod:`.capacity`)."""
        return self.capacity.total(self.host.cpus, self.host.memory_bytes)

    def status(self) -> list[ClassStatus]:
        """Per class, how many more fit: by what this runtime has not handed out (less what accepted
        reservations hold unused) and, for figures taken from the host rather than given outright,
        by what the host's running domains leave."""
        booked_cpu, booked_memory = self.reservations.free()
        total_cpu, total_memory = self.total_capacity()
        host_cpu, host_memory = self.host.free_resources()
        held_cpu, held_memory = self.reservations.unused_holds()
        if self.capacity.cpu is None:
            booked_cpu = min(booked_cpu, total_cpu - (self.host.cpus - host_cpu) - held_cpu)
        if self.capacity.memory is None:
            live = total_memory - (self.host.memory_bytes - host_memory) - held_memory
            booked_memory = min(booked_memory, live)
        return records.class_statuses(self.classes, booked_cpu, booked_memory)

    def guest(self, machine_id: str) -> Guest:
        """The libvirt domain of a live machine (NotFound / FailedPrecondition otherwise)."""
        return self._guest(self.index.get_live(machine_id).rec)

    def _guest(self, rec: MachineRecord) -> Guest:
        guest = self.host.lookup(rec.domain_name)
        if guest is None:
            raise NotFound(f"machine {rec.id!r}: its libvirt domain {rec.domain_name} is gone")
        return guest

    # -- images ------------------------------------------------------------------------------
    def _resolve_image(self, ref: str, creds: Credentials | None, rec: MachineRecord) -> Image:
        """The image for a machine being made; its pull's progress becomes events about it."""
        key = ",".join(f"{k}={v}" for k, v in sorted(rec.labels.items())) or rec.id

        def emit(reason: str, message: str) -> None:
            self.record_event(rec, reason, message, action="PullImage")

        return self.images.resolve(ref, creds, (key, emit))

    # -- create ------------------------------------------------------------------------------
    def create_machine(self, machine: machine_pb2.Machine) -> MachineView:
        """Check everything, then make disks, define the domain and start it if powered on.

        Bad input raises before anything is made; a failure half-way removes what was made.
        """
        cls = records.check_machine(machine, self.classes)
        machine_id = records.new_machine_id(machine)
        with self.index.reserve(machine_id):
            mdir = self.machine_dir(machine_id)
            plan = records.plan_machine(
                machine, machine_id, cls, mdir / "disks", self.lookups, str(self.state_dir), time.time_ns()
            )
            images = [i for i in (plan.boot, *plan.images.values()) if i is not None]
            plan.rec.nvram, efi_vars = firmware.plan_nvram(
                images, plan.rec.annotations, self.options.ovmf, mdir / firmware.NVRAM_FILE, "machine")
            guest = self._define(plan, machine.spec.ignition_data, mdir, efi_vars)
            entry = Entry(plan.rec)
            entry.power_generation = plan.rec.generation
            self.index.add(entry)
        rec = plan.rec
        self.record_event(rec, "Created", f"machine defined as domain {rec.domain_name}", action="Create")
        if rec.power == POWER_ON:
            with entry.lock:
                self._start_domain(entry, guest)
        return self.get(machine_id)

    def _define(
        self, plan: records.MachinePlan, ignition: bytes, mdir: Path, efi_vars: list[firmware.NvramVariable]
    ) -> Guest:
        """Disks, Ignition file, NVRAM and domain definition; on any failure none of them is left."""
        rec = plan.rec
        t_start = time.monotonic()
        guest: Guest | None = None
        reserved: list[NicRecord] = []
        try:
            for i, nic in enumerate(rec.nics):
                self.host_networks.reserve(nic, f"machine.spec.network_interfaces[{i}]")
                reserved.append(nic)
            mdir.mkdir(mode=0o711)
            os.chmod(mdir, 0o711)  # QEMU's user passes through to its disks; nobody lists it
            if rec.nvram:
                firmware.write_nvram(self.options.ovmf, Path(rec.nvram), efi_vars)
            ignition_file = None
            if ignition and guest_data.is_cloud_init(ignition):
                rec.seed = str(seed.make_seed(mdir, rec, ignition))
            elif ignition:
                # It may hold keys and passwords: only its owner reads it (libvirt hands it to QEMU's
                # user while the domain runs).
                ignition_file = mdir / "ignition.ign"
                with open(os.open(ignition_file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "wb") as f:
                    f.write(with_hostname(ignition, rec.hostname))
            user = f"machine {rec.id}"
            self.images.hold(plan.boot, mdir, user)  # the kernel and initramfs it boots
            for vrec in rec.volumes:
                image = plan.images.get(vrec.name)
                with self.images.lease(image, vrec.path, user):
                    disks.make_local(vrec, image)
            volume_secrets.define_all(self.host.conn, rec, plan.keys)
            xml = to_string(
                domain_element(rec, self.options, self.console_log(rec.id), plan.boot, ignition_file)
            )
            t_define = time.monotonic()
            guest = self.host.define(xml)
            log.debug(
                "machine %s: disks in %.0f ms, defined in %.0f ms",
                rec.id, (t_define - t_start) * 1000, (time.monotonic() - t_define) * 1000,
            )  # fmt: skip
            return guest
        except BaseException as exc:
            if guest is not None:
                try:
                    guest.undefine()
                except libvirt.libvirtError as undefine_exc:
                    log.warning("domain %s: undefine failed: %s", guest.name, undefine_exc)
            self._release_networks(reserved)
            volume_secrets.remove_all(self.host.conn, rec)
            shutil.rmtree(mdir, ignore_errors=True)
            self.images.release(mdir, *(v.path for v in rec.volumes if v.owned and v.path))
            if isinstance(exc, libvirt.libvirtError):
                raise Internal(f"libvirt: defining the domain failed: {exc.get_error_message()}") from exc
            raise

    def _release_networks(self, nics: list[NicRecord]) -> None:
        """Give back the host networks and reservations of NICs no domain has any more."""
        for nic in nics:
            try:
                self.host_networks.release(nic)
            except (IriError, libvirt.libvirtError) as exc:
                log.warning("network interface %r: releasing its network failed: %s", nic.name, exc)

    def _start_domain(self, entry: Entry, guest: Guest) -> None:
        """Boot the domain with its user-mode NICs when it has a boot slot (else it waits for one,
        :mod:`.boot_admission`); for a running one, add the NICs it lacks."""
        users, rec = [n for n in entry.rec.nics if n.mode == "user"], entry.rec
        try:
            t = time.monotonic()
            if guest.is_active():
                if users:
                    self._plug_user_nics(entry, guest, users)
                    guest.resume_if_paused()  # a start interrupted by a restart of the runtime
            elif (queued := self.admission.admit(rec.id, rec.domain_name)) is not None:
                entry.error = (f"waiting to boot: the host boots at most {self.admission.limit} at once "
                               "(its runtime's --max-booting)")
                if queued.new:
                    self.record_event(rec, "BootQueued", f"{entry.error}; {queued.ahead} ahead of this one",
                                      action="Start")
                return
            else:
                entry.pause_events = 2 if users else 0
                writers.start_alone(self.host.conn, rec, lambda: guest.start(
                    (lambda: self._plug_user_nics(entry, guest, users)) if users else None,
                    self.options.vcpu_slice_ns))
                self.admission.started(rec.id)
                log.debug("machine %s: domain started in %.0f ms", rec.id, (time.monotonic() - t) * 1000)
            entry.error = ""
        except (libvirt.libvirtError, IriError) as exc:
            self.admission.release(rec.id)
            entry.error = exc.get_error_message() if isinstance(exc, libvirt.libvirtError) else exc.message
            self.record_event(
                entry.rec, "StartFailed", f"starting the domain failed: {entry.error}", "Warning", "Start"
            )
            log.warning("machine %s: start failed: %s", entry.rec.id, entry.error)

    def _plug_user_nics(self, entry: Entry, guest: Guest, nics: list[NicRecord]) -> None:
        """Add the user-mode NICs the running QEMU lacks and record their forwards."""
        present = self.user_nics.present(guest)
        changed = False
        for nic in nics:
            forward = self.user_nics.plug(guest, nic, present)
            if forward != nic.forward:
                nic.forward, changed = forward, True
        if changed:
            self._persist(entry, guest, bump=False)

    @staticmethod
    def _persist(entry: Entry, guest: Guest, bump: bool = True) -> None:
        """Store the record in the domain after a change (a new generation unless ``bump`` is
        False: metadata is no spec). Call with ``entry.lock`` held."""
        if bump:
            entry.rec.generation += 1
        guest.set_metadata(metadata_xml(entry.rec))

    # -- metadata and power ------------------------------------------------------------------
    def update_annotations(self, machine_id: str, annotations: Mapping[str, str]) -> None:
        values = check_string_map(annotations, "annotations")
        entry = self.index.get_live(machine_id)
        with entry.lock:
            guest, old = self._guest(entry.rec), entry.rec.annotations
            entry.rec.annotations = values
            try:
                self._persist(entry, guest, bump=False)
            except BaseException:
                entry.rec.annotations = old
                raise

    def update_power(self, machine_id: str, power: int) -> None:
        records.check_power(power, "power")
        entry = self.index.get_live(machine_id)
        with entry.lock:
            if entry.rec.power != power:
                guest, old = self._guest(entry.rec), entry.rec.power
                entry.rec.power = power
                try:
                    self._persist(entry, guest)
                except BaseException:
                    entry.rec.power = old
                    entry.rec.generation -= 1
                    raise
                entry.power_changed()
            entry.cond.notify_all()
        self._pool.submit(self._converge_power, machine_id)

    def _converge_power(self, machine_id: str) -> None:
        entry = self.index.find(machine_id)
        if entry is None:
            return
        with entry.lock:
            generation = entry.power_generation
            try:
                if entry.rec.deleted_at:
                    return
                guest = self._guest(entry.rec)
                if entry.rec.power == POWER_ON:
                    self._start_domain(entry, guest)
                    return
                self.admission.release(machine_id)  # powered off while waiting to boot
                if guest.is_active() and FENCED_ANNOTATION in entry.rec.annotations:
                    guest.destroy()  # a fence stops now: no grace period for the guest's own shutdown
                    self.record_event(entry.rec, "Fenced", "destroyed, disks kept", "Warning", "Shutdown")
                elif guest.is_active():
                    self._shutdown(entry, guest, lambda: entry.rec.power == POWER_OFF)
            except (IriError, libvirt.libvirtError) as exc:
                log.warning("machine %s: power change failed: %s", machine_id, exc)
                self.record_event(entry.rec, "PowerChangeFailed", str(exc), "Warning", "Power")
            finally:
                # A newer power change (made while _shutdown waited) is still converging.
                if entry.power_generation == generation:
                    entry.power_pending = 0

    def _shutdown(self, entry: Entry, guest: Guest, still_wanted: Callable[[], bool]) -> bool:
        """ACPI power button, then destroy after the grace period. Holds entry.lock (waits release it)."""
        try:
            guest.press_power_button()
            self.record_event(
                entry.rec, "TriggerShutdownSucceeded", "ACPI power button pressed", action="Shutdown"
            )
        except libvirt.libvirtError as exc:
            if not guest.is_active():
                return True
            self.record_event(
                entry.rec, "TriggerShutdownFailed", exc.get_error_message(), "Warning", "Shutdown"
            )
        deadline = time.monotonic() + self.shutdown_timeout
        while guest.is_active():
            if not still_wanted():
                return False
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                break
            # Lifecycle events wake us; the timeout bounds a missed one.
            entry.cond.wait(min(remaining, 0.5))
        if guest.is_active() and guest.destroy():
            message = f"guest ignored ACPI shutdown for {self.shutdown_timeout:g}s; destroyed"
            self.record_event(entry.rec, "DomainDestroySucceeded", message, "Warning", "Destroy")
        return True

    # -- delete ------------------------------------------------------------------------------
    def delete_machine(self, machine_id: str) -> None:
        """Mark deleted (kept listed with deleted_at) and tear down in the background."""
        entry = self.index.get(machine_id)
        with entry.lock:
            if not entry.rec.deleted_at:
                entry.rec.deleted_at = time.time_ns()
                try:
                    self._persist(entry, self._guest(entry.rec), bump=False)
                except (IriError, libvirt.libvirtError) as exc:
                    log.warning("machine %s: persisting deletion failed: %s", machine_id, exc)
                self.record_event(entry.rec, "DeletionRequested", "machine is being deleted", action="Delete")
                entry.cond.notify_all()
        self._start_teardown(entry)

    def _start_teardown(self, entry: Entry) -> None:
        with entry.lock:
            if entry.tearing_down:
                return
            entry.tearing_down = True
        self._pool.submit(self._teardown, entry)

    def _teardown(self, entry: Entry) -> None:
        rec = entry.rec
        try:
            with entry.lock:
                guest = self.host.lookup(rec.domain_name)
                if guest is not None:
                    if guest.is_active():
                        self._shutdown(entry, guest, lambda: True)
                    guest.undefine()
                volume_secrets.remove_all(self.host.conn, rec)
                self._release_networks(rec.nics)
                for vol in rec.volumes:
                    if vol.owned and vol.path:
                        Path(vol.path).unlink(missing_ok=True)
                shutil.rmtree(self.machine_dir(rec.id), ignore_errors=True)
                self.index.remove(rec.id)
            self.admission.release(rec.id)
            self.images.release(
                self.machine_dir(rec.id), *(v.path for v in rec.volumes if v.owned and v.path)
            )
            self.record_event(
                rec, "MachineDeletionSucceeded", "domain undefined and disks removed", action="Delete"
            )
        except Exception as exc:
            log.exception("machine %s: teardown failed", rec.id)
            self.record_event(rec, "MachineDeletionFailed", str(exc), "Warning", "Delete")
            with entry.lock:
                entry.tearing_down = False  # the next DeleteMachine retries
