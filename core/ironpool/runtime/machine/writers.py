"""One writer per volume on a host: a domain is not started, and a volume not hot-plugged into a running
domain, while another running domain of this libvirtd has the same volume file open read-write.

The control plane records which domain holds a Volume (``status.attachment``); this is the host's own
check beneath it, over every running domain libvirt knows (other runtimes' and installations' too),
so a stale or forged request cannot put two writers on one disk. Disks marked ``readonly`` or
``shareable`` are not writers of their own. The check and the start run under one lock per runtime,
so two starts at once cannot both pass.
"""

from __future__ import annotations

import os
import threading
import xml.etree.ElementTree as ET
from collections.abc import Callable, Iterable, Iterator

import libvirt

from ironpool.runtime.errors import FailedPrecondition

from .model import MachineRecord

#: held across the check and the start (or hot-plug) it allows
START_LOCK = threading.Lock()


def _real(path: str) -> str:
    return os.path.realpath(path) if path else ""


def shared_paths(rec: MachineRecord) -> set[str]:
    """The files of ``rec``'s connection volumes (local disks are its own and never shared)."""
    return {_real(v.path) for v in rec.volumes if v.kind == "connection" and v.path}


def writers(conn: libvirt.virConnect, paths: Iterable[str], own_domain: str) -> Iterator[tuple[str, str]]:
    """``(domain, file)`` for each running domain other than ``own_domain`` that has one of ``paths``
    open read-write."""
    wanted = {_real(p) for p in paths if p}
    if not wanted:
        return
    for dom in conn.listAllDomains(libvirt.VIR_CONNECT_LIST_DOMAINS_ACTIVE):
        try:
            name = dom.name()
            if name == own_domain:
                continue
            root = ET.fromstring(dom.XMLDesc(0))
        except libvirt.libvirtError:
            continue  # gone meanwhile
        for disk in root.iterfind("./devices/disk"):
            if disk.find("readonly") is not None or disk.find("shareable") is not None:
                continue
            source = disk.find("source")
            path = _real((source.get("file") or source.get("dev") or "") if source is not None else "")
            if path in wanted:
                yield name, path


def refuse_second_writer(conn: libvirt.virConnect, paths: Iterable[str], own_domain: str, field: str) -> None:
    """FailedPrecondition naming the domain that already writes one of ``paths``."""
    for name, path in writers(conn, paths, own_domain):
        raise FailedPrecondition(f"{field}: volume file {path!r} is open read-write by running domain "
                                 f"{name}: a volume has one writer at a time")


def start_alone(conn: libvirt.virConnect, rec: MachineRecord, start: Callable[[], None]) -> None:
    """Run ``start`` (the domain's boot) unless another running domain writes one of its volumes."""
    with START_LOCK:
        refuse_second_writer(conn, shared_paths(rec), rec.domain_name, "machine.spec.volumes")
        start()
