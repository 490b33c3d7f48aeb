"""Snapshots through real ``ansible-playbook`` runs against a real ``ironpool up`` on libvirtd: a
volume is snapshotted with ``ironpool.iaas.volume_snapshot`` (waiting for Ready), restored with
``ironpool.iaas.volume``'s ``snapshot`` (made in the snapshot's pool, with its content), in check mode
first, and everything is deleted again. Content is written and read on the host with QEMU's tools."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from ironpool.api.resources import resolve

from tests.ansible.conftest import Ansible, write_playbook
from tests.e2e.up_harness import UpInstance

pytestmark = [pytest.mark.libvirt, pytest.mark.slow]

VOLUMES, SNAPSHOTS = resolve("volumes"), resolve("volumesnapshots")


def names(up: UpInstance, info: object) -> list[str]:
    with up.client() as client:
        return sorted(o["metadata"]["name"] for o in client.list_raw(info, None).items)


def path_of(up: UpInstance, name: str) -> str:
    with up.client() as client:
        vol = client.get_raw(VOLUMES, name, "default")
    return str(vol["status"]["access"]["volumeAttributes"]["path"])


def test_snapshot_and_restore_through_playbooks(up: UpInstance, ansible: Ansible, tmp_path: Path) -> None:
    make = """
    - ironpool.iaas.volume: {name: snap-src, volume_class: fast, size: 64Mi, wait: true}
"""
    ansible.playbook(write_playbook(tmp_path, make)).ok()
    subprocess.run(["qemu-io", "-f", "qcow2", "-c", "write -P 0x3c 0 1M", path_of(up, "snap-src")],
                   check=True, capture_output=True)
    tasks = """
    - ironpool.iaas.volume_snapshot: {name: snap-1, volume: snap-src}
      check_mode: true
      diff: true
      register: checked
    - ironpool.iaas.volume_snapshot: {name: snap-1, volume: snap-src, wait: true}
      register: taken
    - ironpool.iaas.volume_snapshot: {name: snap-1, volume: snap-src}
      register: again
    - ironpool.iaas.volume:
        {name: snap-restored, volume_class: fast, size: 64Mi, snapshot: snap-1, wait: true}
      register: restored
    - ansible.builtin.copy:
        dest: "{{ out }}"
        content: "{{ {'checked': [checked.action, checked.changed, checked.diff.after.spec],
                      'taken': [taken.action, taken.state, taken.snapshot_id, taken.size],
                      'again': again.changed, 'restored': [restored.state, restored.pool]} | to_json }}"
"""
    out = tmp_path / "out.json"
    ansible.playbook(write_playbook(tmp_path, tasks), "-e", f"out={out}").ok()
    got = json.loads(out.read_text())
    assert got["checked"] == ["created", True, {"volumeRef": {"name": "snap-src"}}]
    action, state, snapshot_id, size = got["taken"]
    assert (action, state) == ("created", "Ready") and "://" in snapshot_id and int(size) == 64 * 1024**2
    assert got["again"] is False
    assert got["restored"] == ["Available", up.pool]
    raw = tmp_path / "restored.raw"
    subprocess.run(["qemu-img", "convert", "-U", "-O", "raw", path_of(up, "snap-restored"), str(raw)],
                   check=True, capture_output=True)
    with raw.open("rb") as f:
        assert f.read(1024**2) == b"\x3c" * 1024**2

    teardown = """
    - ironpool.iaas.volume: {name: snap-src, state: absent, wait: true}
    - ironpool.iaas.volume_snapshot: {name: snap-1, state: absent, wait: true}
    - ironpool.iaas.volume: {name: snap-restored, state: absent, wait: true}
"""
    ansible.playbook(write_playbook(tmp_path, teardown)).ok()
    assert names(up, VOLUMES) == [] and names(up, SNAPSHOTS) == []
    assert up.storage_volumes() == []
