# Copyright: ironpool contributors
# SPDX-License-Identifier: Apache-2.0
"""ironpool.iaas.manifest (validated as a whole before any write) and the info modules."""

from __future__ import annotations

from typing import Any

import pytest

from ansible_collections.ironpool.iaas.plugins.modules import machine_info, machine_pool_info, manifest

MANIFEST = """
apiVersion: storage.ironcore.dev/v1alpha1
kind: Volume
metadata: {name: data}
spec: {volumeClassRef: {name: fast}, resources: {storage: 1Gi}}
---
apiVersion: compute.ironcore.dev/v1alpha1
kind: Machine
metadata: {name: web, labels: {app: web}}
spec:
  machineClassRef: {name: x-small}
  volumes: [{name: data, volumeRef: {name: data}}]
"""


@pytest.fixture(autouse=True)
def no_scheduler(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(manifest, "predict_pools", lambda client, objects, namespace: {
        (o["kind"], f"{namespace}/{o['metadata']['name']}"): {"pool": "host-1", "reason": "fits"}
        for o in objects if o["kind"] in ("Machine", "Volume")})


def test_apply_is_idempotent_and_absent_deletes_in_reverse(run_module: Any, client: Any) -> None:
    first = run_module(manifest.main, {"definition": MANIFEST})
    assert [r["action"] for r in first.result["results"]] == ["created", "created"]
    again = run_module(manifest.main, {"definition": MANIFEST})
    assert not again.result["changed"]
    gone = run_module(manifest.main, {"definition": MANIFEST, "state": "absent"})
    assert [r["action"] for r in gone.result["results"]] == ["deleted", "deleted"]
    assert [w[1] for w in client.writes[-2:]] == ["Machine", "Volume"]


def test_check_mode_predicts_pools_and_writes_nothing(run_module: Any, client: Any) -> None:
    out = run_module(manifest.main, {"definition": MANIFEST}, check_mode=True, diff=True)
    assert out.result["changed"] and [r["pool"] for r in out.result["results"]] == ["host-1", "host-1"]
    assert len(out.result["diff"]) == 2 and client.writes == []
    headers = [d.get("after_header") for d in out.result["diff"]]
    assert headers[0].endswith("would land on pool host-1 (the scheduler's placement preview)")


def test_one_bad_document_fails_before_anything_is_written(run_module: Any, client: Any) -> None:
    bad = MANIFEST + "---\napiVersion: compute.ironcore.dev/v1alpha1\nkind: Machine\n" \
                     "metadata: {name: bad}\nspec: {machineClassRef: {name: x-small}, power: Maybe}\n"
    out = run_module(manifest.main, {"definition": bad})
    assert out.failed
    assert out.result["msg"].startswith("definition (document 2): Machine default/bad: spec.power")
    assert client.writes == []


def test_machine_info_filters_and_waits_on_conditions(run_module: Any, client: Any) -> None:
    run_module(manifest.main, {"definition": MANIFEST})
    listed = run_module(machine_info.main, {"label_selectors": ["app=web"]})
    assert [m["metadata"]["name"] for m in listed.result["machines"]] == ["web"]
    assert run_module(machine_info.main, {"label_selectors": ["app=db"]}).result["machines"] == []
    client.set_status("Machine", "web", {"state": "Running", "conditions": [
        {"type": "Ready", "status": "True", "reason": "Running"}]})
    ready = run_module(machine_info.main, {"name": "web", "wait": True,
                                           "wait_condition": {"type": "Ready", "status": "True"}})
    assert not ready.failed and len(ready.result["machines"]) == 1
    late = run_module(machine_info.main, {"name": "web", "wait": True, "wait_timeout": 1,
                                          "wait_condition": {"type": "Ready", "reason": "Elsewhere"}})
    assert late.failed and late.result["msg"] == (
        "Machine default/web did not meet the wait condition within 1s; last seen: exists; no condition "
        "Ready=True (Elsewhere) yet")
    running = run_module(machine_info.main, {"name": "web", "wait": True, "wait_timeout": 1,
                                             "wait_for": "running"})
    assert running.failed and running.result["msg"] == (
        "Machine default/web did not become running within 1s; last seen: not scheduled yet")


def test_pool_info_reports_free_per_class(run_module: Any, client: Any) -> None:
    client.seed({"apiVersion": "compute.ironcore.dev/v1alpha1", "kind": "MachinePool",
                 "metadata": {"name": "h1"}})
    allocatable = {"cpu": "2", "class/machine.x-small": "2"}
    client.set_status("MachinePool", "h1", {"state": "Ready", "allocatable": allocatable}, namespace=None)
    out = run_module(machine_pool_info.main, {})
    assert out.result["machine_pools"][0]["free"] == {"x-small": 2}
