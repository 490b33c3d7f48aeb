"""Shared libvirt helpers for the IRI runtimes: connections, the event loop, domain type, errors.

libvirt-python calls block; the runtimes run them in threads. One process-wide libvirt event loop
thread (``virEventRunDefaultImpl``) serves lifecycle callbacks, stream callbacks and keepalives,
and must be registered before the first connection is opened, so open connections through
:func:`open_connection` (or a :class:`Connection`, which also re-opens itself).
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import threading
import xml.etree.ElementTree as ET
from collections.abc import Callable
from typing import Literal, TypeVar

import libvirt

from .errors import Internal, Unavailable

log = logging.getLogger(__name__)
T = TypeVar("T")

DomainType = Literal["kvm", "qemu"]

_loop_lock = threading.Lock()
_loop_thread: threading.Thread | None = None

# ioctls from <linux/kvm.h>
_KVM_GET_API_VERSION = 0xAE00
_KVM_API_VERSION = 12


def _silence_default_error_handler() -> None:
    # libvirt prints every error to stderr by default; they are raised as exceptions anyway.
    libvirt.registerErrorHandler(lambda _ctx, _err: None, None)


def ensure_event_loop() -> None:
    """Start the process-wide libvirt event loop thread once (idempotent, thread-safe)."""
    global _loop_thread
    with _loop_lock:
        if _loop_thread is not None:
            return
        _silence_default_error_handler()
        libvirt.virEventRegisterDefaultImpl()

        def run() -> None:
            while True:
                try:
                    libvirt.virEventRunDefaultImpl()
                except libvirt.libvirtError:  # pragma: no cover - keeps callbacks flowing
                    log.exception("libvirt event loop iteration failed")

        _loop_thread = threading.Thread(target=run, name="libvirt-events", daemon=True)
        _loop_thread.start()


def open_connection(uri: str, events: bool = True) -> libvirt.virConnect:
    """Open a read-write connection to ``uri``, with the event loop running and keepalive on
    unless ``events`` is False (a connection that only makes calls: every call then costs less,
    as no event-loop thread competes for the socket)."""
    if events:
        ensure_event_loop()
    else:
        _silence_default_error_handler()
    try:
        conn = libvirt.open(uri)
    except libvirt.libvirtError as exc:
        raise ConnectionError(f"libvirt: cannot connect to {uri!r}: {exc.get_error_message()}") from exc
    if events and not uri.startswith("test:"):
        # Drivers without keepalive support just go without it.
        with contextlib.suppress(libvirt.libvirtError):
            conn.setKeepAlive(5, 3)
    return conn


# libvirt error codes meaning "the connection is gone": re-open and let the caller retry.
_CONNECTION_ERRORS = frozenset(
    {
        libvirt.VIR_ERR_SYSTEM_ERROR,
        libvirt.VIR_ERR_RPC,
        libvirt.VIR_ERR_NO_CONNECT,
        libvirt.VIR_ERR_INVALID_CONN,
    }
)


def _alive(conn: libvirt.virConnect) -> bool:
    try:
        return bool(conn.isAlive())
    except libvirt.libvirtError:
        return False


class Connection:
    """A libvirt connection that re-opens itself when libvirtd went away (a restart, a dropped
    client); ``on_reopen`` renews what lived on the old one, such as event subscriptions."""

    def __init__(
        self, uri: str, on_reopen: Callable[[libvirt.virConnect], None] | None = None, events: bool = True
    ) -> None:
        self.uri = uri
        self.on_reopen = on_reopen
        self.events = events
        self._conn = open_connection(uri, events)  # ConnectionError names the URI
        self._lock = threading.Lock()

    def get(self) -> libvirt.virConnect:
        """The live connection; Unavailable when libvirtd cannot be reached again."""
        conn = self._conn
        if _alive(conn):
            return conn
        with self._lock:
            if self._conn is not conn and _alive(self._conn):
                return self._conn
            log.warning("libvirt connection to %s lost; reconnecting", self.uri)
            try:
                new = open_connection(self.uri, self.events)
            except ConnectionError as exc:
                raise Unavailable(str(exc)) from exc
            if self.on_reopen is not None:
                self.on_reopen(new)
            with contextlib.suppress(libvirt.libvirtError):
                conn.close()
            self._conn = new
            log.info("libvirt connection to %s re-established", self.uri)
            return new

    def call(self, what: str, fn: Callable[[libvirt.virConnect], T]) -> T:
        """Run ``fn`` on the connection, once more on a new one if the connection broke under it;
        other libvirt errors become :class:`Internal` starting with ``what``."""
        for attempt in (1, 2):
            conn = self.get()
            try:
                return fn(conn)
            except libvirt.libvirtError as exc:
                if attempt == 1 and exc.get_error_code() in _CONNECTION_ERRORS and not _alive(conn):
                    continue
                raise Internal(f"{what}: {exc.get_error_message()}") from exc
        raise Unavailable(f"{what}: libvirt connection keeps failing")  # pragma: no cover

    def close(self) -> None:
        with contextlib.suppress(libvirt.libvirtError):
            self._conn.close()


def error_code(exc: BaseException) -> int | None:
    """The libvirt error code of ``exc`` or None when it is not a libvirt error."""
    return exc.get_error_code() if isinstance(exc, libvirt.libvirtError) else None


def is_no_domain(exc: BaseException) -> bool:
    """Whether ``exc`` says the domain does not exist (any more)."""
    return error_code(exc) == libvirt.VIR_ERR_NO_DOMAIN


def kvm_usable() -> bool:
    """A cheap check that hardware virtualisation really works, not only that /dev/kvm exists.

    A CPU without ``vmx``/``svm`` may still expose /dev/kvm (e.g. a paravirtual KVM in a nested
    sandbox) whose guests hang, so the CPU flags must show hardware support as well.
    """
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as f:
            flags = next((line for line in f if line.startswith("flags")), "").split()
    except OSError:
        return False
    if "vmx" not in flags and "svm" not in flags:
        return False
    try:
        fd = os.open("/dev/kvm", os.O_RDWR | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        return fcntl.ioctl(fd, _KVM_GET_API_VERSION) == _KVM_API_VERSION
    except OSError:
        return False
    finally:
        os.close(fd)


def hypervisor_supports(conn: libvirt.virConnect, domain_type: DomainType, arch: str = "x86_64") -> bool:
    """Whether libvirt's capabilities list ``domain_type`` guests for ``arch``."""
    try:
        caps = ET.fromstring(conn.getCapabilities())
    except libvirt.libvirtError:
        return False
    for guest in caps.iter("guest"):
        a = guest.find("arch")
        if a is None or a.get("name") != arch:
            continue
        if any(d.get("type") == domain_type for d in a.iter("domain")):
            return True
    return False


def choose_domain_type(conn: libvirt.virConnect, mode: str) -> DomainType:
    """Resolve ``auto|kvm|qemu``: auto is kvm only when libvirt offers it and KVM really works."""
    if mode == "kvm":
        return "kvm"
    if mode == "qemu":
        return "qemu"
    if mode != "auto":
        raise ValueError(f"domain type: must be auto, kvm or qemu, not {mode!r}")
    if hypervisor_supports(conn, "kvm") and kvm_usable():
        return "kvm"
    return "qemu"


def network_exists(conn: libvirt.virConnect, name: str) -> bool:
    """Whether a libvirt network called ``name`` is defined."""
    try:
        conn.networkLookupByName(name)
    except libvirt.libvirtError as exc:
        if error_code(exc) == libvirt.VIR_ERR_NO_NETWORK:
            return False
        raise
    return True
