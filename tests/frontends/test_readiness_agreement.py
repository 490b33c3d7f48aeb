"""The CLI, the Ansible collection and the Pulumi provider declare the same Machine and wait for it to
run; the test plays its poollet, moment by moment, and all three must say "running" at the same
moment - not while its volume is still attaching, not while its status still describes the spec
before a change - and return the object as it was at that moment."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any

import yaml

from tests.frontends.conftest import MACHINES, Fleet, machine_inputs
from tests.helpers.wait import wait_until

NAMES = {"cli": "web-cli", "ansible": "web-ansible", "pulumi": "web-pulumi"}
URN = "pulumi-python:dynamic/ironpool:Machine"
Obj = dict[str, Any]


def status(step: str, state: str, generation: int, volumes_ready: bool) -> Obj:
    """A machinepoollet's status; the Ready condition's message names the moment."""
    attached = {"type": "VolumesReady", "status": "True", "reason": "VolumesReady", "message": "all attached"}
    pending = {"type": "VolumesReady", "status": "False", "reason": "VolumeNotReady: data",
               "message": "not attached: data"}
    volumes = attached if volumes_ready else pending
    return {"state": state, "observedGeneration": generation, "conditions": [
        {"type": "Ready", "status": "True" if state in ("Running", "Shutdown") else "False", "reason": state,
         "message": step}, volumes,
        {"type": "NetworkInterfacesReady", "status": "True", "reason": "NetworkInterfacesReady",
         "message": "all attached"}]}


class Background(threading.Thread):
    """A call that blocks (a Pulumi Create or Update through the plugin), run beside the test."""

    def __init__(self, call: Callable[[], Any]) -> None:
        super().__init__(daemon=True)
        self.call = call
        self.result: Any = None
        self.error: BaseException | None = None
        self.start()

    def run(self) -> None:
        try:
            self.result = self.call()
        except BaseException as exc:  # handed to the test
            self.error = exc

    def outcome(self) -> Any:
        self.join(120)
        assert not self.is_alive(), "the Pulumi call did not return"
        if self.error is not None:
            raise self.error
        return self.result


def machine_manifest(name: str, power: str, machine_class: str = "tiny", volumes: bool = True) -> str:
    spec: Obj = {"machineClassRef": {"name": machine_class}, "power": power}
    if volumes:
        spec["volumes"] = [{"name": "data", "volumeRef": {"name": "data"}}]
    return yaml.safe_dump({"apiVersion": "compute.ironcore.dev/v1alpha1", "kind": "Machine",
                           "metadata": {"name": name, "namespace": "default"}, "spec": spec})


def ansible_task(fleet: Fleet, power: str) -> str:
    return f"""    - name: The Machine, waited for until it runs
      ironpool.iaas.machine:
        name: {NAMES['ansible']}
        machine_class: tiny
        power: '{power}'
        volumes: [{{name: data, volume: data}}]
        wait: true
        wait_for: running
        wait_timeout: 120
      register: declared
    - name: What the module returned
      ansible.builtin.copy:
        content: "{{{{ declared.machine | to_json }}}}"
        dest: {fleet.tmp / 'ansible-machine.json'}
        mode: "0600"
"""


def cli_waits_for_running(fleet: Fleet) -> Any:
    return fleet.cli("wait", f"machine/{NAMES['cli']}", "--for=running", "--timeout=120s", "-o", "json")


def all_waiting(fleet: Fleet, generation_above: int) -> bool:
    """Every front end made its Machine (or changed its spec) and watches it."""
    try:
        generations = [fleet.machine(n)["metadata"]["generation"] for n in NAMES.values()]
    except Exception:  # not all created yet
        return False
    return all(g > generation_above for g in generations) and fleet.open_watches() >= 3


def play(fleet: Fleet, step: Callable[[str, int], Obj]) -> dict[str, Obj]:
    """Write ``step(name, generation)`` as every Machine's status; the objects as written."""
    return {fe: fleet.set_status(name, step(name, fleet.machine(name)["metadata"]["generation"]))
            for fe, name in NAMES.items()}


def ready_message(obj: Obj) -> str:
    return next(c["message"] for c in obj["status"]["conditions"] if c["type"] == "Ready")


def finish(fleet: Fleet, cli_wait: Any, playbook: Any) -> dict[str, Obj]:
    """The objects the CLI printed and the Ansible module returned once they waited."""
    out, err = cli_wait.communicate(timeout=120)
    assert cli_wait.returncode == 0, err
    ran, ran_err = playbook.communicate(timeout=120)
    assert playbook.returncode == 0, ran[-4000:] + ran_err[-2000:]
    return {"cli": json.loads(out), "ansible": json.loads((fleet.tmp / "ansible-machine.json").read_text())}


