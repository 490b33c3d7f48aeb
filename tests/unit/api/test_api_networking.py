"""Network, NetworkInterface and Prefix as pure API objects: IronCore's defaulting and validation,
the update rules, and a Machine's ephemeral NIC templates checked with the same rules."""

from __future__ import annotations

from typing import Any

import pytest
from ironpool.api import errors
from ironpool.api.ipaddr import mac_problems, normalize_mac, parse_prefix
from ironpool.api.meta import LabelSelectorSpec
from ironpool.api.resources import resolve, strategy_for
from ironpool.api.selectors import compile_selector
from ironpool.api.validation import validate_create, validate_update

NETWORKS, NICS, PREFIXES, MACHINES = resolve("net"), resolve("nic"), resolve("prefix"), resolve("machine")


def causes(info: Any, obj: dict[str, Any], old: dict[str, Any] | None = None) -> dict[str, str]:
    """field -> message of the Invalid error ``obj`` gets."""
    with pytest.raises(errors.Invalid) as exc:
        if old is None:
            validate_create(info, obj)
        else:
            validate_update(info, old, obj)
    return {c.field: c.message for c in exc.value.causes}


def nic(spec: dict[str, Any], name: str = "web") -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "default"}, "spec": spec}


EPHEMERAL = {"ephemeral": {"prefixTemplate": {"spec": {"parentRef": {"name": "lab-v4"}}}}}


def test_kinds_are_served_with_ironcores_names() -> None:
    assert (NETWORKS.api_version, NETWORKS.plural, NETWORKS.namespaced) == (
        "networking.ironcore.dev/v1alpha1", "networks", True)
    assert (NICS.kind, NICS.plural) == ("NetworkInterface", "networkinterfaces")
    assert (PREFIXES.api_version, PREFIXES.plural) == ("ipam.ironcore.dev/v1alpha1", "prefixes")


def test_network_gets_a_provider_id_from_its_uid_and_keeps_it() -> None:
    created = validate_create(NETWORKS, {"metadata": {"name": "lab", "namespace": "default", "uid": "u-1"}})
    assert created["spec"]["providerID"] == "ironpool://networks/u-1"
    assert created["status"] == {"state": "Available"}
    given = validate_create(NETWORKS, {"metadata": {"name": "lab", "namespace": "default", "uid": "u-1"},
                                       "spec": {"providerID": "mine"}})
    assert given["spec"]["providerID"] == "mine"
    changed = {**created, "spec": {"providerID": "other"}}
    assert causes(NETWORKS, changed, created) == {
        "spec.providerID": 'Invalid value: "other": field is immutable'}


def test_network_mode_labels_are_checked() -> None:
    mode = "metadata.labels[networking.ironpool.dev/mode]"
    bridge = "metadata.labels[networking.ironpool.dev/bridge]"
    bad = causes(NETWORKS, {"metadata": {"name": "lab", "namespace": "default",
                                         "labels": {"networking.ironpool.dev/mode": "slirp"}}})
    assert bad[mode].startswith('Unsupported value: "slirp"')
    assert bridge in causes(NETWORKS, {"metadata": {"name": "lab", "namespace": "default",
                                                    "labels": {"networking.ironpool.dev/mode": "bridge"}}})
    validate_create(NETWORKS, {"metadata": {"name": "lab", "namespace": "default", "labels": {
        "networking.ironpool.dev/mode": "bridge", "networking.ironpool.dev/bridge": "br0"}}})


def test_nic_defaults_follow_ironcore() -> None:
    out = validate_create(NICS, nic({"networkRef": {"name": "lab"}, "macAddress": "52-54-00-AA-BB-CC",
                                     "ips": [{"value": "fd00:0::7"}]}))
    assert out["spec"]["ipFamilies"] == ["IPv6"]  # from the literal
    assert out["spec"]["ips"] == [{"value": "fd00::7"}]  # canonical
    assert out["spec"]["macAddress"] == "52:54:00:aa:bb:cc"
    out = validate_create(NICS, nic({"networkRef": {"name": "lab"}, "ipFamilies": ["IPv4"],
                                     "ips": [EPHEMERAL]}))
    template = out["spec"]["ips"][0]["ephemeral"]["prefixTemplate"]["spec"]
    assert template == {"ipFamily": "IPv4", "prefixLength": 32, "parentRef": {"name": "lab-v4"}}


