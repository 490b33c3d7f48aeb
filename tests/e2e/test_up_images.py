"""Machines and Volumes from OCI images on real libvirtd, pulled from a real registry by ``ironpool up``:
the tiny image published as an IronCore image (kernel and initramfs layers) boots; a qcow2 disk
becomes a copy-on-write overlay on the cached base; each way a pull fails leaves the Machine
Pending with a condition naming the image and the cause, and fixing the cause lets it run."""

from __future__ import annotations

import base64
import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from ironpool.api.resources import resolve
from ironpool.runtime.images import Credentials
from ironpool.runtime.images.publish import ImageFiles, push
from up_harness import UpInstance, machine_domain, wait_for

from tests.helpers.guests import boot_deadline
from tests.helpers.net import free_port
from tests.helpers.registry import Registry, push_not_an_image

pytestmark = [pytest.mark.libvirt, pytest.mark.slow, pytest.mark.guests]

MACHINES, VOLUMES, EVENTS = resolve("machines"), resolve("volumes"), resolve("events")


def machine_yaml(name: str, image: str, pull_secret: str = "") -> str:
    secret = f"\n  imagePullSecret: {{name: {pull_secret}}}" if pull_secret else ""
    return f"""\
apiVersion: compute.ironcore.dev/v1alpha1
kind: Machine
metadata: {{name: {name}, namespace: default}}
spec:
  machineClassRef: {{name: x-small}}{secret}
  volumes:
    - name: root
      localDisk: {{image: "{image}", sizeLimit: 1Gi}}
"""


def ready(obj: dict[str, Any]) -> dict[str, Any]:
    conds = (obj.get("status") or {}).get("conditions") or []
    return next((c for c in conds if c.get("type") == "Ready"), {})