def test_the_three_front_ends_report_running_at_the_same_moment(fleet: Fleet) -> None:
    plugin = fleet.plugin()
    try:
        # -- declare the same Machine through each, each waiting for it to run ------------------------
        manifest = fleet.tmp / "web-cli.yaml"
        manifest.write_text(machine_manifest(NAMES["cli"], "On"))
        applied = fleet.cli("apply", "-f", str(manifest))
        assert applied.communicate(timeout=60)[0].strip() == \
            "machine.compute.ironcore.dev/web-cli created", applied.stderr
        cli_wait = cli_waits_for_running(fleet)
        playbook = fleet.playbook("declare", ansible_task(fleet, "on"))
        urn = plugin.urn(URN, NAMES["pulumi"])
        inputs, failures = plugin.check(urn, {}, machine_inputs(NAMES["pulumi"]))
        assert failures == []
        created = Background(lambda: plugin.create(urn, inputs))
        wait_until(lambda: all_waiting(fleet, 0), timeout=90, message="all three front ends to wait")

        # -- the poollet's moments: bound, creating, running with its volume not attached, running ------
        for name in NAMES.values():
            fleet.client.bind_raw(MACHINES, name, "MachinePool", "p1", "default")
        play(fleet, lambda n, g: status("creating", "Pending", g, volumes_ready=False))
        play(fleet, lambda n, g: status("volume attaching", "Running", g, volumes_ready=False))
        ready = play(fleet, lambda n, g: status("running", "Running", g, volumes_ready=True))

        got = finish(fleet, cli_wait, playbook)
        rid, outputs = created.outcome()
        for fe in ("cli", "ansible"):
            assert ready_message(got[fe]) == "running", fe
            assert got[fe]["metadata"]["resourceVersion"] == ready[fe]["metadata"]["resourceVersion"], fe
        assert outputs["state"] == "Running" and outputs["machine_pool"] == "p1"
        assert [c["message"] for c in outputs["conditions"] if c["type"] == "Ready"] == ["running"]
        assert outputs["volume_states"] == {}  # the status of this moment lists no volumes

        # -- a spec change whose status lags: each powers its Machine off and waits ---------------------
        before = {fe: fleet.machine(n)["metadata"]["generation"] for fe, n in NAMES.items()}
        manifest.write_text(machine_manifest(NAMES["cli"], "Off"))
        applied = fleet.cli("apply", "-f", str(manifest))
        assert applied.communicate(timeout=60)[0].strip() == "machine.compute.ironcore.dev/web-cli configured"
        cli_wait = cli_waits_for_running(fleet)
        playbook = fleet.playbook("power-off", ansible_task(fleet, "off"))
        outs = {k: v for k, v in outputs.items() if k != "__provider"}
        news, failures = plugin.check(urn, inputs, machine_inputs(NAMES["pulumi"], power="Off"))
        assert failures == []
        updated = Background(lambda: plugin.update(rid, urn, outs, news, inputs))
        wait_until(lambda: all_waiting(fleet, min(before.values())), timeout=90,
                   message="all three front ends to change the spec and wait")

        # The poollet has not caught up: a status that looks done but is of the old spec; then it is.
        play(fleet, lambda n, g: status("old spec", "Shutdown", g - 1, volumes_ready=True))
        done = play(fleet, lambda n, g: status("shut down", "Shutdown", g, volumes_ready=True))

        got = finish(fleet, cli_wait, playbook)
        after = updated.outcome()
        for fe in ("cli", "ansible"):
            assert ready_message(got[fe]) == "shut down", fe
            assert got[fe]["metadata"]["resourceVersion"] == done[fe]["metadata"]["resourceVersion"], fe
        assert after["state"] == "Shutdown" and after["power"] == "Off"
        assert [c["message"] for c in after["conditions"] if c["type"] == "Ready"] == ["shut down"]
    finally:
        plugin.close()

    # Each front end wrote as its own field manager.
    for fe, manager in (("cli", "ironpool"), ("ansible", "ironpool-ansible"), ("pulumi", "ironpool-pulumi")):
        managers = {e["manager"] for e in fleet.machine(NAMES[fe])["metadata"]["managedFields"]}
        assert manager in managers, (fe, managers)
