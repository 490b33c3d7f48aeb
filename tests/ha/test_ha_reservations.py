"""Reservations with two apiservers over one etcd: plans racing through both for the last capacity
(exactly one is taken), and random interleavings of plans, binds within and outside Reservations,
expiries and deletions never overcommit a pool (see tests/helpers/reservation_race.py)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.ha.conftest import ControlPlane, start_control_plane
from tests.ha.test_ha_capacity import clients
from tests.helpers.etcd import EtcdCluster
from tests.helpers.reservation_race import (
    Op,
    race_last_capacity,
    run_property,
    schedulers_race_for_the_last_capacity,
    start_racing_schedulers,
)
from tests.helpers.runtimes import stop_process

POOL_CPUS = st.lists(st.integers(0, 6), min_size=1, max_size=3)
ROUNDS = st.lists(st.lists(st.tuples(st.sampled_from(["plan", "plan", "bind", "bind", "expire", "delete"]),
                                     st.integers(0, 7), st.integers(0, 2), st.integers(0, 1)),
                           min_size=1, max_size=10), min_size=1, max_size=3)


async def _through_both(plane: ControlPlane, body: object) -> None:
    vias = clients(plane.servers)
    try:
        await body(vias)  # type: ignore[operator]
    finally:
        for c in vias:
            await c.aclose()


def test_two_reservations_racing_through_two_apiservers(two_apiservers: ControlPlane) -> None:
    for _ in range(5):
        asyncio.run(_through_both(two_apiservers, race_last_capacity))


@settings(max_examples=12, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(pool_cpus=POOL_CPUS, rounds=ROUNDS)
def test_no_interleaving_through_two_apiservers_overcommits(
        two_apiservers: ControlPlane, pool_cpus: list[int], rounds: list[list[Op]]) -> None:
    asyncio.run(_through_both(two_apiservers, lambda vias: run_property(vias, pool_cpus, rounds)))


def test_two_schedulers_through_two_apiservers_race_for_the_last_capacity(
        etcd: EtcdCluster, tmp_path: Path) -> None:
    # A control plane of its own: the module's holds the other tests' Reservations, which schedulers
    # would plan onto this test's pools.
    plane = start_control_plane(etcd, tmp_path)
    procs = start_racing_schedulers([s.url for s in plane.servers], plane.servers[0].token_file, tmp_path)
    try:
        asyncio.run(_through_both(plane, schedulers_race_for_the_last_capacity))
    finally:
        for proc in procs:
            stop_process(proc)
        plane.stop()
