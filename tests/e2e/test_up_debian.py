"""Debian 12 from an ``https://`` URL and from a ``file://`` path under ``ironpool up`` on real
libvirtd. Both Machines pin the same content (one digest: the download's, the file's checksum) and get
root disks that are overlays on the one cached blob; both are declared ``power: Off``, so their
domains are defined on that base and never started.

Nothing here boots: an emulated Debian boot is the most expensive thing in the suite, and booting the
same bytes again would prove nothing more about where they came from. The same image from a registry
is what the example playbook test (tests/ansible/test_playbooks.py) boots, configures and checks as
its seed says: hostname, instance id, static address, guest agent, login prompt on the console.

Traffic goes only to 127.0.0.1 (the HTTPS server).
"""

from __future__ import annotations

import hashlib
import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from ironpool.api.resources import resolve
from up_harness import UpInstance, machine_domain, wait_for

from tests.helpers.https import serve_https
from tests.helpers.runtimes import build_debian_image

pytestmark = [pytest.mark.libvirt, pytest.mark.slow, pytest.mark.timeout(1800)]

MACHINES = resolve("machines")


def manifests(images: dict[str, str]) -> str:
    """A Machine per image, declared off: its root disk is made from the image, nothing boots."""
    return "---\n".join(f"""\
apiVersion: compute.ironcore.dev/v1alpha1
kind: Machine
metadata: {{name: {name}, namespace: default}}
spec:
  machineClassRef: {{name: standard}}
  power: "Off"
  volumes:
    - name: root
      localDisk: {{image: "{image}", sizeLimit: 4Gi}}
""" for name, image in images.items())


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return "sha256:" + h.hexdigest()


def backing_file(overlay: Path) -> str:
    info = json.loads(subprocess.run(["qemu-img", "info", "-U", "--output=json", str(overlay)],
                                     capture_output=True, text=True, check=True).stdout)
    return str(info["backing-filename"])


def test_debian_images_from_https_and_file_pin_one_blob(make_up: Callable[..., UpInstance],
                                                        tmp_path: Path) -> None:
    catalog = build_debian_image()
    image = (catalog / "debian-12.qcow2").resolve()
    digest = sha256(image)
    www = tmp_path / "www"
    www.mkdir()
    (www / "debian-12.qcow2").symlink_to(image)

    with serve_https(www, tmp_path / "pki") as server:
        # The runtime trusts the server's CA as it would a site's (SSL_CERT_FILE names the bundle).
        up = make_up(environment={"SSL_CERT_FILE": str(server.ca_file)},
                     extra_args=["--capacity-cpu", "4", "--capacity-memory", "4Gi"])
        up.start()
        https_ref = f"{server.url}/debian-12.qcow2#{digest}"
        file_ref = f"file://{catalog}/debian-12.qcow2"  # the catalog's link to the build: served
        spec = tmp_path / "debian.yaml"
        spec.write_text(manifests({"deb-https": https_ref, "deb-file": file_ref}))
        up.cli("apply", "-f", str(spec))
        client = up.client()

        def defined_off(name: str) -> dict[str, Any] | None:
            m = client.get_raw(MACHINES, name, "default")
            return m if (m.get("status") or {}).get("state") == "Shutdown" else None

        # A 2-GiB disk download into the cache; the file's content is the same blob (its checksum
        # is computed, not downloaded again). Both domains defined, shut off.
        machines = {name: wait_for(lambda n=name: defined_off(n), 600, f"{name} defined and shut off")
                    for name in ("deb-https", "deb-file")}

    # What each pinned: one download's digest, the other's checksum.
    assert machines["deb-https"]["status"]["imageRef"] == https_ref
    assert machines["deb-file"]["status"]["imageRef"] == f"{file_ref}#{digest}"
    # Same content, one base: both root disks are overlays on the one cached blob.
    bases = set()
    for m in machines.values():
        iri_id, _ = machine_domain(m["status"]["machineID"])
        disks = up.data_dir / "machine-runtime" / "machines" / iri_id / "disks"
        bases |= {backing_file(d) for d in disks.glob("*.qcow2")}
    assert bases == {str(up.data_dir / "image-cache" / "blobs" / "sha256" / digest.removeprefix("sha256:"))}
    # Declared off, never booted: their serial consoles have not printed a thing.
    for m in machines.values():
        assert up.console_log(machine_domain(m["status"]["machineID"])[0]) == ""
    up.cli("delete", "machine", "deb-https", "deb-file")
    wait_for(lambda: up.domains() == {}, 120, "both Debian domains gone")