def test_nic_validation_names_each_field() -> None:
    got = causes(NICS, nic({"ipFamilies": ["IPv4", "IPv4"], "macAddress": "01:00:5e:00:00:01", "ips": [
        {"value": "10.0.0.300"},
        {"ephemeral": {"prefixTemplate": {"metadata": {"name": "x"},
                                          "spec": {"parentRef": {"name": "p"}, "prefix": "10.0.0.0/24"}}}},
    ]}))
    assert got["spec.networkRef"] == "Required value: must specify a network ref"
    assert got["spec.ipFamilies[1]"] == 'Duplicate value: "IPv4"'
    assert got["spec.ips[0].value"] == 'Invalid value: "10.0.0.300": must specify a valid ip'
    assert got["spec.ips[1].ephemeral.prefixTemplate.metadata.name"].startswith("Forbidden")
    assert got["spec.ips[1].ephemeral.prefixTemplate.spec.prefix"] == "Forbidden: must be a single IP"
    assert "must be a unicast address" in got["spec.macAddress"]
    assert causes(NICS, nic({"networkRef": {"name": "lab"}, "ips": [EPHEMERAL]}))["spec.ipFamilies"] == (
        "Required value: must specify ip families")


def test_nic_update_rules_follow_ironcore_and_keep_the_allocated_mac() -> None:
    old = validate_create(NICS, nic({"networkRef": {"name": "lab"}, "macAddress": "52:54:00:00:00:01",
                                     "ips": [{"value": "10.0.0.7"}]}))
    replacement = nic({"networkRef": {"name": "lab"}, "ips": [{"value": "10.0.0.8"}],
                       "machineRef": {"name": "m"}, "providerID": "libvirt://x"})
    out = validate_update(NICS, old, replacement)
    assert out["spec"]["macAddress"] == "52:54:00:00:00:01"  # left out of a PUT: kept
    assert out["spec"]["ips"] == [{"value": "10.0.0.8"}]  # addresses, machineRef, providerID may change
    got = causes(NICS, nic({"networkRef": {"name": "other"}, "macAddress": "52:54:00:00:00:02",
                            "ips": [{"value": "10.0.0.7"}]}), old)
    assert set(got) == {"spec.networkRef", "spec.macAddress"}


def test_prefix_rules_follow_ironcore() -> None:
    root = validate_create(PREFIXES, {"metadata": {"name": "r", "namespace": "default"},
                                      "spec": {"prefix": "10.0.0.0/24"}})
    assert root["spec"] == {"ipFamily": "IPv4", "prefix": "10.0.0.0/24"}
    got = causes(PREFIXES, {"metadata": {"name": "r", "namespace": "default"},
                            "spec": {"prefix": "10.0.0.5/24"}})
    assert got == {"spec.prefix": 'Invalid value: "10.0.0.5/24": must specify a valid prefix '
                                  "(host bits set; did you mean 10.0.0.0/24?)"}
    assert "spec.prefix" in causes(PREFIXES, {"metadata": {"name": "r", "namespace": "default"}, "spec": {}})
    child = {"metadata": {"name": "c", "namespace": "default"},
             "spec": {"ipFamily": "IPv4", "parentSelector": {"matchExpressions": [
                 {"key": "tier", "operator": "Exists", "values": ["x"]}]}}}
    got = causes(PREFIXES, child)
    assert got["spec"] == "Invalid value: null: must specify either prefix or prefixLength"
    assert got["spec.parentSelector.matchExpressions[0].values"].startswith("Forbidden")
    too_long = {"ipFamily": "IPv4", "prefixLength": 40, "parentRef": {"name": "r"}}
    assert causes(PREFIXES, {"metadata": {"name": "c", "namespace": "default"}, "spec": too_long}) == {
        "spec.prefixLength": "Invalid value: 40: too large prefix length for IPv4 (max 32)"}


