# Copyright: ironpool contributors
# SPDX-License-Identifier: Apache-2.0
"""What modules return: addresses, pool summaries, redacted Secrets."""

from __future__ import annotations

from ansible_collections.ironpool.iaas.plugins.module_utils.views import (
    addresses,
    machine_summary,
    pool_summary,
    redact_secret,
    secret_diff,
)


def test_addresses_come_from_the_interfaces_status_once_there() -> None:
    assert addresses({"status": {}}) == []
    machine = {"status": {"networkInterfaces": [{"name": "a", "ips": ["10.0.0.5", "fd00::5"]},
                                                {"name": "b", "ips": ["10.0.0.5"]}, {"name": "c"}]}}
    assert addresses(machine) == ["10.0.0.5", "fd00::5"]
    assert machine_summary(machine)["addresses"] == ["10.0.0.5", "fd00::5"]


def test_pool_summary_splits_shared_resources_from_free_per_class() -> None:
    pool = {"metadata": {"name": "host-1", "labels": {"zone": "a"}},
            "status": {"state": "Ready", "availableMachineClasses": [{"name": "x-small"}],
                       "capacity": {"cpu": "2", "memory": "4Gi", "class/machine.x-small": "2"},
                       "allocatable": {"cpu": "2", "memory": "4Gi", "class/machine.x-small": "1"}}}
    summary = pool_summary(pool, "class/machine.", "machine_pool", counts=True)
    assert summary["capacity"] == {"cpu": "2", "memory": "4Gi"}
    assert summary["free"] == {"x-small": 1}
    assert summary["available_classes"] == ["x-small"] and summary["machine_pool"] is pool


def test_secrets_show_keys_and_which_changed_never_values() -> None:
    before = {"kind": "Secret", "data": {"a": "QQ==", "b": "Qg=="}}
    after = {"kind": "Secret", "data": {"a": "QQ==", "b": "Qw==", "c": "RA=="}}
    assert redact_secret(before)["data"] == {"a": "(hidden)", "b": "(hidden)"}
    diff = secret_diff(before, after)
    assert diff["before"]["data"] == {"a": "(hidden)", "b": "(hidden)"}
    assert diff["after"]["data"] == {"a": "(hidden)", "b": "(hidden, changed)", "c": "(hidden, changed)"}
    assert "Qw==" not in repr(diff)
