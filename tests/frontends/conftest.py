"""The three front ends side by side against one real apiserver: the CLI (``ironpool`` as a
subprocess), the Ansible collection (real ``ansible-playbook``) and the Pulumi provider (the real
``python -m pulumi.dynamic`` plugin), over a fleet of one MachinePool whose status the test writes
(no poollet: the test plays it, so it decides every moment of a Machine's status), and, where a test
asks for it, the real ``ironpool scheduler`` as a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from ironpool.api.resources import resolve
from ironpool.client import Client, ClientConfig

from tests.ansible.conftest import COLLECTIONS
from tests.conftest import ApiServer
from tests.helpers.runtimes import stop_process
from tests.pulumi.pulumi_plugin import Plugin, provider_payload

BIN = Path(sys.executable).parent
MACHINES, POOLS, CLASSES = resolve("machines"), resolve("machinepools"), resolve("machineclasses")
Obj = dict[str, Any]


@dataclass
class Fleet:
    """An apiserver with the classes ``tiny`` (fits), ``big`` (offered, more cpu than the pool has)
    and ``huge`` (offered by no pool), and the pool ``p1`` (4 cpu, 8Gi) offering tiny and big."""

    apiserver: ApiServer
    tmp: Path
    client: Client = field(init=False)

    def __post_init__(self) -> None:
        self.client = Client(ClientConfig(server=self.apiserver.url, token=self.apiserver.admin_token))

    @property
    def env(self) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("IRONPOOL_", "ANSIBLE_"))}
        env.update(IRONPOOL_SERVER=self.apiserver.url, IRONPOOL_TOKEN=self.apiserver.admin_token,
                   IRONPOOL_CONFIG=str(self.tmp / "no-client-config.yaml"),
                   ANSIBLE_COLLECTIONS_PATH=str(COLLECTIONS), ANSIBLE_LOCALHOST_WARNING="false",
                   ANSIBLE_INVENTORY_UNPARSED_WARNING="false", ANSIBLE_NOCOLOR="1")
        return env

    def cli(self, *args: str) -> subprocess.Popen[str]:
        """``ironpool ARGS`` running."""
        return subprocess.Popen([sys.executable, "-m", "ironpool.cli.main", *args], env=self.env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def playbook(self, name: str, tasks: str) -> subprocess.Popen[str]:
        """``ansible-playbook`` of a one-play playbook on localhost with these (indented) tasks, running."""
        path = self.tmp / f"{name}.yml"
        path.write_text("- hosts: localhost\n  connection: local\n  gather_facts: false\n  tasks:\n" + tasks)
        return subprocess.Popen([str(BIN / "ansible-playbook"), str(path)], env=self.env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def plugin(self) -> Plugin:
        """The Pulumi plugin, configured like a stack whose config names this apiserver."""
        plugin = Plugin(env={"IRONPOOL_CONFIG": str(self.tmp / "no-client-config.yaml")})
        config = {"ironpool:server": self.apiserver.url, "ironpool:token": self.apiserver.admin_token}
        plugin.configure(config, ("ironpool:token",))
        return plugin

    def open_watches(self) -> float:
        """The apiserver's open watch streams, from its metrics."""
        text = httpx.get(f"{self.apiserver.url}/metrics", headers=self.apiserver.headers(), timeout=5).text
        for line in text.splitlines():
            if line.startswith("ironpool_apiserver_watchers "):
                return float(line.split()[1])
        return 0.0

    def machine(self, name: str) -> Obj:
        return self.client.get_raw(MACHINES, name, "default")

    def set_status(self, name: str, status: Obj) -> Obj:
        """What the machinepoollet would write (replacing the conditions wholesale, as it does)."""
        return self.client.patch_raw(MACHINES, name, {"status": status}, "default", subresource="status")


@pytest.fixture
def fleet(apiserver: ApiServer, tmp_path: Path) -> Iterator[Fleet]:
    f = Fleet(apiserver, tmp_path)
    for name, cpu in (("tiny", "1"), ("big", "8"), ("huge", "64")):
        f.client.create_raw(CLASSES, {"metadata": {"name": name},
                                      "capabilities": {"cpu": cpu, "memory": "256Mi"}})
    f.client.create_raw(POOLS, {"metadata": {"name": "p1"}, "spec": {"providerID": "test://p1"}})
    resources = {"cpu": "4", "memory": "8Gi"}
    f.client.patch_raw(POOLS, "p1", {"status": {
        "state": "Ready", "conditions": [{"type": "Ready", "status": "True", "reason": "Test"}],
        "availableMachineClasses": [{"name": "tiny"}, {"name": "big"}],
        "capacity": resources, "allocatable": resources}}, subresource="status")
    try:
        yield f
    finally:
        f.client.close()


@pytest.fixture
def scheduler(fleet: Fleet) -> Iterator[subprocess.Popen[bytes]]:
    """The real ``ironpool scheduler`` against the fleet's apiserver."""
    log = open(fleet.tmp / "scheduler.log", "ab")  # noqa: SIM115 - handed to the child process
    proc = subprocess.Popen([sys.executable, "-m", "ironpool.cli.main", "scheduler", "--server",
                             fleet.apiserver.url, "--token-file", str(fleet.apiserver.token_file),
                             "--no-leader-elect"], stdout=log, stderr=subprocess.STDOUT, env=fleet.env)
    try:
        yield proc
    finally:
        stop_process(proc)
        log.close()


def machine_inputs(name: str, **extra: Any) -> Obj:
    """The Pulumi Machine of the same spec as the other front ends declare."""
    from ironpool_pulumi.machine import MachineProvider

    return {"__provider": provider_payload(MachineProvider()), "name": name, "machine_class": "tiny",
            "power": "On", "volumes": [{"name": "data", "volume": "data"}], "wait_for": "running",
            "wait_timeout": 120, **extra}
