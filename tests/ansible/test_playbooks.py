"""The collection through real ``ansible-playbook`` and ``ansible-inventory`` runs against one real
``ironpool up`` on libvirtd: the example playbooks (check mode, converge, the Debian guest as its seed
says, idempotence, inventory, teardown), bad arguments, a volume grown in place, and manifests."""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import libvirt
import pytest
from ironpool.api.resources import resolve
from ironpool.client import ClientConfig
from ironpool.client.machine_console import MachineConsole

from tests.ansible.conftest import REPO, Ansible, write_playbook
from tests.e2e.up_harness import UpInstance, machine_domain, wait_for
from tests.helpers import ssh
from tests.helpers.guests import DEBIAN_SSH_DEADLINE
from tests.helpers.runtimes import agent_report

pytestmark = [pytest.mark.libvirt, pytest.mark.slow]

EXAMPLES = REPO / "examples" / "ansible"
MACHINES, VOLUMES, SECRETS = resolve("machines"), resolve("volumes"), resolve("secrets")
NETWORKS, EVENTS = resolve("networks"), resolve("events")
INVENTORY = ("-i", str(EXAMPLES / "machines.ironpool.yml"))
SSH_ENDPOINT = "machinepoollet.ironpool.dev/ssh-endpoint"


def names(up: UpInstance, info: object) -> list[str]:
    with up.client() as client:
        return sorted(o["metadata"]["name"] for o in client.list_raw(info, None).items)


@pytest.fixture
def examples_torn_down(up: UpInstance, ansible: Ansible) -> Iterator[None]:
    """Whatever the example test left when it failed half-way is torn down with the example's own
    teardown playbook, so the module's later tests start from an empty ``up``."""
    yield
    if names(up, MACHINES) or names(up, VOLUMES) or names(up, SECRETS) or names(up, NETWORKS):
        ansible.playbook(EXAMPLES / "teardown.yml")


