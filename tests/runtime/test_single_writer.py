"""The machine runtime's own one-writer check (:mod:`ironpool.runtime.machine.writers`) over libvirt's
test driver: a running domain with a volume file open read-write is found and named, a read-only or
shareable disk and a stopped domain are not writers, and the domain itself is not its own rival. The
real libvirt path runs in tests/fleet/test_fencing_fleet.py."""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import libvirt
import pytest
from ironpool.runtime.errors import FailedPrecondition
from ironpool.runtime.machine.writers import refuse_second_writer, writers


def domain_xml(name: str, path: str, extra: str = "") -> str:
    return (f"<domain type='test'><name>{name}</name><memory>65536</memory><os><type>hvm</type></os>"
            f"<devices><disk type='file' device='disk'><source file='{path}'/><target dev='vda'/>{extra}"
            "</disk></devices></domain>")


@pytest.fixture
def conn() -> Iterator[libvirt.virConnect]:
    c = libvirt.open("test:///default")
    made: list[libvirt.virDomain] = []

    def define(name: str, path: str, extra: str = "", start: bool = True) -> None:
        dom = c.defineXML(domain_xml(name, path, extra))
        made.append(dom)
        if start:
            dom.create()

    c.define = define  # type: ignore[attr-defined]
    yield c
    for dom in made:
        if dom.isActive():
            dom.destroy()
        dom.undefine()
    c.close()


def test_a_running_writer_is_named_and_others_are_not(conn: libvirt.virConnect) -> None:
    tag = secrets.token_hex(3)
    path = f"/var/tmp/ironpool-writer-{tag}.qcow2"
    conn.define(f"w-{tag}", path)  # type: ignore[attr-defined]
    conn.define(f"ro-{tag}", f"/var/tmp/ro-{tag}.qcow2", "<readonly/>")  # type: ignore[attr-defined]
    conn.define(f"sh-{tag}", f"/var/tmp/sh-{tag}.qcow2", "<shareable/>")  # type: ignore[attr-defined]
    conn.define(f"off-{tag}", f"/var/tmp/off-{tag}.qcow2", start=False)  # type: ignore[attr-defined]
    assert list(writers(conn, [path], f"new-{tag}")) == [(f"w-{tag}", path)]
    assert list(writers(conn, [path], f"w-{tag}")) == []  # itself
    for other in ("ro", "sh", "off"):
        assert list(writers(conn, [f"/var/tmp/{other}-{tag}.qcow2"], f"new-{tag}")) == []
    with pytest.raises(FailedPrecondition) as refused:
        refuse_second_writer(conn, [path], f"new-{tag}", "machine.spec.volumes")
    assert str(refused.value.message).startswith(f"machine.spec.volumes: volume file {path!r} is open "
                                                 f"read-write by running domain w-{tag}")
