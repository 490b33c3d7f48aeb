"""VolumeSnapshot, and a Volume restored from one, through the real plugin (``python -m
pulumi.dynamic``) over gRPC against a real apiserver. No volumepoollet runs here: where a wait for
Ready is tested, this test reports the status a poollet would (through the status subresource)."""

from __future__ import annotations

import threading
from typing import Any

import pytest
from ironpool.api.errors import NotFound
from ironpool.api.resources import resolve
from ironpool.api.storage import VOLUME_POOL_LABEL
from ironpool.client import Client, ClientConfig
from ironpool_pulumi.classes import VolumeClassProvider
from ironpool_pulumi.volume import VolumeProvider
from ironpool_pulumi.volume_snapshot import VolumeSnapshotProvider
from pulumi_plugin import DIFF_NONE, DIFF_SOME, Plugin, PluginError, Props, provider_payload

from tests.conftest import ApiServer
from tests.helpers.wait import wait_until

SNAPSHOTS, VOLUMES = resolve("volumesnapshots"), resolve("volumes")
TYPE = "pulumi-python:dynamic/ironpool:{}"


def client_of(server: ApiServer) -> Client:
    return Client(ClientConfig(server=server.url, token=server.admin_token))


def snapshot_props(**extra: Any) -> dict[str, Any]:
    return {"__provider": provider_payload(VolumeSnapshotProvider()), "name": "monday", "volume": "data",
            "wait_for": "none", **extra}


def create(plugin: Plugin, kind: str, props: dict[str, Any]) -> tuple[str, Props, Props]:
    urn = plugin.urn(TYPE.format(kind), props["name"])
    inputs, failures = plugin.check(urn, {}, props)
    assert failures == [], failures
    rid, outs = plugin.create(urn, inputs)
    return rid, inputs, outs


def report_when_created(client: Client, name: str, status: dict[str, Any]) -> threading.Thread:
    """Stand in for the volumepoollet: once the snapshot exists, report ``status`` (within 30 s)."""

    def reported() -> bool:
        try:
            client.patch_raw(SNAPSHOTS, name, {"status": status}, "default", subresource="status")
        except NotFound:
            return False
        return True

    def run() -> None:
        wait_until(reported, timeout=30, message=f"VolumeSnapshot {name} to report on")

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def test_snapshot_lifecycle_replace_on_volume_and_labels_in_place(plugin: Plugin,
                                                                   apiserver: ApiServer) -> None:
    client = client_of(apiserver)
    rid, inputs, outs = create(plugin, "VolumeSnapshot", snapshot_props(labels={"a": "b"}))
    assert rid == "default/monday" and outs["state"] == "Pending" and outs.get("snapshot_id") is None
    assert client.get_raw(SNAPSHOTS, "monday", "default")["spec"] == {"volumeRef": {"name": "data"}}
    urn = plugin.urn(TYPE.format("VolumeSnapshot"), "monday")
    assert plugin.diff(rid, urn, outs, inputs, inputs).changes == DIFF_NONE
    other, _ = plugin.check(urn, inputs, snapshot_props(volume="other", labels={"a": "b"}))
    d = plugin.diff(rid, urn, outs, other, inputs)
    assert list(d.replaces) == ["volume"] and d.deleteBeforeReplace
    relabelled, _ = plugin.check(urn, inputs, snapshot_props(labels={"a": "c"}))
    d = plugin.diff(rid, urn, outs, relabelled, inputs)
    assert d.changes == DIFF_SOME and list(d.replaces) == []
    plugin.update(rid, urn, outs, relabelled, inputs)
    assert client.get_raw(SNAPSHOTS, "monday", "default")["metadata"]["labels"] == {"a": "c"}
    plugin.delete(rid, urn, outs, relabelled)
    with pytest.raises(NotFound):
        client.get_raw(SNAPSHOTS, "monday", "default")


def test_bad_inputs_fail_in_check_naming_the_property(plugin: Plugin, apiserver: ApiServer) -> None:
    urn = plugin.urn(TYPE.format("VolumeSnapshot"), "x")
    for props, prop in ((snapshot_props(volume=None), "volume"),
                        (snapshot_props(volume="Bad_Name"), "volume"),
                        (snapshot_props(wait_for="forever"), "wait_for")):
        _, failures = plugin.check(urn, {}, props)
        assert prop in dict(failures), failures
    assert client_of(apiserver).list_raw(SNAPSHOTS, "default").items == []


def test_create_waits_for_ready_and_a_failed_snapshot_is_rolled_back(plugin: Plugin,
                                                                      apiserver: ApiServer) -> None:
    client = client_of(apiserver)
    reporter = report_when_created(client, "monday", {"state": "Ready", "snapshotID": "iri://abc",
                                                      "size": "1073741824"})
    _, _, outs = create(plugin, "VolumeSnapshot", snapshot_props(wait_for="ready", wait_timeout=60))
    reporter.join()
    assert (outs["state"], outs["snapshot_id"], outs["size"]) == ("Ready", "iri://abc", "1073741824")

    reporter = report_when_created(client, "tuesday", {"state": "Failed"})
    urn = plugin.urn(TYPE.format("VolumeSnapshot"), "tuesday")
    inputs, _ = plugin.check(urn, {}, snapshot_props(name="tuesday", wait_for="ready", wait_timeout=60))
    with pytest.raises(PluginError) as err:
        plugin.create(urn, inputs)
    reporter.join()
    assert "failed: the snapshot of volume data failed at its volume pool" in err.value.details
    with pytest.raises(NotFound):
        client.get_raw(SNAPSHOTS, "tuesday", "default")


def test_a_volume_restored_from_a_snapshot_lands_in_its_pool(plugin: Plugin, apiserver: ApiServer) -> None:
    client = client_of(apiserver)
    create(plugin, "VolumeClass", {"__provider": provider_payload(VolumeClassProvider()), "name": "fast",
                                   "capabilities": {"tps": "100Mi", "iops": 1000}})
    client.create_raw(SNAPSHOTS, {"metadata": {"name": "monday", "labels": {VOLUME_POOL_LABEL: "vp-1"}},
                                  "spec": {"volumeRef": {"name": "data"}}}, "default")
    props = {"__provider": provider_payload(VolumeProvider()), "name": "restored", "volume_class": "fast",
             "size": "1Gi", "snapshot": "monday", "wait_for": "none"}
    rid, inputs, outs = create(plugin, "Volume", props)
    assert outs["snapshot"] == "monday" and outs["volume_pool"] == "vp-1"
    live = client.get_raw(VOLUMES, "restored", "default")
    assert live["spec"]["dataSource"] == {"volumeSnapshotRef": {"name": "monday"}}
    urn = plugin.urn(TYPE.format("Volume"), "restored")
    other, _ = plugin.check(urn, inputs, {**props, "snapshot": "tuesday"})
    assert list(plugin.diff(rid, urn, outs, other, inputs).replaces) == ["snapshot"]
    _, failures = plugin.check(urn, {}, {**props, "name": "both", "image": "tiny"})
    assert "must only specify one volume data source" in str(dict(failures))