# A Debian guest boots and is configured (each Ansible task runs Python in an emulated guest: 3-20 s
# apiece), so this test goes with the other guests modules, one after another: beside them it took
# 1,300 s of a quiet 2-core run instead of about 400.
@pytest.mark.guests
@pytest.mark.timeout(1800)
def test_example_playbooks_check_converge_idempotence_inventory_teardown(up: UpInstance, ansible: Ansible,
                                                                         examples_torn_down: None) -> None:
    # The image, as `make demo` does it: built by `ironpool image build`, published to the registry of
    # `ironpool up --registry`, booted from there.
    found = re.search(r"OCI registry on (127\.0\.0\.1:\d+)", up.output())
    assert found, up.output()
    ref = f"{found[1]}/os/debian:12"
    digest = up.cli("image", "push", ref, str(up.images / "debian-12.qcow2"), timeout=600).stdout.strip()
    image = ("-e", f"image={ref}")
    # The converge runs boot one of the example's two machines, web-1 (the one with a data volume):
    # the second is the same guest again, and on emulated CPUs it doubled the test's time. Check mode,
    # which boots nothing, declares both.
    web_1 = {"name": "web-1", "volumes": [{"name": "data", "volume": "web-data"}]}
    one = ("-e", json.dumps({"machines": [web_1]}))

    # Check mode on the fresh state: everything would change, nothing is created, and each machine
    # is predicted to land on this host's pool.
    check = ansible.playbook(EXAMPLES / "site.yml", *INVENTORY, *image, "--check", "--diff").ok()
    assert check.recap()["changed"] >= 2
    predicted = re.findall(r"(web-\d): pool (\S+),", check.stdout)
    assert dict(predicted) == {"web-1": up.pool, "web-2": up.pool}, check.stdout[-3000:]
    # --diff names the pool in each new Machine's diff.
    for host in ("web-1", "web-2"):
        assert f"+++ after: Machine default/{host} would land on pool {up.pool}" in check.stdout
    assert names(up, MACHINES) == [] and names(up, VOLUMES) == [] and names(up, SECRETS) == []

    # The real run: the Debian machine Running where check mode said, as a real running domain, from
    # the registry's image pinned to its digest, and configured over SSH with the key from its
    # cloud-init user data, through the inventory: gather_facts, then its service answers with a page
    # rendered from its facts (hostname from cloud-init's meta-data, the address IPAM allocated).
    run = ansible.playbook(EXAMPLES / "site.yml", *INVENTORY, *image, *one, timeout=1200).ok()
    answered = re.search(r"web-1 answered: web-1 \(10\.10\.0\.\d+\) runs Debian 12", run.stdout)
    assert answered, run.stdout[-3000:]
    with up.client() as client:
        machines = {m["metadata"]["name"]: m for m in client.list_raw(MACHINES, "default").items}
    assert sorted(machines) == ["web-1"]
    for m in machines.values():
        assert m["status"]["state"] == "Running" and m["spec"]["machinePoolRef"]["name"] == up.pool
        assert m["status"]["imageRef"] == f"{ref}@{digest}"
        assert up.domains().get(machine_domain(m["status"]["machineID"])[1]) == libvirt.VIR_DOMAIN_RUNNING
    assert names(up, SECRETS) == ["web-1-ignition"]

    # web-1 is the guest its NoCloud seed describes (the suite's one Debian guest booted to the end):
    # over SSH with the key the example's user data handed over, its hostname, its instance id (the
    # Machine's uid) and the address IPAM allocated, set statically (DHCP would show a lease time).
    # cloud-init finished every stage without an error (the image runs the config stage's modules in
    # the final stage's process). Its QEMU guest agent tells the host the same, and its serial console
    # (machines/exec) answers a new line with Debian's login prompt, named for it.
    web = machines["web-1"]
    address = web["status"]["networkInterfaces"][0]["ips"][0]
    out = ssh.wait_run(web["metadata"]["annotations"][SSH_ENDPOINT], up.config_path.parent / "id_ed25519",
                       "hostname; cloud-init query instance_id; ip -4 -o addr show scope global; "
                       "cat /proc/cmdline; cloud-init status --wait",
                       DEBIAN_SSH_DEADLINE, "SSH into web-1 with the example's key")
    lines = out.splitlines()
    assert lines[:2] == ["web-1", web["metadata"]["uid"]], out
    assert lines[-1] == "status: done", out
    assert any("no_timer_check" in line.split() for line in lines), out  # the image's kernel command line
    assert any(f"inet {address}/24" in line and "valid_lft forever" in line for line in lines), out
    domain = machine_domain(web["status"]["machineID"])[1]
    report = wait_for(lambda: agent_report(domain), 120, "web-1's guest agent answering")
    assert report[0] == "web-1" and address in report[1], report
    # Its agent connecting is also what ended its boot for the host: the runtime boots only so many
    # guests at once and freed web-1's slot then (an Event on the Machine, forwarded by the poollet).
    def booted() -> list[str]:
        with up.client() as client:
            return [e["message"] for e in client.list_raw(EVENTS, "default").items
                    if e["involvedObject"]["name"] == "web-1" and e["reason"] == "Booted"]

    settled = wait_for(booted, 30, "web-1's Booted event")
    assert settled[0].endswith("its guest agent connected"), settled
    with MachineConsole(ClientConfig.from_file(up.config_path), "default", "web-1") as console:
        console.send(b"\r")
        console.read_until(r"web-1 login:", 120)
        console.detach()

    # A second run changes nothing (it still gathers facts and checks every task on the guests:
    # minutes when their emulated CPUs share a busy host).
    again = ansible.playbook(EXAMPLES / "site.yml", *INVENTORY, *image, *one, timeout=1200).ok()
    assert again.recap()["changed"] == 0

    # The inventory plugin lists it, grouped by pool and class, with its hostvars.
    inv = ansible.inventory(EXAMPLES / "machines.ironpool.yml")
    pool_group = "pool_" + up.pool.replace("-", "_")
    assert inv[pool_group]["hosts"] == ["web-1"] and inv["running"]["hosts"] == ["web-1"]
    hostvars = inv["_meta"]["hostvars"]["web-1"]
    assert hostvars["ironpool_class"] == "standard" and hostvars["ironpool_pool"] == up.pool
    assert hostvars["ironpool_state"] == "Running" and hostvars["ironpool_labels"] == {"app": "web"}
    assert hostvars["ironpool_uid"] == machines["web-1"]["metadata"]["uid"]
    # Where SSH answers: the port its host forwards on 127.0.0.1 (user networking), as root.
    assert (hostvars["ansible_host"], hostvars["ansible_user"]) == ("127.0.0.1", "root")
    annotations = machines["web-1"]["metadata"]["annotations"]
    assert f"127.0.0.1:{hostvars['ansible_port']}" == annotations[SSH_ENDPOINT]
    assert hostvars["ironpool_addresses"] == machines["web-1"]["status"]["networkInterfaces"][0]["ips"]

    # Teardown leaves no object, domain or storage volume behind.
    ansible.playbook(EXAMPLES / "teardown.yml").ok()
    assert names(up, MACHINES) == [] and names(up, VOLUMES) == [] and names(up, SECRETS) == []
    assert names(up, NETWORKS) == []
    assert up.domains() == {}
    assert up.storage_volumes() == []


