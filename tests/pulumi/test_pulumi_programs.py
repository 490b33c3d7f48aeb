"""Programs through the mini engine and the real plugin against an apiserver (no pools): invalid
inputs fail preview and ``up`` naming the property, before anything invalid exists; ``Machine.get``
reads an existing Machine without managing it."""

from __future__ import annotations

from pathlib import Path

import pytest
from ironpool.api.resources import resolve
from ironpool.client import Client, ClientConfig
from pulumi_stack import Stack

from tests.conftest import ApiServer

MACHINES, CLASSES, VOLUMES = resolve("machines"), resolve("machineclasses"), resolve("volumes")

INVALID = {
    "name": ('ironpool.Machine("Bad_Name", machine_class=tiny, wait_for="none")',
             "Bad_Name: name: metadata.name: Invalid value"),
    "machine_class": ('ironpool.Machine("lost", machine_class="no-such-class", wait_for="none")',
                      "lost: machine_class: MachineClass 'no-such-class' does not exist (known: "),
    "size": ('ironpool.Volume("data", volume_class="fast", size="12x", wait_for="none")',
             "data: size: spec.resources.storage: Invalid value"),
}
PROGRAM = '''
import ironpool_pulumi as ironpool

tiny = ironpool.MachineClass("tiny", capabilities={{"cpu": 1, "memory": "256Mi"}})
ironpool.VolumeClass("fast", capabilities={{"tps": "1Mi", "iops": 10}})
{resource}
'''

GET = '''
import pulumi
import ironpool_pulumi as ironpool

existing = ironpool.Machine.get("existing", "default/web")
pulumi.export("class", existing.machine_class)
pulumi.export("uid", existing.uid)
pulumi.export("labels", existing.labels)
pulumi.export("ips", existing.ip_addresses)
pulumi.export("ssh", pulumi.Output.concat(existing.ssh_host, ":", existing.ssh_port.apply(str)))
'''


def stack(apiserver: ApiServer, tmp_path: Path, source: str) -> Stack:
    program = tmp_path / "program"
    program.mkdir()
    (program / "Pulumi.yaml").write_text("name: programs\nruntime: python\n")
    (program / "__main__.py").write_text(source)
    return Stack(program=program, workdir=tmp_path,
                 config={"ironpool:server": apiserver.url, "ironpool:token": apiserver.admin_token},
                 env={"IRONPOOL_CONFIG": str(tmp_path / "absent.yaml")})


@pytest.mark.parametrize("prop", sorted(INVALID))
def test_invalid_inputs_fail_preview_and_up_naming_the_property(apiserver: ApiServer, tmp_path: Path,
                                                                prop: str) -> None:
    client = Client(ClientConfig(server=apiserver.url, token=apiserver.admin_token))
    resource, message = INVALID[prop]
    s = stack(apiserver, tmp_path, PROGRAM.format(resource=resource))
    preview = s.preview()
    assert preview.error is not None and message in preview.error, preview.error
    assert client.list_raw(CLASSES).items == []  # a preview writes nothing

    up = s.up()
    assert up.error is not None and message in up.error, up.error
    # The invalid object never reached the API, and the stack does not claim it.
    assert client.list_raw(MACHINES, "default").items == []
    assert client.list_raw(VOLUMES, "default").items == []
    assert {name for _, name in up.log} <= {"tiny", "fast"}


def test_get_reads_an_existing_machine_without_managing_it(apiserver: ApiServer, tmp_path: Path) -> None:
    client = Client(ClientConfig(server=apiserver.url, token=apiserver.admin_token))
    client.create_raw(CLASSES, {"metadata": {"name": "tiny"}, "capabilities": {"cpu": "1", "memory": "1Gi"}})
    # As its machinepoollet reports a Machine whose NIC's SSH port is forwarded on 127.0.0.1.
    forward = {"machinepoollet.ironpool.dev/ssh-endpoint": "127.0.0.1:40022"}
    web = client.create_raw(MACHINES, {"metadata": {"name": "web", "namespace": "default",
                                                    "labels": {"a": "b"}, "annotations": forward},
                                       "spec": {"machineClassRef": {"name": "tiny"}}}, "default")
    client.patch_raw(MACHINES, "web", {"status": {"networkInterfaces": [
        {"name": "primary", "state": "Attached", "ips": ["10.10.0.2"]}]}}, "default", subresource="status")
    s = stack(apiserver, tmp_path, GET)
    up = s.up()
    assert up.error is None, up.error
    assert up.log == [("read", "existing")]
    assert up.outputs == {"class": "tiny", "uid": web["metadata"]["uid"], "labels": {"a": "b"},
                          "ips": ["10.10.0.2"], "ssh": "127.0.0.1:40022"}
    assert s.state()["resources"] == {}
    assert s.destroy().log == []
    assert client.get_raw(MACHINES, "web", "default")["metadata"]["uid"] == web["metadata"]["uid"]
