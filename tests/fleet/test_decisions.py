"""The pool lifecycle controller's decisions as pure functions: Lease ageing on the controller's own
clock, taints, eviction times with tolerationSeconds, full disruption, the eviction rate."""

from __future__ import annotations

import pytest
from ironpool.api.fleet import UNREACHABLE_TAINT_KEY, lease_namespace
from ironpool.api.meta import Condition, Taint, Toleration
from ironpool.fleet.decisions import (
    UNREACHABLE,
    UNSCHEDULABLE,
    TokenBucket,
    eviction_at,
    fully_disrupted,
    needs_unknown,
    observe,
    unreachable,
    with_taint,
    without_taint,
)

ADDED = "2026-01-01T00:00:00Z"
T0 = 1767225600.0  # ADDED as a Unix time


def test_a_lease_ages_only_while_its_record_does_not_change() -> None:
    seen = observe(None, "10", now=100.0)
    assert not unreachable(seen, 139.0, grace=40)
    assert observe(seen, "10", now=139.0) is seen  # unchanged: keeps its first sighting
    assert unreachable(observe(seen, "10", now=140.0), 140.0, grace=40)
    renewed = observe(seen, "11", now=139.5)
    assert renewed.at == 139.5 and not unreachable(renewed, 170.0, grace=40)


def test_a_lease_first_seen_gets_a_whole_grace_period() -> None:
    seen = observe(None, "7", now=5.0)  # e.g. a new leader: however old the renewal, it counts from now
    assert not unreachable(seen, 44.0, 40) and unreachable(seen, 45.0, 40)


def test_ready_unknown_is_written_once() -> None:
    assert needs_unknown(None)
    assert needs_unknown([Condition(type="Ready", status="True")])
    assert not needs_unknown([Condition(type="Ready", status="Unknown")])


def test_taints_are_added_stamped_once_and_removed_by_key_and_effect() -> None:
    cordon = Taint(key="pool.ironpool.dev/unschedulable", effect="NoSchedule")
    taints = with_taint([cordon], UNREACHABLE, ADDED)
    assert taints is not None and taints[-1].key == UNREACHABLE_TAINT_KEY and taints[-1].time_added == ADDED
    assert with_taint(taints, UNREACHABLE, "2026-02-01T00:00:00Z") is None
    assert without_taint(taints, UNREACHABLE) == [cordon]
    assert without_taint([cordon], UNREACHABLE) is None
    same_key_other_effect = Taint(key=UNREACHABLE_TAINT_KEY, effect="NoSchedule")
    assert without_taint([same_key_other_effect], UNREACHABLE) is None


UNREACH = Taint(key=UNREACHABLE_TAINT_KEY, effect="NoExecute", time_added=ADDED)


@pytest.mark.parametrize(("tolerations", "taints", "expected"), [
    ([], [], None),  # no taints
    ([], [UNSCHEDULABLE], None),  # NoSchedule never evicts
    ([], [UNREACH], T0 + 100),  # not tolerated: now
    ([Toleration(key=UNREACHABLE_TAINT_KEY, operator="Exists", effect="NoExecute")], [UNREACH], None),
    ([Toleration(operator="Exists")], [UNREACH], None),  # tolerates everything for ever
    ([Toleration(key=UNREACHABLE_TAINT_KEY, operator="Exists", effect="NoExecute", toleration_seconds=300)],
     [UNREACH], T0 + 300),
    # the smallest tolerationSeconds of the matching tolerations wins
    ([Toleration(key=UNREACHABLE_TAINT_KEY, operator="Exists", effect="NoExecute", toleration_seconds=300),
      Toleration(operator="Exists", effect="NoExecute", toleration_seconds=30)], [UNREACH], T0 + 30),
    # one NoExecute taint tolerated, another not: evicted now
    ([Toleration(key=UNREACHABLE_TAINT_KEY, operator="Exists", effect="NoExecute")],
     [UNREACH, Taint(key="maintenance", effect="NoExecute")], T0 + 100),
    # a toleration of another key does not help
    ([Toleration(key="other", operator="Exists")], [UNREACH], T0 + 100),
])
def test_eviction_time(tolerations: list[Toleration], taints: list[Taint], expected: float | None) -> None:
    assert eviction_at(tolerations, taints, now=T0 + 100) == expected


def test_a_taint_without_time_added_counts_from_now() -> None:
    bare = Taint(key=UNREACHABLE_TAINT_KEY, effect="NoExecute")
    tol = Toleration(key=UNREACHABLE_TAINT_KEY, operator="Exists", effect="NoExecute", toleration_seconds=5)
    assert eviction_at([tol], [bare], now=50.0) == 55.0


def test_full_disruption_needs_every_pool_of_more_than_one_down() -> None:
    assert fully_disrupted(3, 3)
    assert not fully_disrupted(2, 3)
    assert not fully_disrupted(1, 1)  # one pool alone: its host is down, not the control plane's network
    assert not fully_disrupted(0, 0)


def test_token_bucket_admits_burst_then_rate() -> None:
    bucket = TokenBucket(rate=0.5, burst=2, now=0.0)
    assert bucket.try_take(0.0) and bucket.try_take(0.0)
    assert not bucket.try_take(1.0)  # half a token
    assert bucket.try_take(2.0)
    assert not bucket.try_take(2.0)
    assert bucket.try_take(100.0) and bucket.try_take(100.0) and not bucket.try_take(100.0)  # capped at burst
    with pytest.raises(ValueError, match="eviction rate"):
        TokenBucket(rate=0, burst=1, now=0.0)


def test_lease_namespaces_per_pool_kind() -> None:
    assert lease_namespace("MachinePool") != lease_namespace("VolumePool")
    with pytest.raises(ValueError, match="Machine"):
        lease_namespace("Machine")
