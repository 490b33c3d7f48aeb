# Copyright: ironpool contributors
# SPDX-License-Identifier: Apache-2.0
"""The machines inventory plugin: hostvars, filters, constructed groups, hostname collisions."""

from __future__ import annotations

from typing import Any

import pytest
from ansible.inventory.data import InventoryData
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar, trust_as_template

from ansible_collections.ironpool.iaas.plugins.inventory import machines
from ansible_collections.ironpool.iaas.tests.unit.fake_api import FakeClient


def machine(name: str, namespace: str = "default", pool: str | None = "host-1", state: str = "Running",
            power: str = "On") -> dict[str, Any]:
    spec: dict[str, Any] = {"machineClassRef": {"name": "x-small"}, "power": power}
    if pool:
        spec["machinePoolRef"] = {"name": pool}
    return {"apiVersion": "compute.ironcore.dev/v1alpha1", "kind": "Machine",
            "metadata": {"name": name, "namespace": namespace, "labels": {"app": "web"}},
            "spec": spec}


@pytest.fixture
def plugin(monkeypatch: pytest.MonkeyPatch) -> Any:
    fake = FakeClient.with_defaults()
    for ns, name, pool, state, power in [("default", "web-1", "host-1", "Running", "On"),
                                         ("default", "web-2", "host-2", "Shutdown", "Off"),
                                         ("other", "web-1", None, "", "On")]:
        fake.seed(machine(name, ns, pool, state, power))
        if state:
            fake.set_status("Machine", name, {"state": state}, namespace=ns)
    monkeypatch.setattr(machines, "connect", lambda params: fake)
    inv = machines.InventoryModule()
    inv.inventory = InventoryData()
    inv.templar = Templar(loader=DataLoader())
    inv._options = {
        "server": None, "token": None, "ca_file": None, "validate_certs": None, "config_file": None,
        "request_timeout": 30, "namespaces": [], "label_selector": None, "pools": [], "states": [],
        "hostnames": "name", "ssh_user": "root", "strict": False, "compose": {}, "groups": {},
        "keyed_groups": [], "leading_separator": True, "use_extra_vars": False, "cache": False,
    }
    return inv


def test_hostvars_groups_and_collisions(plugin: Any) -> None:
    # Expressions read from an inventory file are trusted templates; these are written here.
    plugin._options["keyed_groups"] = [{"key": trust_as_template("ironpool_pool"), "prefix": "pool",
                                        "separator": "_"}]
    plugin._options["groups"] = {"off": trust_as_template("ironpool_power == 'Off'")}
    plugin.populate(plugin.fetch())
    hosts = plugin.inventory.hosts
    assert sorted(hosts) == ["other_web-1", "web-1", "web-2"]
    web1 = hosts["web-1"].vars
    assert web1["ironpool_class"] == "x-small" and web1["ironpool_pool"] == "host-1"
    assert web1["ironpool_state"] == "Running" and web1["ironpool_labels"] == {"app": "web"}
    assert "ansible_host" not in web1  # no addresses before networking exists
    groups = plugin.inventory.groups
    assert sorted(h.name for h in groups["pool_host_1"].get_hosts()) == ["web-1"]
    assert [h.name for h in groups["off"].get_hosts()] == ["web-2"]


def test_filters_by_namespace_pool_and_state(plugin: Any) -> None:
    plugin._options.update(namespaces=["default"], states=["Running", "Shutdown"], pools=["host-2"])
    assert [m["metadata"]["name"] for m in plugin.fetch()] == ["web-2"]


def test_ssh_goes_to_the_reported_forward_else_the_first_address() -> None:
    m = machine("a")
    m["status"] = {"networkInterfaces": [{"name": "eth0", "ips": ["192.0.2.7"]}]}
    v = machines.hostvars(m)
    assert (v["ansible_host"], v["ansible_port"], v["ansible_user"]) == ("192.0.2.7", 22, "root")
    m["metadata"]["annotations"] = {"machinepoollet.ironpool.dev/ssh-endpoint": "127.0.0.1:40022"}
    v = machines.hostvars(m, "core")
    assert (v["ansible_host"], v["ansible_port"], v["ansible_user"]) == ("127.0.0.1", 40022, "core")
    assert v["ironpool_addresses"] == ["192.0.2.7"]


def test_each_group_expression_is_compiled_once_for_all_hosts(plugin: Any) -> None:
    plugin._options["groups"] = {"off": trust_as_template("ironpool_power == 'Off'")}
    env = plugin.templar._engine.environment
    compiled: list[str] = []
    original = env.compile_expression

    def counting(source: str, undefined_to_none: bool = True) -> Any:
        compiled.append(str(source))
        return original(source, undefined_to_none)

    env.compile_expression = counting
    plugin.populate(plugin.fetch())
    assert compiled.count("ironpool_power == 'Off'") == 1
    assert [h.name for h in plugin.inventory.groups["off"].get_hosts()] == ["web-2"]