def test_machines_from_oci_images(make_up: Callable[..., UpInstance], tiny_images: Path, registry: Registry,
                                  auth_registry: Registry, tmp_path: Path) -> None:
    reg, locked = registry.address, auth_registry.address
    tiny = ImageFiles.from_path(tiny_images / "tiny")
    tiny_digest = push(f"{reg}/os/tiny:1", tiny)
    creds = Credentials.basic(locked, auth_registry.user, auth_registry.password)
    push(f"{locked}/os/tiny:1", tiny, creds)
    disk = tmp_path / "disk.qcow2"
    subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", str(disk), "256M"], check=True)
    disk_digest = push(f"{reg}/os/disk:1", ImageFiles.from_path(disk), layout="index")

    own = free_port()  # `ironpool up --registry PORT` runs one of its own
    up = make_up(extra_args=["--capacity-cpu", "8", "--capacity-memory", "8Gi",  # guests here idle
                             "--registry", str(own)])
    up.start()
    assert f"OCI registry on 127.0.0.1:{own}" in up.output()
    assert push(f"127.0.0.1:{own}/os/tiny:1", tiny) == tiny_digest
    client = up.client()

    def apply(text: str) -> None:
        f = tmp_path / "m.yaml"
        f.write_text(text)
        up.cli("apply", "-f", str(f))

    def machine(name: str) -> dict[str, Any]:
        return client.get_raw(MACHINES, name, "default")

    seen: dict[str, Any] = {}

    def pending_because(name: str, reason: str, *words: str) -> dict[str, Any]:
        def check() -> dict[str, Any] | None:
            m = machine(name)
            cond = seen[name] = ready(m)
            ok = (m.get("status") or {}).get("state") == "Pending" and cond.get("reason") == reason
            return cond if ok and all(w in cond.get("message", "") for w in words) else None
        try:
            # the poollet retries a failed create with backoff (up to 30 s), the runtime a failed pull
            return wait_for(check, 120, f"machine {name} Pending because {reason}")
        except BaseException:
            print(f"machine {name}: last Ready {seen.get(name)}; status {machine(name).get('status')}")
            print(up.output()[-3000:])
            raise

    def running(name: str, guests: int = 1) -> dict[str, Any]:
        # 30 s: the longest a failed create waits for its next try (the poollet's backoff cap)
        return wait_for(lambda: (m := machine(name)).get("status", {}).get("state") == "Running" and m,
                        boot_deadline(guests) + 30, f"machine {name} Running")

    # The tiny image as an OCI artifact (kernel + initramfs layers) boots; the status says which digest.
    apply(machine_yaml("oci-tiny", f"127.0.0.1:{own}/os/tiny:1"))
    m = running("oci-tiny")
    assert m["status"]["imageRef"] == f"127.0.0.1:{own}/os/tiny:1@{tiny_digest}"
    iri_id, _ = machine_domain(m["status"]["machineID"])
    wait_for(lambda: "ironpool-tiny-image: init started" in up.console_log(iri_id), boot_deadline(1),
             "the OCI-pulled tiny guest's init line")
    wide = up.cli("get", "machine", "oci-tiny", "-o", "wide").stdout
    assert "IMAGE" in wide and tiny_digest in wide

    def pull_events() -> bool:
        reasons = {e["reason"] for e in client.list_raw(EVENTS, "default").items
                   if e["involvedObject"]["name"] == "oci-tiny"}
        return {"Pulling", "Pulled"} <= reasons

    # the poollet forwards the runtime's events every 10 s: the guest may be up before they are
    wait_for(pull_events, 30, "the runtime's Pulling and Pulled events on the Machine")

    # A disk image becomes an overlay on the cached base, its backing format recorded.
    apply(machine_yaml("oci-disk", f"{reg}/os/disk:1"))
    m = running("oci-disk")
    cache = up.data_dir / "image-cache"
    mdir = up.data_dir / "machine-runtime" / "machines" / machine_domain(m["status"]["machineID"])[0]
    overlays = list((mdir / "disks").glob("*.qcow2"))
    info = json.loads(subprocess.run(["qemu-img", "info", "-U", "--output=json", str(overlays[0])],
                                     capture_output=True, text=True, check=True).stdout)
    assert Path(info["backing-filename"]).parent == cache / "blobs" / "sha256"
    assert info["backing-filename-format"] == "qcow2" and info["virtual-size"] == 1 << 30
    assert m["status"]["imageRef"] == f"{reg}/os/disk:1@{disk_digest}"

    # A Volume filled from the same image is an overlay on the same base.
    apply(f"""\
apiVersion: storage.ironcore.dev/v1alpha1
kind: Volume
metadata: {{name: os-vol, namespace: default}}
spec:
  volumeClassRef: {{name: fast}}
  resources: {{storage: 1Gi}}
  dataSource: {{osImage: {{image: "{reg}/os/disk:1"}}}}
""")
    vol = wait_for(lambda: (v := client.get_raw(VOLUMES, "os-vol", "default")).get("status", {}).get("state")
                   == "Available" and v, 60, "volume os-vol Available")
    vinfo = json.loads(subprocess.run(["qemu-img", "info", "-U", "--output=json",
                                       vol["status"]["access"]["volumeAttributes"]["path"]],
                                      capture_output=True, text=True, check=True).stdout)
    assert vinfo["backing-filename"] == info["backing-filename"]
    up.cli("delete", "machine", "oci-disk")  # it has no bootloader: nothing more to see

    # Each failure: Pending, a condition and a Warning event naming image and cause; then fixed.
    apply(machine_yaml("late", f"{reg}/os/late:1"))
    apply(machine_yaml("chart", f"{reg}/os/chart:1"))
    apply(machine_yaml("private", f"{locked}/os/tiny:1"))
    apply(machine_yaml("wrong-digest", f"{reg}/os/tiny@sha256:{'0' * 64}"))
    push_not_an_image(f"{reg}/os/chart:1", tmp_path)
    pending_because("late", "ImageNotFound", f"{reg}/os/late:1", "manifest unknown")
    pending_because("chart", "NotAnImage", f"{reg}/os/chart:1", "not an IronCore image")
    pending_because("private", "ImageUnauthorized", f"{locked}/os/tiny:1", "authentication required")
    pending_because("wrong-digest", "ImageNotFound", "sha256:" + "0" * 64)
    warnings = {(e["involvedObject"]["name"], e["reason"])
                for e in client.list_raw(EVENTS, "default").items if e["type"] == "Warning"}
    assert {("late", "ImageNotFound"), ("chart", "NotAnImage"), ("private", "ImageUnauthorized")} <= warnings

    push(f"{reg}/os/late:1", tiny)
    push(f"{reg}/os/chart:1", tiny)
    config = {"auths": {locked: {"auth": base64.b64encode(
        f"{auth_registry.user}:{auth_registry.password}".encode()).decode()}}}
    apply(f"""\
apiVersion: v1
kind: Secret
metadata: {{name: regcred, namespace: default}}
type: kubernetes.io/dockerconfigjson
stringData:
  .dockerconfigjson: '{json.dumps(config)}'
""")
    apply(machine_yaml("private", f"{locked}/os/tiny:1", pull_secret="regcred"))
    for name in ("late", "chart", "private"):
        running(name, guests=3)
    up.cli("delete", "machine", "wrong-digest")

    # The cache holds whole images only, and knows who uses them. oci-disk's overlay goes once its
    # poollet has had the runtime delete the domain, which the deletion of the Machine only starts.
    def by_digest_once_oci_disk_went() -> dict[str, Any] | None:
        listing = json.loads(up.cli("image", "ls", "--image-cache", str(cache), "-o", "json").stdout)
        images = {i["digest"]: i for i in listing["images"]}
        users = [u["user"].split()[0] for u in images[disk_digest]["users"]]
        return images if users == ["volume"] else None

    by_digest = wait_for(by_digest_once_oci_disk_went, 60, "oci-disk's overlay gone from the cache's users")
    assert list((cache / "tmp").iterdir()) == []
    # oci-tiny, late, chart and private: four references, one content, one copy in the cache
    assert len(by_digest[tiny_digest]["users"]) == 4
    assert set(by_digest[tiny_digest]["refs"]) == {
        f"127.0.0.1:{own}/os/tiny:1", f"{reg}/os/late:1", f"{reg}/os/chart:1", f"{locked}/os/tiny:1"}

