# Copyright: ironpool contributors
# SPDX-License-Identifier: Apache-2.0
"""ironpool.iaas.secret, machine_class and volume_class."""

from __future__ import annotations

import base64
from typing import Any

from ansible_collections.ironpool.iaas.plugins.modules import machine_class, secret, volume_class


def test_secret_data_is_exact_and_never_returned(run_module: Any, client: Any) -> None:
    created = run_module(secret.main, {"name": "s", "data": {"a": "alpha", "b": "beta"}})
    assert created.result["secret"]["data"] == {"a": "(hidden)", "b": "(hidden)"}
    assert "alpha" not in repr(created.result)
    assert not run_module(secret.main, {"name": "s", "data": {"a": "alpha", "b": "beta"}}).result["changed"]
    run_module(secret.main, {"name": "s", "data": {"a": "alpha2"}})
    data = client.stored("Secret", "s")["data"]
    assert data == {"a": base64.b64encode(b"alpha2").decode()}


def test_class_capabilities_are_fixed_and_named(run_module: Any, client: Any) -> None:
    same = run_module(machine_class.main, {"name": "x-small", "cpu": "1", "memory": "256Mi"})
    assert not same.result["changed"]
    other = run_module(machine_class.main, {"name": "x-small", "cpu": "2", "memory": "256Mi"})
    assert other.failed and other.result["msg"].startswith("cpu: ")
    assert client.stored("MachineClass", "x-small", None)["capabilities"]["cpu"] == "1"


def test_volume_class_resize_policy_changes_in_place(run_module: Any, client: Any) -> None:
    args = {"name": "fast", "tps": "100Mi", "iops": "1000"}
    assert not run_module(volume_class.main, args).result["changed"]
    out = run_module(volume_class.main, {**args, "resize_policy": "Static"})
    assert out.result["action"] == "updated"
    assert client.stored("VolumeClass", "fast", None)["resizePolicy"] == "Static"
