"""The fencing contract's decisions (:mod:`ironpool.fleet.fence_timing`, :mod:`ironpool.poollet.fencing`):
what a Lease publishes, when the controller may move a silent pool's Machines, which configurations
are refused naming their options, and who opts out."""

from __future__ import annotations

from pathlib import Path

import pytest
from ironpool.allinone.up import UpOptions
from ironpool.api.compute import Machine
from ironpool.api.fleet import FENCE_AFTER_ANNOTATION, tolerates_unreachable_forever
from ironpool.api.meta import Toleration
from ironpool.fleet.fence_timing import (
    check_fence_timing,
    eviction_delay,
    published_fence_after,
    takeover_due,
    timing_problem,
    to_move,
)
from ironpool.fleet.lifecycle import LifecycleOptions
from ironpool.poollet.fencing import check_fence_after, fence_due

UNREACHABLE = "pool.ironpool.dev/unreachable"


def machine(name: str, *tolerations: dict[str, object], deleting: bool = False) -> Machine:
    meta: dict[str, object] = {"name": name, "namespace": "default"}
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    return Machine.model_validate({"metadata": meta, "spec": {"machineClassRef": {"name": "x"},
                                                              "tolerations": list(tolerations) or None}})


@pytest.mark.parametrize(("raw", "expected"), [
    ("30", 30.0), ("7.5", 7.5), (None, None), ("", None), ("soon", None), ("0", None), ("-3", None),
    ("nan", None), ("inf", None),
])
def test_the_fence_time_a_lease_publishes(raw: str | None, expected: float | None) -> None:
    annotations = {} if raw is None else {FENCE_AFTER_ANNOTATION: raw}
    assert published_fence_after(annotations) == expected


def test_eviction_waits_for_the_fence_plus_the_margin_and_at_least_the_grace_period() -> None:
    assert eviction_delay(40, None, 10) == 40  # a pool that does not fence: as before
    assert eviction_delay(40, 30, 10) == 40
    assert eviction_delay(10, 30, 10) == 40  # never before the fence, whatever the grace period
    assert not takeover_due(39.9, 10, 30, 10)
    assert takeover_due(40.0, 10, 30, 10)
    assert not takeover_due(1000, 10, None, 10)  # no fence published: no takeover, ever


def test_a_fence_that_does_not_fit_the_grace_period_is_refused_naming_the_options() -> None:
    assert timing_problem(30, 40, 10) is None
    check_fence_timing(30, 40, 10)
    check_fence_timing(0, 5, 10)  # fencing off: nothing to fit
    with pytest.raises(ValueError) as refused:
        check_fence_timing(30, 20, 10)
    for option in ("--fence-after 30s", "--fence-margin 10s", "--pool-monitor-grace-period 20s"):
        assert option in str(refused.value)


def test_ironpool_up_refuses_a_fence_slower_than_its_evictions(tmp_path: Path) -> None:
    UpOptions(data_dir=tmp_path, pool_monitor_grace_period=40, fence_after=30)
    UpOptions(data_dir=tmp_path, pool_monitor_grace_period=10, fence_after=0)
    with pytest.raises(ValueError, match="--pool-monitor-grace-period 20s"):
        UpOptions(data_dir=tmp_path, pool_monitor_grace_period=20, fence_after=30)
    with pytest.raises(ValueError, match="--heartbeat-interval"):
        UpOptions(data_dir=tmp_path, heartbeat_interval=10, fence_after=15)


def test_the_controller_refuses_a_margin_that_is_not_positive() -> None:
    with pytest.raises(ValueError, match="--fence-margin"):
        LifecycleOptions(fence_margin=0)


def test_the_poollet_fences_after_its_time_and_refuses_one_shorter_than_two_heartbeats() -> None:
    assert not fence_due(100.0, 129.9, 30)
    assert fence_due(100.0, 130.0, 30)
    check_fence_after(30, 10)
    check_fence_after(0, 10)
    with pytest.raises(ValueError, match=r"--fence-after \(20s\) must be more than twice --heartbeat"):
        check_fence_after(20, 10)


def test_a_toleration_of_the_unreachable_taint_for_ever_opts_out_of_fencing_and_eviction() -> None:
    forever = {"key": UNREACHABLE, "operator": "Exists", "effect": "NoExecute"}
    bounded = {**forever, "tolerationSeconds": 300}
    everything = {"operator": "Exists"}
    other = {"key": "pool.ironpool.dev/unschedulable", "operator": "Exists"}
    assert tolerates_unreachable_forever([Toleration.model_validate(forever)])
    assert tolerates_unreachable_forever([Toleration.model_validate(everything)])
    assert not tolerates_unreachable_forever([Toleration.model_validate(bounded)])
    assert not tolerates_unreachable_forever([Toleration.model_validate(other)])
    assert not tolerates_unreachable_forever(None)
    moved = to_move([machine("plain"), machine("stays", forever), machine("bounded", bounded),
                     machine("deleting", deleting=True)])
    assert [m.metadata.name for m in moved] == ["plain", "bounded"]
