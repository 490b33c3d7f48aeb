"""Debian 12 guests from an ``https://`` URL and a ``file://`` path under ``ironpool up`` on real
libvirtd: each runs, answers SSH with the key its cloud-init user data handed over, has the hostname,
instance id and static address of its NoCloud seed, reports hostname and addresses through the QEMU
guest agent, shows its login prompt on the serial console (``machines/exec``), and ``ansible -m
setup`` reaches it through the machines inventory plugin. The same
image from a registry is what the example playbook test boots (tests/ansible), so the three
sources together cost three Debian boots, two of them here, started at once.

Traffic goes only to 127.0.0.1 (the HTTPS server, the SSH ports ironpool forwards there).
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import libvirt
import pytest
from ironpool.api.resources import resolve
from ironpool.client import ClientConfig
from ironpool.client.machine_console import MachineConsole
from up_harness import UpInstance, machine_domain, wait_for

from tests.helpers import ssh
from tests.helpers.guests import DEBIAN_SSH_DEADLINE
from tests.helpers.https import serve_https
from tests.helpers.runtimes import LIBVIRT_URI, REPO, build_debian_image

pytestmark = [pytest.mark.libvirt, pytest.mark.slow, pytest.mark.guests, pytest.mark.timeout(1800)]

MACHINES = resolve("machines")
SSH_ENDPOINT = "machinepoollet.ironpool.dev/ssh-endpoint"
INVENTORY = """\
plugin: ironpool.iaas.machines
namespaces: [default]
groups:
  debian: ironpool_labels.os | default('') == 'debian'
"""


def manifests(public_key: str, images: dict[str, str]) -> str:
    docs = [f"""\
apiVersion: v1
kind: Secret
metadata: {{name: debian-user-data, namespace: default}}
stringData:
  user-data: |
    #cloud-config
    disable_root: false
    ssh_authorized_keys: [{json.dumps(public_key)}]
    write_files:
      - path: /etc/ironpool-test
        content: handed over by the NoCloud seed
---
apiVersion: networking.ironcore.dev/v1alpha1
kind: Network
metadata: {{name: lab, namespace: default}}
---
apiVersion: ipam.ironcore.dev/v1alpha1
kind: Prefix
metadata: {{name: lab-v4, namespace: default}}
spec: {{prefix: 10.10.0.0/24}}
"""]
    for name, image in images.items():
        docs.append(f"""\
apiVersion: compute.ironcore.dev/v1alpha1
kind: Machine
metadata: {{name: {name}, namespace: default, labels: {{os: debian}}}}
spec:
  machineClassRef: {{name: standard}}
  ignitionRef: {{name: debian-user-data}}
  volumes:
    - name: root
      localDisk: {{image: "{image}", sizeLimit: 4Gi}}
  networkInterfaces:
    - name: primary
      ephemeral:
        networkInterfaceTemplate:
          spec:
            networkRef: {{name: lab}}
            ipFamilies: [IPv4]
            ips: [{{ephemeral: {{prefixTemplate: {{spec: {{parentRef: {{name: lab-v4}}}}}}}}}}]