def test_bad_arguments_fail_naming_the_argument_and_create_nothing(up: UpInstance, ansible: Ansible,
                                                                   tmp_path: Path) -> None:
    tasks = """
    - name: unknown class
      ironpool.iaas.machine: {name: bad-1, machine_class: huge, image: tiny}
      register: unknown_class
      ignore_errors: true
    - name: bad size
      ironpool.iaas.machine: {name: bad-2, machine_class: x-small, image: tiny, disk_size: ten gigs}
      register: bad_size
      ignore_errors: true
    - name: bad volume size
      ironpool.iaas.volume: {name: bad-3, volume_class: fast, size: 1 gig}
      register: bad_volume_size
      ignore_errors: true
    - name: unknown option
      ironpool.iaas.machine: {name: bad-4, machine_class: x-small, colour: red}
      register: unknown_option
      ignore_errors: true
    - name: missing server
      ironpool.iaas.machine: {name: bad-5, machine_class: x-small, config_file: /nonexistent/config.yaml}
      register: missing_server
      ignore_errors: true
    - name: bad manifest document
      ironpool.iaas.manifest:
        definition:
          - {apiVersion: v1, kind: Secret, metadata: {name: bad-6}, stringData: {a: b}}
          - {apiVersion: compute.ironcore.dev/v1alpha1, kind: Machine, metadata: {name: bad-7},
             spec: {machineClassRef: {name: x-small}, power: Maybe}}
      register: bad_manifest
      ignore_errors: true
    - name: messages
      ansible.builtin.copy:
        dest: "{{ out }}"
        content: "{{ {'unknown_class': unknown_class.msg, 'bad_size': bad_size.msg,
                      'bad_volume_size': bad_volume_size.msg, 'unknown_option': unknown_option.msg,
                      'missing_server': missing_server.msg, 'bad_manifest': bad_manifest.msg} | to_json }}"
"""
    out = tmp_path / "messages.json"
    run = ansible.playbook(write_playbook(tmp_path, tasks), "-e", f"out={out}").ok()
    assert run.recap()["ignored"] == 6
    msgs = json.loads(out.read_text())
    assert msgs["unknown_class"].startswith("machine_class: there is no MachineClass named 'huge'")
    assert msgs["bad_size"].startswith("disk_size: 'ten gigs' is not a size")
    assert msgs["bad_volume_size"].startswith("size: '1 gig' is not a size")
    assert "colour" in msgs["unknown_option"]  # ansible-core's argument check, naming the option
    assert msgs["missing_server"].startswith("server: no ironpool apiserver is configured")
    assert msgs["bad_manifest"].startswith("definition (document 1): Machine default/bad-7: spec.power")
    assert names(up, MACHINES) == [] and names(up, VOLUMES) == [] and names(up, SECRETS) == []


