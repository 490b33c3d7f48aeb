"""One libvirt domain and the operations the machine runtime performs on it.

Shaped after Nova's ``virt/libvirt/guest.py``. Every machine is a persistent domain, so a change
goes to its definition (``AFFECT_CONFIG``) and, while QEMU runs, to the running guest as well
(``AFFECT_LIVE``); :meth:`Guest.affect` is the one place that decides.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable
from typing import Any

import libvirt
import libvirt_qemu

from ironpool.runtime import libvirt_util
from ironpool.runtime.errors import Internal, Unavailable

from . import vcpu_slice
from .domain_xml import find_device, to_string
from .model import METADATA_KEY, METADATA_NS

UNDEFINE_FLAGS = (
    libvirt.VIR_DOMAIN_UNDEFINE_MANAGED_SAVE
    | libvirt.VIR_DOMAIN_UNDEFINE_SNAPSHOTS_METADATA
    | libvirt.VIR_DOMAIN_UNDEFINE_NVRAM
    | libvirt.VIR_DOMAIN_UNDEFINE_CHECKPOINTS_METADATA
)


class Guest:
    """A libvirt domain; methods raise ``libvirt.libvirtError`` unless they say otherwise."""

    def __init__(self, dom: libvirt.virDomain) -> None:
        self.dom = dom

    @property
    def name(self) -> str:
        return str(self.dom.name())

    def is_active(self) -> bool:
        return bool(self.dom.isActive())

    def state(self) -> tuple[int, int]:
        state, reason = self.dom.state()
        return int(state), int(reason)

    def affect(self) -> int:
        """Flags for a change: the persistent definition, and the running guest if there is one."""
        flags = libvirt.VIR_DOMAIN_AFFECT_CONFIG
        if self.is_active():
            flags |= libvirt.VIR_DOMAIN_AFFECT_LIVE
        return flags

    # -- metadata ------------------------------------------------------------------------------
    def metadata(self) -> str:
        """The runtime's metadata element as stored in the definition."""
        return str(
            self.dom.metadata(
                libvirt.VIR_DOMAIN_METADATA_ELEMENT, METADATA_NS, libvirt.VIR_DOMAIN_AFFECT_CONFIG
            )
        )

    def set_metadata(self, xml: str) -> None:
        self.dom.setMetadata(
            libvirt.VIR_DOMAIN_METADATA_ELEMENT, xml, METADATA_KEY, METADATA_NS, self.affect()
        )

    # -- power ---------------------------------------------------------------------------------
    def start(self, prepare: Callable[[], None] | None = None, vcpu_slice_ns: int = 0) -> None:
        """Boot the domain; with ``prepare``, start it paused, run ``prepare`` (devices added through
        the QEMU monitor are then there before the guest looks for them) and resume. A failure in
        ``prepare`` stops the domain again. With ``vcpu_slice_ns``, emulated vCPUs ask for that
        scheduler slice."""
        if self.is_active():
            return
        if prepare is None:
            self.dom.create()
        else:
            self.dom.createWithFlags(libvirt.VIR_DOMAIN_START_PAUSED)
            try:
                prepare()
                self.dom.resume()
            except BaseException:
                with contextlib.suppress(libvirt.libvirtError):
                    self.dom.destroy()
                raise
        if vcpu_slice_ns:
            vcpu_slice.lengthen(self.name, vcpu_slice_ns)

    def resume_if_paused(self) -> None:
        if self.dom.state()[0] == libvirt.VIR_DOMAIN_PAUSED:
            self.dom.resume()

    def press_power_button(self) -> None:
        """ACPI shutdown: the guest decides whether and when it powers off."""
        self.dom.shutdownFlags(libvirt.VIR_DOMAIN_SHUTDOWN_ACPI_POWER_BTN)

    def destroy(self) -> bool:
        """Pull the plug; False when the guest had already stopped by itself."""
        try:
            self.dom.destroy()
        except libvirt.libvirtError:
            if self.is_active():
                raise
            return False
        return True

    def undefine(self) -> None:
        """Stop and remove the definition (a domain already gone is fine)."""
        try:
            if self.is_active():
                self.dom.destroy()
            try:
                self.dom.undefineFlags(UNDEFINE_FLAGS)
            except libvirt.libvirtError as exc:
                if libvirt_util.is_no_domain(exc):
                    raise
                # A driver without some of the flags (or a domain without NVRAM where the flag
                # is refused) still undefines plainly.
                self.dom.undefine()
        except libvirt.libvirtError as exc:
            if not libvirt_util.is_no_domain(exc):
                raise

    # -- QEMU monitor ---------------------------------------------------------------------------
    def qmp(self, command: str, **arguments: Any) -> Any:
        """Run a QMP command on the running QEMU (what libvirt cannot express, such as a user-mode
        network with a given DHCP start); returns its ``return`` value."""
        cmd: dict[str, Any] = {"execute": command}
        if arguments:
            cmd["arguments"] = arguments
        reply = libvirt_qemu.qemuMonitorCommand(self.dom, json.dumps(cmd), 0)
        return json.loads(reply).get("return")

    # -- devices -------------------------------------------------------------------------------
    def attach_device(self, xml: str) -> None:
        self.dom.attachDeviceFlags(xml, self.affect())

    def detach_device(self, tag: str, alias: str, release_timeout: float = 10.0) -> None:
        """Remove the ``tag`` device called ``alias`` from the running guest and the definition.

        Each side is looked up in its own XML: a device attached while the guest was off is only
        in the definition. Unplugging from a running guest is a request the guest answers (ACPI):
        libvirt waits a few seconds for it and then returns with the device still there, so this
        waits until QEMU has really let go, up to ``release_timeout`` seconds, and raises
        :class:`Unavailable` (the caller retries) while the guest holds on; the definition keeps
        the device until then. Raises :class:`Internal` when libvirt refuses.
        """
        for flags, xml_flags in (
            (libvirt.VIR_DOMAIN_AFFECT_LIVE, 0),
            (libvirt.VIR_DOMAIN_AFFECT_CONFIG, libvirt.VIR_DOMAIN_XML_INACTIVE),
        ):
            live = flags == libvirt.VIR_DOMAIN_AFFECT_LIVE
            if live and not self.is_active():
                continue
            dev = find_device(self.dom.XMLDesc(xml_flags), tag, alias)
            if dev is None:
                continue
            refused = ""
            try:
                self.dom.detachDeviceFlags(to_string(dev), flags)
            except libvirt.libvirtError as exc:
                if live and not self.is_active():
                    continue
                if not live:
                    raise Internal(f"detaching {alias} failed: {exc.get_error_message()}") from exc
                # An unplug already under way is refused again; waiting below tells the cases apart.
                refused = f" (libvirt: {exc.get_error_message()})"
            if live:
                self._wait_released(tag, alias, release_timeout, refused)

    def _wait_released(self, tag: str, alias: str, timeout: float, refused: str) -> None:
        deadline = time.monotonic() + timeout
        while True:
            try:
                if not self.is_active() or find_device(self.dom.XMLDesc(0), tag, alias) is None:
                    return
            except libvirt.libvirtError:
                if not self.is_active():
                    return
                raise
            if time.monotonic() > deadline:
                raise Unavailable(f"the guest has not released {alias} within {timeout:.0f}s{refused}; "
                                  "the detach is retried", reason="DetachPending")
            time.sleep(0.1)  # polling QEMU's device list: libvirt's removal event is not ours to wait on

    def grow_disk_live(self, target: str, size: int, what: str) -> bool:
        """Grow disk ``target`` (``what``, for messages) of the running guest to ``size`` bytes,
        never shrinking; False when the guest is not running, so the caller grows the file itself.
        Raises :class:`Internal`."""
        try:
            if not self.is_active():
                return False
            if size > int(self.dom.blockInfo(target)[0]):
                self.dom.blockResize(target, size, libvirt.VIR_DOMAIN_BLOCK_RESIZE_BYTES)
            return True
        except libvirt.libvirtError as exc:
            if not self.is_active():
                return False
            raise Internal(f"{what}: online resize failed: {exc.get_error_message()}") from exc

    def set_io_tune(self, target: str, params: dict[str, int], what: str) -> None:
        try:
            self.dom.setBlockIoTune(target, params, self.affect())
        except libvirt.libvirtError as exc:
            raise Internal(f"{what}: setting I/O limits failed: {exc.get_error_message()}") from exc
