"""The ranges inside one prefix: aligned free blocks, holders, coalescing and release."""

from __future__ import annotations

import random

from ironpool.api.ipaddr import parse_prefix
from ironpool.apiserver.ipam.planner import host_range
from ironpool.apiserver.ipam.ranges import Allocations


def test_first_free_skips_taken_blocks_and_respects_alignment() -> None:
    a: Allocations[str] = Allocations()
    a.take(0, 16, "x")
    a.take(16, 17, "y")
    assert a.first_free(0, 256, 16) == 32  # 16..32 is not free (16 is taken): next aligned /28
    assert a.first_free(0, 256, 1) == 17
    assert a.first_free(0, 256, 1, taken_elsewhere=lambda v: v in (17, 18)) == 19
    assert a.first_free(0, 17, 1) is None
    assert a.overlaps(10, 20) == ["x", "y"] and a.overlaps(17, 20) == []
    assert a.containing(16) == (16, 17, "y") and a.containing(200) is None


def test_release_splits_and_frees_exactly_what_was_held() -> None:
    a: Allocations[int] = Allocations()
    for v in range(2, 255):
        a.take(v, v + 1, v)
    assert a.first_free(2, 255, 1) is None and a.free_count(2, 255) == 0
    assert not a.release(100, 99)  # someone else's start: nothing happens
    assert a.release(100, 100) and a.release(7, 7)
    assert a.first_free(2, 255, 1) == 7
    a.take(7, 8, 7)
    assert a.first_free(2, 255, 1) == 100 and a.free_count(2, 255) == 1 and len(a) == 252


def test_random_takes_and_releases_agree_with_a_set() -> None:
    rnd = random.Random(7)
    a: Allocations[int] = Allocations()
    held: set[int] = set()
    for _ in range(3000):
        v = rnd.randrange(64)
        if v in held:
            assert a.release(v, v)
            held.discard(v)
        else:
            a.take(v, v + 1, v)
            held.add(v)
        free = [x for x in range(64) if x not in held]
        assert a.first_free(0, 64, 1) == (free[0] if free else None)
        assert a.free_count(0, 64) == len(free)


def test_host_range_reserves_network_gateway_and_broadcast() -> None:
    def r(cidr: str) -> tuple[int, int]:
        net = parse_prefix(cidr)
        assert net is not None
        lo, hi = host_range(net)
        return lo - int(net.network_address), hi - int(net.network_address)

    assert r("10.0.0.0/24") == (2, 255)  # .2 .. .254: 253 addresses
    assert r("10.0.0.0/31") == (0, 2) and r("10.0.0.7/32") == (0, 1)
    assert r("fd00::/64") == (2, 1 << 64)  # no broadcast in IPv6