def test_a_python_without_ironpool_is_told_the_pip_line(ansible: Ansible, tmp_path: Path) -> None:
    """The managed node's Python lacks the client: the module says what to install, and how."""
    python = "/usr/bin/python3"
    bare = {**os.environ, "PYTHONPATH": ""}  # only what that Python has installed
    probe = subprocess.run([python, "-c", "import ironpool"], env=bare, capture_output=True, check=False)
    if probe.returncode == 0:
        pytest.skip(f"{python} has the ironpool package")
    tasks = f"""
    - ironpool.iaas.machine_info:
      vars: {{ansible_python_interpreter: {python}}}
      register: missing
      ignore_errors: true
    - ansible.builtin.copy: {{dest: "{{{{ out }}}}", content: "{{{{ missing.msg }}}}"}}
"""
    out = tmp_path / "msg.txt"
    ansible.playbook(write_playbook(tmp_path, tasks), "-e", f"out={out}", env={"PYTHONPATH": ""}).ok()
    msg = out.read_text()
    assert "(ironpool)" in msg and "python3 -m pip install /path/to/ironpool" in msg


def test_volume_grows_in_place_never_shrinks_and_manifests_apply_and_delete(up: UpInstance, ansible: Ansible,
                                                                            tmp_path: Path) -> None:
    tasks = """
    - ironpool.iaas.volume: {name: grow, volume_class: fast, size: 64Mi, wait: true}
    - ironpool.iaas.volume: {name: grow, size: 128Mi, wait: true}
      register: grown
    - ironpool.iaas.volume: {name: grow, size: 64Mi}
      register: shrink
      ignore_errors: true
    - ironpool.iaas.manifest:
        definition: |
          apiVersion: v1
          kind: Secret
          metadata: {name: m-secret}
          stringData: {key: value}
          ---
          apiVersion: storage.ironcore.dev/v1alpha1
          kind: Volume
          metadata: {name: m-volume}
          spec: {volumeClassRef: {name: fast}, resources: {storage: 64Mi}}
        wait: true
      register: applied
    - ironpool.iaas.manifest:
        src: "{{ manifest }}"
        state: absent
        wait: true
      register: deleted
    - ironpool.iaas.volume: {name: grow, state: absent, wait: true}
    - ansible.builtin.copy:
        dest: "{{ out }}"
        content: "{{ {'grown': grown.size, 'shrink': shrink.msg,
                      'applied': applied.results | map(attribute='action') | list,
                      'pools': applied.results | map(attribute='pool', default='') | list,
                      'deleted': deleted.results | map(attribute='action') | list} | to_json }}"
"""
    manifest = tmp_path / "m.yaml"
    manifest.write_text("apiVersion: v1\nkind: Secret\nmetadata: {name: m-secret}\n---\n"
                        "apiVersion: storage.ironcore.dev/v1alpha1\nkind: Volume\n"
                        "metadata: {name: m-volume}\n")
    out = tmp_path / "out.json"
    ansible.playbook(write_playbook(tmp_path, tasks), "-e", f"out={out}", "-e", f"manifest={manifest}").ok()
    got = json.loads(out.read_text())
    assert got["grown"] == "128Mi"
    assert got["shrink"].startswith("size: ") and "cannot shrink from 128Mi to 64Mi" in got["shrink"]
    assert got["applied"] == ["created", "created"] and got["pools"] == ["", up.pool]
    assert got["deleted"] == ["deleted", "deleted"]
    assert names(up, VOLUMES) == [] and names(up, SECRETS) == []
    assert up.storage_volumes() == []