""")
    return "---\n".join(docs)


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


def agent_report(domain: str) -> tuple[str, set[str]] | None:
    """The guest's hostname and IPv4 addresses as its QEMU guest agent tells libvirt; None until
    the agent answers."""
    conn = libvirt.open(LIBVIRT_URI)
    try:
        dom = conn.lookupByName(domain)
        try:
            name = dom.hostname(libvirt.VIR_DOMAIN_GET_HOSTNAME_AGENT)
            ifaces = dom.interfaceAddresses(libvirt.VIR_DOMAIN_INTERFACE_ADDRESSES_SRC_AGENT)
        except libvirt.libvirtError:
            return None
        addrs = {a["addr"] for i in ifaces.values() for a in (i.get("addrs") or [])
                 if a["type"] == libvirt.VIR_IP_ADDR_TYPE_IPV4 and a["addr"] != "127.0.0.1"}
        return name, addrs
    finally:
        conn.close()


def test_debian_guests_from_https_and_file(make_up: Callable[..., UpInstance], tmp_path: Path) -> None:
    catalog = build_debian_image()
    image = (catalog / "debian-12.qcow2").resolve()
    digest = sha256(image)
    www = tmp_path / "www"
    www.mkdir()
    (www / "debian-12.qcow2").symlink_to(image)
    key, public = ssh.keypair(tmp_path)

    with serve_https(www, tmp_path / "pki") as server:
        # The runtime trusts the server's CA as it would a site's (SSL_CERT_FILE names the bundle).
        up = make_up(environment={"SSL_CERT_FILE": str(server.ca_file)},
                     extra_args=["--capacity-cpu", "4", "--capacity-memory", "4Gi"])
        up.start()
        https_ref = f"{server.url}/debian-12.qcow2#{digest}"
        file_ref = f"file://{catalog}/debian-12.qcow2"  # the catalog's link to the build: served
        spec = tmp_path / "debian.yaml"
        spec.write_text(manifests(public, {"deb-https": https_ref, "deb-file": file_ref}))
        up.cli("apply", "-f", str(spec))
        client = up.client()

        def machine(name: str) -> dict[str, Any]:
            return client.get_raw(MACHINES, name, "default")

        def reachable(name: str) -> dict[str, Any] | None:
            m = machine(name)
            ok = (m.get("status") or {}).get("state") == "Running"
            return m if ok and SSH_ENDPOINT in (m["metadata"].get("annotations") or {}) else None

        # Two 2-GiB disk downloads into the cache, then two domains: Running with an SSH endpoint.
        running = {n: wait_for(lambda n=n: reachable(n), 600, f"{n} Running with its SSH endpoint")
                   for n in ("deb-https", "deb-file")}

    # What each booted, pinned to the content: one download's digest, the other's checksum.
    assert running["deb-https"]["status"]["imageRef"] == https_ref
    assert running["deb-file"]["status"]["imageRef"] == f"{file_ref}#{digest}"
    # Same content, one base: both root disks are overlays on the one cached blob.
    bases = set()
    for m in running.values():
        iri_id, _ = machine_domain(m["status"]["machineID"])
        disks = up.data_dir / "machine-runtime" / "machines" / iri_id / "disks"
        bases |= {backing_file(d) for d in disks.glob("*.qcow2")}
    assert bases == {str(up.data_dir / "image-cache" / "blobs" / "sha256" / digest.removeprefix("sha256:"))}

    # Each answers SSH with the key from its user data, and is what its seed said.
    for name, m in running.items():
        address = m["status"]["networkInterfaces"][0]["ips"][0]
        out = ssh.wait_run(
            m["metadata"]["annotations"][SSH_ENDPOINT], key,
            "hostname; cat /etc/ironpool-test; echo; cloud-init query instance_id; "
            "ip -4 -o addr show scope global",
            DEBIAN_SSH_DEADLINE, f"SSH into {name} with the key from its user data",
        )
        lines = out.splitlines()
        assert lines[:3] == [name, "handed over by the NoCloud seed", m["metadata"]["uid"]], out
        # The allocated address, set statically from network-config (DHCP would show a lease time).
        assert any(f"inet {address}/24" in line and "valid_lft forever" in line for line in lines), out
        # The guest agent reports the same to the host.
        _, domain = machine_domain(m["status"]["machineID"])
        report = wait_for(lambda d=domain: agent_report(d), 120, f"{name}'s guest agent answering")
        assert report[0] == name and address in report[1], report

    # Its serial console through machines/exec (apiserver, machinepoollet, IRI Exec) is Debian's
    # getty on ttyS0: a new line is answered with the login prompt, named for the guest.
    for name in running:
        with MachineConsole(ClientConfig.from_file(up.config_path), "default", name) as console:
            console.send(b"\r")
            console.read_until(rf"{name} login:", 120)
            console.detach()

    # Ansible reaches both through the machines inventory and gathers their facts.
    inventory = tmp_path / "machines.ironpool.yml"
    inventory.write_text(INVENTORY)
    env = {**up.env, "ANSIBLE_COLLECTIONS_PATH": str(REPO / "ansible_collection"),
           "ANSIBLE_LOAD_CALLBACK_PLUGINS": "1", "ANSIBLE_STDOUT_CALLBACK": "default",
           "ANSIBLE_CALLBACK_RESULT_FORMAT": "json", "ANSIBLE_HOST_KEY_CHECKING": "false",
           "ANSIBLE_NOCOLOR": "1"}
    env.pop("IRONPOOL_SERVER", None)
    env.pop("IRONPOOL_TOKEN", None)
    proc = subprocess.run(
        [str(Path(sys.executable).parent / "ansible"), "debian", "-i", str(inventory),
         "-m", "ansible.builtin.setup", "--private-key", str(key),
         "-e", "ansible_python_interpreter=/usr/bin/python3",
         "--ssh-common-args=-o UserKnownHostsFile=/dev/null"],
        env=env, capture_output=True, text=True, timeout=600, check=False,
    )
    assert proc.returncode == 0, f"{proc.stdout[-4000:]}\n{proc.stderr[-2000:]}"
    # "HOST | SUCCESS => {json}" per host
    parts = re.split(r"^(\S+) \| (\w+) => ", proc.stdout, flags=re.M)[1:]
    results = zip(parts[::3], parts[1::3], parts[2::3], strict=True)
    hosts = {host: json.loads(body) for host, status, body in results if status == "SUCCESS"}
    assert sorted(hosts) == ["deb-file", "deb-https"]
    for name, result in hosts.items():
        facts = result["ansible_facts"]
        assert facts["ansible_distribution"] == "Debian"
        assert facts["ansible_distribution_major_version"] == "12"
        assert facts["ansible_hostname"] == name
        address = running[name]["status"]["networkInterfaces"][0]["ips"][0]
        assert address in facts["ansible_all_ipv4_addresses"], facts["ansible_all_ipv4_addresses"]
    up.cli("delete", "machine", "deb-https", "deb-file")
    wait_for(lambda: up.domains() == {}, 120, "both Debian domains gone")
