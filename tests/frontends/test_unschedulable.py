"""What each front end tells a user who waits for a Machine the real scheduler cannot place: a class no
pool offers fails the CLI's wait (with ``--fail-on-unschedulable``), an Ansible task and a Pulumi
create within seconds, naming the scheduler's reason; a Machine that only waits for room keeps
waiting, shows why, and is placed once there is room."""

from __future__ import annotations

import subprocess
import time
from typing import Any

import pytest

from tests.frontends.conftest import MACHINES, POOLS, Fleet, machine_inputs
from tests.frontends.test_readiness_agreement import Background, machine_manifest
from tests.pulumi.pulumi_plugin import PluginError

URN = "pulumi-python:dynamic/ironpool:Machine"
NOT_OFFERED = "0/1 pools: 1 do not offer class huge"
NO_ROOM = "0/1 pools: 1 have too little cpu"


def ansible_machine(name: str, machine_class: str, wait_timeout: int) -> str:
    return f"""    - ironpool.iaas.machine:
        name: {name}
        machine_class: {machine_class}
        wait: true
        wait_timeout: {wait_timeout}
"""


def pulumi_create(fleet: Fleet, name: str, machine_class: str, wait_timeout: int) -> Background:
    plugin = fleet.plugin()
    urn = plugin.urn(URN, name)
    inputs, failures = plugin.check(urn, {}, machine_inputs(name, machine_class=machine_class, volumes=None,
                                                             wait_timeout=wait_timeout))
    assert failures == []

    def create() -> Any:
        try:
            return plugin.create(urn, inputs)
        finally:
            plugin.close()

    return Background(create)


def apply(fleet: Fleet, name: str, machine_class: str) -> None:
    manifest = fleet.tmp / f"{name}.yaml"
    manifest.write_text(machine_manifest(name, "On", machine_class, volumes=False))
    applied = fleet.cli("apply", "-f", str(manifest))
    _, err = applied.communicate(timeout=60)
    assert applied.returncode == 0, err


def finished(proc: subprocess.Popen[str]) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=120)
    return proc.returncode, out, err


@pytest.mark.usefixtures("scheduler")
def test_a_class_no_pool_offers_fails_every_front_end_within_seconds_naming_the_reason(fleet: Fleet) -> None:
    start = time.monotonic()
    apply(fleet, "huge-cli", "huge")
    cli_wait = fleet.cli("wait", "machine/huge-cli", "--for=running", "--timeout=300s",
                         "--fail-on-unschedulable")
    playbook = fleet.playbook("huge", ansible_machine("huge-ansible", "huge", 300))
    created = pulumi_create(fleet, "huge-pulumi", "huge", 600)

    code, _, err = finished(cli_wait)
    assert code == 1 and err.splitlines()[-1] == (
        f"error: machine.compute.ironcore.dev/huge-cli: Machine huge-cli cannot be scheduled: {NOT_OFFERED}")
    assert f"machine.compute.ironcore.dev/huge-cli: not scheduled: {NOT_OFFERED}" in err  # the progress
    code, out, _ = finished(playbook)
    assert code == 2, out[-3000:]
    assert f"Machine default/huge-ansible cannot be scheduled: {NOT_OFFERED}. It stays Pending" in out
    with pytest.raises(PluginError) as failed:
        created.outcome()
    assert failed.value.details.startswith(
        f"ironpool: Machine default/huge-pulumi cannot be scheduled: {NOT_OFFERED} (no pool can take it")
    assert "It was deleted again, so nothing is left behind" in failed.value.details
    # Each ended long before its wait_timeout (300 s, 300 s, 600 s).
    assert time.monotonic() - start < 120
    names = sorted(m["metadata"]["name"] for m in fleet.client.list_raw(MACHINES, "default").items)
    # The CLI and Ansible leave their Machines Pending; Pulumi rolls its create back.
    assert names == ["huge-ansible", "huge-cli"]


@pytest.mark.usefixtures("scheduler")
def test_a_machine_waiting_for_room_keeps_waiting_says_why_and_is_placed_once_there_is_room(
        fleet: Fleet) -> None:
    playbook = fleet.playbook("big", ansible_machine("big-ansible", "big", 8))
    created = pulumi_create(fleet, "big-pulumi", "big", 8)
    code, out, _ = finished(playbook)
    assert code == 2 and (f"Machine default/big-ansible did not become running within 8s; last seen: not "
                          f"scheduled: {NO_ROOM}") in out, out[-3000:]
    with pytest.raises(PluginError) as failed:
        created.outcome()
    assert failed.value.details.startswith(
        f"ironpool: Machine default/big-pulumi did not become ready within 8s (wait_for=running): not "
        f"scheduled: {NO_ROOM}. It was deleted again")

    # The CLI waits with --fail-on-unschedulable too, and shows the reason while it waits; once a pool
    # has room, the scheduler places the Machine and the wait ends.
    apply(fleet, "big-cli", "big")
    cli_wait = fleet.cli("wait", "machine/big-cli", "--for=scheduled", "--timeout=120s",
                         "--fail-on-unschedulable")
    assert cli_wait.stderr is not None
    shown = next(line for line in cli_wait.stderr if NO_ROOM in line)  # the progress, as it waits
    assert shown.strip() == f"machine.compute.ironcore.dev/big-cli: not scheduled: {NO_ROOM}"
    assert cli_wait.poll() is None
    more = {"cpu": "16", "memory": "8Gi"}
    fleet.client.patch_raw(POOLS, "p1", {"status": {"capacity": more, "allocatable": more}},
                           subresource="status")
    code, out, err = finished(cli_wait)
    assert code == 0 and out.strip() == "machine.compute.ironcore.dev/big-cli condition met", err
    assert fleet.machine("big-cli")["spec"]["machinePoolRef"] == {"name": "p1"}
    # The one the Ansible task left Pending is placed too, now that there is room.
    assert fleet.machine("big-ansible")["spec"]["machinePoolRef"] == {"name": "p1"}
