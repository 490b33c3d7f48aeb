# Copyright: ironpool contributors
# SPDX-License-Identifier: Apache-2.0
"""ironpool.iaas.volume_snapshot: create, check mode, diff, a fixed source, wait for Ready; and the
volume module restoring from a snapshot."""

from __future__ import annotations

from typing import Any

from ansible_collections.ironpool.iaas.plugins.modules import volume, volume_snapshot

SNAP = {"name": "monday", "volume": "data"}


def test_check_mode_writes_nothing_then_create_and_unchanged(run_module: Any, client: Any) -> None:
    checked = run_module(volume_snapshot.main, SNAP, check_mode=True, diff=True)
    assert checked.result["changed"] and checked.result["action"] == "created"
    assert checked.result["diff"]["after"]["spec"] == {"volumeRef": {"name": "data"}}
    assert client.writes == []
    made = run_module(volume_snapshot.main, SNAP)
    assert made.result["action"] == "created"
    assert client.stored("VolumeSnapshot", "monday")["spec"] == {"volumeRef": {"name": "data"}}
    assert not run_module(volume_snapshot.main, SNAP).result["changed"]
    assert not run_module(volume_snapshot.main, {"name": "monday"}).result["changed"]  # source optional then


def test_the_source_is_fixed_unless_forced(run_module: Any, client: Any) -> None:
    run_module(volume_snapshot.main, SNAP)
    out = run_module(volume_snapshot.main, {**SNAP, "volume": "other"})
    assert out.failed and out.result["msg"].startswith("volume: ") and "force=true" in out.result["msg"]
    assert client.stored("VolumeSnapshot", "monday")["spec"]["volumeRef"] == {"name": "data"}
    forced = run_module(volume_snapshot.main, {**SNAP, "volume": "other", "force": True})
    assert forced.result["action"] == "recreated"
    assert client.stored("VolumeSnapshot", "monday")["spec"]["volumeRef"] == {"name": "other"}


def test_bad_input_names_the_option_and_creates_nothing(run_module: Any, client: Any) -> None:
    missing = run_module(volume_snapshot.main, {"name": "monday"})
    assert missing.failed and missing.result["msg"].startswith("volume: required")
    bad = run_module(volume_snapshot.main, {**SNAP, "volume": "Not_A_Name"})
    assert bad.failed and bad.result["msg"].startswith("volume: ")
    assert client.writes == []


def test_wait_returns_ready_with_its_id_and_reports_a_failure(run_module: Any, client: Any) -> None:
    run_module(volume_snapshot.main, SNAP)
    client.set_status("VolumeSnapshot", "monday",
                      {"state": "Ready", "snapshotID": "ironpool-volume://abc", "size": "1073741824"})
    out = run_module(volume_snapshot.main, {**SNAP, "wait": True, "wait_timeout": 5})
    assert not out.failed
    assert (out.result["state"], out.result["snapshot_id"], out.result["size"]) == (
        "Ready", "ironpool-volume://abc", "1073741824")
    client.set_status("VolumeSnapshot", "monday", {"state": "Failed"})
    failed = run_module(volume_snapshot.main, {**SNAP, "wait": True, "wait_timeout": 60})
    assert failed.failed and "failed at its volume pool" in failed.result["msg"]
    assert failed.result["state"] == "Failed"


def test_absent_deletes_and_is_idempotent(run_module: Any, client: Any) -> None:
    run_module(volume_snapshot.main, SNAP)
    gone = run_module(volume_snapshot.main, {"name": "monday", "state": "absent"})
    assert gone.result["action"] == "deleted" and client.stored("VolumeSnapshot", "monday") is None
    assert not run_module(volume_snapshot.main, {"name": "monday", "state": "absent"}).result["changed"]


def test_volume_restores_from_a_snapshot_and_not_also_from_an_image(run_module: Any, client: Any) -> None:
    data = {"name": "restored", "volume_class": "fast", "size": "1Gi", "snapshot": "monday"}
    assert run_module(volume.main, data).result["action"] == "created"
    stored = client.stored("Volume", "restored")
    assert stored["spec"]["dataSource"] == {"volumeSnapshotRef": {"name": "monday"}}
    other = run_module(volume.main, {**data, "snapshot": "tuesday"})
    assert other.failed and other.result["msg"].startswith("snapshot: ")
    assert "force=true" in other.result["msg"]
    both = run_module(volume.main, {**data, "name": "x", "image": "tiny"})
    assert both.failed and "mutually exclusive" in both.result["msg"]
