# Copyright: ironpool contributors
# SPDX-License-Identifier: Apache-2.0
"""ironpool.iaas.volume: grow in place, never shrink, fixed image and class."""

from __future__ import annotations

from typing import Any

from ansible_collections.ironpool.iaas.plugins.modules import volume

DATA = {"name": "data", "volume_class": "fast", "size": "1Gi"}


def test_grows_in_place_and_refuses_to_shrink(run_module: Any, client: Any) -> None:
    assert run_module(volume.main, DATA).result["action"] == "created"
    assert not run_module(volume.main, DATA).result["changed"]
    grown = run_module(volume.main, {**DATA, "size": "2048Mi"}, diff=True)
    assert grown.result["action"] == "updated"
    assert grown.result["diff"]["after"]["spec"]["resources"] == {"storage": "2Gi"}
    assert client.stored("Volume", "data")["spec"]["resources"]["storage"] == "2Gi"
    shrink = run_module(volume.main, {**DATA, "size": "1Gi"})
    assert shrink.failed and shrink.result["msg"].startswith("size: ") and "shrink" in shrink.result["msg"]
    assert client.stored("Volume", "data")["spec"]["resources"]["storage"] == "2Gi"


def test_a_static_class_keeps_the_size(run_module: Any, client: Any) -> None:
    client.seed({"apiVersion": "storage.ironcore.dev/v1alpha1", "kind": "VolumeClass",
                 "metadata": {"name": "fixed"}, "capabilities": {"tps": "1Mi", "iops": "10"}})
    run_module(volume.main, {**DATA, "volume_class": "fixed"})
    out = run_module(volume.main, {**DATA, "volume_class": "fixed", "size": "2Gi"})
    assert out.failed and out.result["msg"].startswith("size: ") and "Static" in out.result["msg"]


def test_image_cannot_change_without_force(run_module: Any, client: Any) -> None:
    run_module(volume.main, {**DATA, "image": "tiny"})
    out = run_module(volume.main, {**DATA, "image": "other"})
    assert out.failed and out.result["msg"].startswith("image: ") and "force=true" in out.result["msg"]
    forced = run_module(volume.main, {**DATA, "image": "other", "force": True})
    assert forced.result["action"] == "recreated"
    assert client.stored("Volume", "data")["spec"]["dataSource"] == {"osImage": {"image": "other"}}


def test_bad_size_and_unknown_class_create_nothing(run_module: Any, client: Any) -> None:
    bad = run_module(volume.main, {**DATA, "size": "1 gig"})
    assert bad.failed and bad.result["msg"].startswith("size: ")
    unknown = run_module(volume.main, {**DATA, "volume_class": "slow"})
    assert unknown.failed and unknown.result["msg"].startswith("volume_class: ")
    assert "fast" in unknown.result["msg"]
    missing = run_module(volume.main, {"name": "data", "volume_class": "fast"})
    assert missing.failed and missing.result["msg"].startswith("size: ")
    assert client.writes == []
