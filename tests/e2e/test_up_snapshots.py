"""A VolumeSnapshot restored into a new Volume holds what its source held, read inside a guest:
``ironpool up`` on real libvirtd, its volumepoollet driving the IRI snapshot RPCs, and a tiny-image
Machine whose init prints on its serial console what each of its disks starts with."""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from ironpool.api.resources import resolve
from up_harness import UpInstance, machine_domain, wait_for

from tests.helpers.guests import GUEST_SECONDS
from tests.helpers.runtimes import REPO

pytestmark = [pytest.mark.libvirt, pytest.mark.slow]

MACHINES, VOLUMES, SNAPSHOTS = resolve("machines"), resolve("volumes"), resolve("volumesnapshots")


@pytest.fixture
def marked_image(tiny_images: Path) -> Iterator[str]:
    """A raw disk in ``up``'s image catalog (the one folder it serves disk images from), named for the
    marker it starts with, which no other disk has."""
    marker = f"ironpool-snapshot-{secrets.token_hex(6)}"
    disk = tiny_images / f"{marker}.raw"
    disk.write_bytes(marker.encode() + bytes(4 * 1024**2 - len(marker)))
    try:
        yield marker
    finally:
        disk.unlink(missing_ok=True)


def test_a_snapshot_restored_into_a_new_volume_shows_its_source_content_in_a_guest(
        make_up: Callable[..., UpInstance], marked_image: str) -> None:
    up = make_up()
    up.start()
    client = up.client()
    marker = marked_image
    classes = REPO / "examples" / "manifests" / "00-volumeclasses.yaml"
    (up.workdir / "src.yaml").write_text(f"""\
apiVersion: storage.ironcore.dev/v1alpha1
kind: Volume
metadata: {{name: src, namespace: default}}
spec:
  volumeClassRef: {{name: fast}}
  resources: {{storage: 64Mi}}
  dataSource: {{osImage: {{image: {marker}}}}}
""")
    up.cli("apply", "-f", str(classes), "-f", str(up.workdir / "src.yaml"))

    def state(resource: Any, name: str, wanted: str) -> dict[str, Any] | None:
        obj = client.get_raw(resource, name, "default")
        return obj if (obj.get("status") or {}).get("state") == wanted else None

    wait_for(lambda: state(VOLUMES, "src", "Available"), 120, "volume src Available")
    (up.workdir / "snap.yaml").write_text("""\
apiVersion: storage.ironcore.dev/v1alpha1
kind: VolumeSnapshot
metadata: {name: snap, namespace: default}
spec: {volumeRef: {name: src}}
""")
    up.cli("apply", "-f", str(up.workdir / "snap.yaml"))
    snap = wait_for(lambda: state(SNAPSHOTS, "snap", "Ready"), 120, "snapshot snap Ready")
    assert snap["status"]["snapshotID"].count("://") == 1, snap["status"]

    # The snapshot outlives its source (IronCore's rule: nothing ties them once it is taken).
    up.cli("delete", "volume", "src")
    wait_for(lambda: not [v for v in client.list_raw(VOLUMES, "default").items
                          if v["metadata"]["name"] == "src"], 120, "volume src gone")

    # Restored into a new Volume, attached to a new Machine: the guest reads the marker from it.
    (up.workdir / "restore.yaml").write_text("""\
apiVersion: storage.ironcore.dev/v1alpha1
kind: Volume
metadata: {name: copy, namespace: default}
spec:
  volumeClassRef: {name: fast}
  resources: {storage: 64Mi}
  dataSource: {volumeSnapshotRef: {name: snap}}
---
apiVersion: compute.ironcore.dev/v1alpha1
kind: Machine
metadata: {name: reader, namespace: default}
spec:
  machineClassRef: {name: x-small}
  power: "On"
  volumes:
    - name: root
      localDisk: {image: tiny, sizeLimit: 1Gi}
    - name: data
      volumeRef: {name: copy}
""")
    up.cli("apply", "-f", str(up.workdir / "restore.yaml"))
    up.wait("machine/reader", "running")
    iri_id, _ = machine_domain(client.get_raw(MACHINES, "reader", "default")["status"]["machineID"])
    wait_for(lambda: f"starts with: {marker}" in up.console_log(iri_id), GUEST_SECONDS,
             "the guest to print the marker it read from the restored volume")
    # The root disk is the tiny image's own, so the marker can only have come from the restored one.
    lines = [line for line in up.console_log(iri_id).splitlines() if marker in line]
    assert lines and all("vda " not in line for line in lines), lines

    up.cli("delete", "machine", "reader")
    up.cli("delete", "volume", "copy")
    up.cli("delete", "volumesnapshot", "snap")
    wait_for(lambda: up.domains() == {}, 120, "the reader's domain gone")
    wait_for(lambda: not client.list_raw(SNAPSHOTS, "default").items, 120, "snapshot snap gone")
