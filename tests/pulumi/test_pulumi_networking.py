"""A Pulumi program whose Machine has a NIC, through the mini engine and the real plugin on a real
``ironpool up``: ``up`` returns once the NIC is attached, the outputs carry the address and the SSH
endpoint, and SSH through that endpoint (a port on 127.0.0.1) runs a command in the guest."""

from __future__ import annotations

import base64
from pathlib import Path

import pytest
from ironpool.api.resources import resolve
from pulumi_stack import stack_for

from tests.e2e.up_harness import UpInstance
from tests.helpers import ssh
from tests.helpers.guests import GUEST_SECONDS

pytestmark = [pytest.mark.libvirt, pytest.mark.slow]

NETWORKS, PREFIXES, SECRETS = resolve("networks"), resolve("prefixes"), resolve("secrets")
PROGRAM = '''
import pulumi
import ironpool_pulumi as ironpool

web = ironpool.Machine(
    "web", machine_class="x-small", image="tiny", ignition_secret="ssh-ignition",
    network_interfaces=[{"name": "primary", "ephemeral": {"networkInterfaceTemplate": {"spec": {
        "networkRef": {"name": "lab"}, "ipFamilies": ["IPv4"],
        "ips": [{"ephemeral": {"prefixTemplate": {"spec": {"parentRef": {"name": "lab-v4"}}}}}]}}}}],
)
pulumi.export("ips", web.ip_addresses)
pulumi.export("ssh_host", web.ssh_host)
pulumi.export("ssh_port", web.ssh_port)
pulumi.export("nics", web.network_interface_states)
'''


def test_machine_outputs_its_address_and_ssh_endpoint(up_instance: UpInstance, tmp_path: Path) -> None:
    up, client = up_instance, up_instance.client()
    key, public = ssh.keypair(tmp_path)
    client.create_raw(NETWORKS, {"metadata": {"name": "lab", "namespace": "default"}}, "default")
    client.create_raw(PREFIXES, {"metadata": {"name": "lab-v4", "namespace": "default"},
                                 "spec": {"prefix": "10.10.0.0/24"}}, "default")
    client.create_raw(SECRETS, {"metadata": {"name": "ssh-ignition", "namespace": "default"},
                                "data": {"ignition.yaml": base64.b64encode(ssh.ignition(public)).decode()}},
                      "default")
    program = tmp_path / "program"
    program.mkdir()
    (program / "Pulumi.yaml").write_text("name: networking\nruntime: python\n")
    (program / "__main__.py").write_text(PROGRAM)
    stack = stack_for(program, up, tmp_path)

    result = stack.up()
    assert result.error is None, result.error
    out = result.outputs
    assert out["nics"] == {"primary": "Attached"} and out["ips"] == ["10.10.0.2"]
    assert out["ssh_host"] == "127.0.0.1" and isinstance(out["ssh_port"], int)
    said = ssh.wait_run(f"{out['ssh_host']}:{out['ssh_port']}", key, "ip -4 addr show eth0", GUEST_SECONDS,
                        "SSH through the Machine's outputs")
    assert "inet 10.10.0.2/24" in said
    assert stack.destroy().error is None
