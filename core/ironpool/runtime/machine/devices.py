"""Hot-plug of a machine's devices: volumes attached, resized and detached, network interfaces
plugged and unplugged, on a running domain as on a stopped one.

:class:`MachineDevices` is a part of :class:`~.driver.MachineDriver` (``driver.devices``), which
hands it the index and host networks they share and its own steps for finding a machine's domain,
storing its record and reporting an event, so that a device change and a lifecycle change alter a
machine the same way.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, TypeVar

import libvirt

from ironpool.iri.gen.machine.v1alpha1 import api_pb2 as machine_pb2
from ironpool.runtime.errors import FailedPrecondition, Internal, NotFound, Unavailable
from ironpool.runtime.images import ImageResolver

from . import disks, records, volume_secrets, writers
from .domain_xml import disk_element, interface_element, nic_alias, to_string, volume_alias
from .guest import Guest
from .host_networks import HostNetworks
from .index import Entry, MachineIndex
from .model import MachineRecord, NicRecord
from .usernet import UserNics

T = TypeVar("T")


class RecordEvent(Protocol):
    """The driver's way of reporting a machine's event (IRI ``ListEvents``)."""

    def __call__(self, rec: MachineRecord, reason: str, message: str, type_: str = "Normal",
                 action: str = "") -> None: ...


@dataclass
class MachineDevices:
    """IRI's AttachVolume/DetachVolume/UpdateVolume and AttachNetworkInterface/Detach... on the
    driver's index and host."""

    index: MachineIndex
    images: ImageResolver
    lookups: records.Lookups
    host_networks: HostNetworks
    user_nics: UserNics
    machine_dir: Callable[[str], Path]
    guest: Callable[[MachineRecord], Guest]  # a live machine's domain (NotFound when it is gone)
    persist: Callable[[Entry, Guest], None]  # the record into the domain, as a new generation
    record_event: RecordEvent
    release_networks: Callable[[list[NicRecord]], None]

    # -- volumes -----------------------------------------------------------------------------
    def attach_volume(self, machine_id: str, volume: machine_pb2.Volume) -> None:
        entry = self.index.get_live(machine_id)
        with entry.lock:
            rec = entry.rec
            vrec, image = records.volume_record(
                volume, "volume", rec, self.machine_dir(rec.id) / "disks", self.lookups
            )
            records.attachable(vrec, image)
            key = volume_secrets.volume_key(volume, vrec, "volume")
            guest = self.guest(rec)
            with self.images.lease(image, vrec.path, f"machine {rec.id}"):
                disks.make_local(vrec, image)
            try:
                if key:
                    volume_secrets.define(guest.dom.connect(), rec.id, vrec, key)
                if vrec.path:
                    xml, what = to_string(disk_element(vrec)), f"volume {vrec.name!r}"
                    with writers.START_LOCK:  # no other running domain of this host may write it
                        if vrec.kind == "connection" and guest.is_active():
                            writers.refuse_second_writer(guest.dom.connect(), [vrec.path], rec.domain_name,
                                                         "volume.connection")
                        self._attach(entry, guest, xml, what, "AttachDetachVolumeFailed", "AttachVolume")
            except (Internal, FailedPrecondition):
                volume_secrets.remove(guest.dom.connect(), vrec)
                if vrec.owned:
                    Path(vrec.path).unlink(missing_ok=True)
                    self.images.release(vrec.path)
                raise
            rec.volumes.append(vrec)
            self.persist(entry, guest)
            message = f"volume {vrec.name!r} attached as {vrec.target}"
            self.record_event(rec, "AttachVolumeSucceeded", message, action="AttachVolume")

    def _attach(self, entry: Entry, guest: Guest, xml: str, what: str, failed: str, action: str) -> None:
        """Attach a device; a refusal is a Warning event (reason ``failed``) and Internal."""
        try:
            guest.attach_device(xml)
        except libvirt.libvirtError as exc:
            message = exc.get_error_message()
            self.record_event(entry.rec, failed, message, "Warning", action)
            raise Internal(f"{what}: attaching failed: {message}") from exc

    def _detach(self, entry: Entry, unplug: Callable[[], None], action: str) -> None:
        """Run ``unplug``; a guest still holding the device is a Warning event (the caller retries)."""
        try:
            unplug()
        except Unavailable as exc:
            self.record_event(entry.rec, exc.reason, exc.message, "Warning", action)
            raise

    def detach_volume(self, machine_id: str, name: str) -> None:
        entry = self.index.get_live(machine_id)
        with entry.lock:
            vrec = self._attached(entry, name, entry.rec.volume(name), "volume")
            guest = self.guest(entry.rec)
            if vrec.path:
                self._detach(entry, lambda: guest.detach_device("disk", volume_alias(name)), "DetachVolume")
            volume_secrets.remove(guest.dom.connect(), vrec)  # only while attached
            entry.rec.volumes.remove(vrec)
            self.persist(entry, guest)
            if vrec.owned and vrec.path:
                Path(vrec.path).unlink(missing_ok=True)
                self.images.release(vrec.path)
            self.record_event(
                entry.rec, "DetachVolumeSucceeded", f"volume {name!r} detached", action="DetachVolume"
            )

    @staticmethod
    def _attached(entry: Entry, name: str, found: T | None, what: str, field: str = "name") -> T:
        """What ``name`` names on the machine; NotFound (InvalidArgument when empty) otherwise."""
        if not name:
            records.check_name(name, field)
        if found is None:
            raise NotFound(f"{what} {name[:80]!r} not found on machine {entry.rec.id!r}")
        return found

    def update_volume(self, machine_id: str, volume: machine_pb2.Volume) -> None:
        """Resize (grow only) and retune an attached volume; works on a running domain."""
        entry = self.index.get_live(machine_id)
        with entry.lock:
            name = volume.name
            vrec = self._attached(entry, name, entry.rec.volume(name), "volume", "volume.name")
            update = records.volume_update(vrec, volume)
            guest = self.guest(entry.rec)
            if update.size and vrec.path:
                what = f"volume {name!r}"
                if not guest.grow_disk_live(vrec.target, update.size, what):
                    disks.grow(Path(vrec.path), update.size)
            if update.retune and update.attributes is not None:
                params = records.io_tune(update.attributes, "volume.connection.attributes")
                guest.set_io_tune(vrec.target, params, f"volume {name!r}")
            update.apply(vrec)
            self.persist(entry, guest)
            self.record_event(
                entry.rec, "UpdateVolumeSucceeded", f"volume {name!r} updated", action="UpdateVolume"
            )

    # -- network interfaces ------------------------------------------------------------------
    def attach_nic(self, machine_id: str, nic: machine_pb2.NetworkInterface) -> None:
        entry = self.index.get_live(machine_id)
        with entry.lock:
            rec = entry.rec
            nrec = records.nic_record(nic, "network_interface", rec, self.lookups)
            guest = self.guest(rec)
            self.host_networks.reserve(nrec, "network_interface")
            try:
                self._plug_nic(entry, guest, nrec)
            except BaseException:
                self.release_networks([nrec])
                raise
            rec.nics.append(nrec)
            self.persist(entry, guest)
            message = f"network interface {nrec.name!r} attached"
            self.record_event(rec, "AttachNICSucceeded", message, action="AttachNIC")

    def _plug_nic(self, entry: Entry, guest: Guest, nrec: NicRecord) -> None:
        """Put a new NIC into the domain: a user-mode one into the running QEMU (a stopped domain
        gets it when it starts), any other into the definition and the running guest."""
        what = f"network interface {nrec.name!r}"
        if nrec.mode == "user":
            if guest.is_active():
                try:
                    nrec.forward = self.user_nics.plug(guest, nrec)
                except Internal as exc:
                    self.record_event(entry.rec, "AttachDetachNICFailed", exc.message, "Warning", "AttachNIC")
                    raise
            return
        iface = interface_element(nrec)
        assert iface is not None
        self._attach(entry, guest, to_string(iface), what, "AttachDetachNICFailed", "AttachNIC")

    def detach_nic(self, machine_id: str, name: str) -> None:
        entry = self.index.get_live(machine_id)
        with entry.lock:
            nrec = self._attached(entry, name, entry.rec.nic(name), "network interface")
            guest = self.guest(entry.rec)
            if nrec.mode == "user":
                if guest.is_active():
                    self._detach(entry, lambda: self.user_nics.unplug(guest, nrec), "DetachNIC")
            else:
                self._detach(entry, lambda: guest.detach_device("interface", nic_alias(name)), "DetachNIC")
            entry.rec.nics.remove(nrec)
            self.persist(entry, guest)
            self.release_networks([nrec])
            message = f"network interface {name!r} detached"
            self.record_event(entry.rec, "DetachNICSucceeded", message, action="DetachNIC")
