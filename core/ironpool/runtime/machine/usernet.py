"""User-mode NICs (QEMU's slirp), plugged into a running QEMU through its monitor.

libvirt's ``<interface type='user'>`` sets the user network's subnet but not where its DHCP starts,
so a guest would get QEMU's ``.15`` instead of the address the control plane allocated. Here every
user-mode NIC is its own QEMU user network (``netdev_add``: subnet, gateway, DHCP start = the NIC's
address, SSH forwarded from the host) with a virtio NIC on it (``device_add``). At boot the domain
is started paused and its NICs are added before the guest runs, so the guest finds them like any
other device; later they are hot-plugged and unplugged. libvirt does not see these devices: the
machine record lists them, the runtime adds them on every start of the domain, and again for a
running domain that lacks one (after a restart of the runtime).

The forward keeps its port while the domain lives (QEMU holds the socket, whatever happens to the
runtime) and asks for the same port again when the domain starts anew.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Iterator

import libvirt

from ironpool.ports import free_port, port_free
from ironpool.runtime.errors import Internal, Unavailable

from .guest import Guest
from .model import NicRecord
from .nics import NetworkSettings, qemu_ids, user_netdev

log = logging.getLogger(__name__)

_FIRST_SLOT, _LAST_SLOT = 3, 31  # PCI slots on bus 0 of machine type pc; taken from the top down
_PORT_ATTEMPTS = 5


class UserNics:
    """Adds and removes user-mode NICs of running domains (see the module docstring)."""

    def __init__(self, settings: NetworkSettings, unplug_timeout: float = 10.0) -> None:
        self.settings = settings
        self.unplug_timeout = unplug_timeout

    def present(self, guest: Guest) -> set[str]:
        """The ids of the devices QEMU has that were added by name (ours among them)."""
        return {str(p["name"]) for p in guest.qmp("qom-list", path="/machine/peripheral") or []}

    def plug(self, guest: Guest, nic: NicRecord, present: set[str] | None = None) -> str:
        """Add ``nic`` to the running domain unless it has it; returns the forward (``host:port``)."""
        netdev_id, device_id = qemu_ids(nic.name)
        if device_id in (self.present(guest) if present is None else present):
            if nic.forward:
                return nic.forward
            self.unplug(guest, nic)  # plugged, but its forward never recorded: start over
        with contextlib.suppress(libvirt.libvirtError):
            guest.qmp("netdev_del", id=netdev_id)  # half-made by an earlier attempt
        forward = self._add_netdev(guest, nic, netdev_id)
        try:
            guest.qmp("device_add", driver="virtio-net-pci", netdev=netdev_id, id=device_id, mac=nic.mac,
                      bus="pci.0", addr=hex(self._free_slot(guest)))
        except (libvirt.libvirtError, Internal) as exc:
            with contextlib.suppress(libvirt.libvirtError):
                guest.qmp("netdev_del", id=netdev_id)
            message = exc.get_error_message() if isinstance(exc, libvirt.libvirtError) else str(exc)
            raise Internal(f"network interface {nic.name!r}: adding the device failed: {message}") from exc
        log.debug("domain %s: user-mode NIC %r plugged, SSH forwarded from %s", guest.name, nic.name, forward)
        return forward

    def _ports(self, nic: NicRecord) -> Iterator[int]:
        host = self.settings.forward_address
        if nic.forward:
            port = int(nic.forward.rpartition(":")[2])
            if port_free(host, port):
                yield port
        for _ in range(_PORT_ATTEMPTS):
            yield free_port(host)

    def _add_netdev(self, guest: Guest, nic: NicRecord, netdev_id: str) -> str:
        host = self.settings.forward_address
        last = ""
        for port in self._ports(nic):
            forward = f"{host}:{port}"
            try:
                guest.qmp("netdev_add", **user_netdev(nic, netdev_id, forward, self.settings.guest_ssh_port))
                return forward
            except libvirt.libvirtError as exc:
                last = exc.get_error_message()
                if "forward" not in last:
                    break  # not a port taken meanwhile: trying other ports will not help
        raise Internal(f"network interface {nic.name!r}: adding the user network failed: {last}")

    @staticmethod
    def _free_slot(guest: Guest) -> int:
        used: set[int] = set()
        for bus in guest.qmp("query-pci") or []:
            if bus.get("bus") == 0:
                used.update(int(d["slot"]) for d in bus.get("devices", []))
        for slot in range(_LAST_SLOT, _FIRST_SLOT - 1, -1):
            if slot not in used:
                return slot
        raise Internal("no free PCI slot left for another network interface")

    def unplug(self, guest: Guest, nic: NicRecord) -> None:
        """Remove ``nic`` from the running domain: the guest lets go of the device (ACPI hot-unplug),
        then its user network goes. A guest that has not let go within ``unplug_timeout`` leaves
        both in place and raises :class:`Unavailable`, so the caller keeps the NIC and retries."""
        netdev_id, device_id = qemu_ids(nic.name)
        try:
            if device_id in self.present(guest):
                refused = ""
                try:
                    guest.qmp("device_del", id=device_id)
                except libvirt.libvirtError as exc:
                    # An unplug already under way is refused again; the wait below tells them apart.
                    refused = f" (QEMU: {exc.get_error_message()})"
                deadline = time.monotonic() + self.unplug_timeout
                while device_id in self.present(guest):
                    if time.monotonic() > deadline:
                        raise Unavailable(f"network interface {nic.name!r}: the guest has not released the "
                                          f"device within {self.unplug_timeout:.0f}s{refused}; the detach is "
                                          "retried", reason="DetachPending")
                    time.sleep(0.1)
        except libvirt.libvirtError as exc:
            if guest.is_active():
                raise Internal(f"network interface {nic.name!r}: removing it failed: "
                               f"{exc.get_error_message()}") from exc
            return
        with contextlib.suppress(libvirt.libvirtError):  # none left when the device never came
            guest.qmp("netdev_del", id=netdev_id)