def test_prefix_allocation_is_set_once() -> None:
    pending = validate_create(PREFIXES, {"metadata": {"name": "c", "namespace": "default"},
                                         "spec": {"ipFamily": "IPv4", "prefixLength": 28,
                                                  "parentSelector": {"matchLabels": {"a": "b"}}}})
    allocated = {**pending, "spec": {**pending["spec"], "prefix": "10.0.0.16/28", "parentRef": {"name": "r"}}}
    done = validate_update(PREFIXES, pending, allocated)  # the allocation writes prefix and parentRef once
    moved = {**done, "spec": {**done["spec"], "prefix": "10.0.0.32/28"}}
    assert set(causes(PREFIXES, moved, done)) == {"spec.prefix"}
    replaced = validate_update(PREFIXES, done, pending)  # a PUT of the manifest keeps the allocation
    assert replaced["spec"]["prefix"] == "10.0.0.16/28" and replaced["spec"]["parentRef"] == {"name": "r"}
    network = validate_create(NETWORKS, {"metadata": {"name": "lab", "namespace": "default", "uid": "u-1"}})
    again = validate_update(NETWORKS, network, {"metadata": {"name": "lab", "namespace": "default"}})
    assert again["spec"]["providerID"] == "ironpool://networks/u-1"


def test_machine_templates_are_checked_as_network_interfaces() -> None:
    machine = {"metadata": {"name": "m", "namespace": "default"}, "spec": {
        "machineClassRef": {"name": "small"},
        "networkInterfaces": [
            {"name": "a", "ephemeral": {"networkInterfaceTemplate": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"networkRef": {"name": "lab"}, "ipFamilies": ["IPv4"], "ips": [EPHEMERAL]}}}},
            {"name": "b", "networkInterfaceRef": {"name": "shared"}},
        ]}}
    out = validate_create(MACHINES, machine)
    spec = out["spec"]["networkInterfaces"][0]["ephemeral"]["networkInterfaceTemplate"]["spec"]
    assert spec["ips"][0]["ephemeral"]["prefixTemplate"]["spec"]["prefixLength"] == 32  # defaulted
    tp = "spec.networkInterfaces[0].ephemeral.networkInterfaceTemplate"
    bad = {**machine, "spec": {**machine["spec"], "networkInterfaces": [
        {"name": "a", "ephemeral": {"networkInterfaceTemplate": {
            "metadata": {"name": "x"},
            "spec": {"ips": [{"value": "10.0.0.1"}], "machineRef": {"name": "m"}, "bogus": True}}}},
        {"name": "b"}]}}
    got = causes(MACHINES, bad)
    assert got[f"{tp}.metadata.name"].startswith("Forbidden")
    assert got[f"{tp}.spec.bogus"].startswith("unknown field")
    bad["spec"]["networkInterfaces"][0]["ephemeral"]["networkInterfaceTemplate"]["spec"].pop("bogus")
    got = causes(MACHINES, bad)
    assert got[f"{tp}.spec.networkRef"] == "Required value: must specify a network ref"
    assert got[f"{tp}.spec.machineRef"].startswith("Forbidden")
    assert got["spec.networkInterfaces[1]"].startswith("Required value: must specify exactly one")


def test_machine_addresses_column_reads_nic_status() -> None:
    columns = {c.header: c for c in strategy_for(MACHINES).columns}
    obj = {"status": {"networkInterfaces": [{"name": "a", "ips": ["10.0.0.2"]},
                                            {"name": "b", "ips": ["10.0.1.2", "fd00::2"]}]}}
    assert columns["IPS"].wide and columns["IPS"].get(obj) == "10.0.0.2,10.0.1.2,fd00::2"
    assert columns["IPS"].get({}) is None


def test_addresses_and_selectors() -> None:
    assert parse_prefix("10.0.0.1/24") is None
    assert str(parse_prefix("10.0.0.1/24", strict=False)) == "10.0.0.0/24"
    assert normalize_mac("52-54-00-0A-0B-0C") == "52:54:00:0a:0b:0c" and not mac_problems("52:54:00:0a:0b:0c")
    assert mac_problems("52:54:00:0a:0b") and mac_problems("00:00:00:00:00:00")
    sel = compile_selector(LabelSelectorSpec.model_validate(
        {"matchLabels": {"net": "lab"}, "matchExpressions": [{"key": "tier", "operator": "NotIn",
                                                               "values": ["db"]}]}))
    assert sel.matches({"net": "lab", "tier": "web"}) and not sel.matches({"net": "lab", "tier": "db"})
