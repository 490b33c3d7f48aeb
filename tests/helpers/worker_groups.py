"""The pytest plugin that groups tests for ``--dist loadgroup`` (scripts/test.sh).

Each module runs whole on one worker, so its module fixtures (one ``ironpool up``, one rig) serve
all its tests; the tests marked ``guests`` (mostly whole modules), which start many guests or big
ones at once, run one after another on one worker, so that two of them never share the two cores
(see tests/helpers/guests.py). A module with a single such test is set up on both workers.

The groups are also put in the order they should start in, longest first: the guests group, then
the modules that boot guests or start an ``ironpool up`` (marked ``libvirt`` or ``slow``), then the
quick ones, which fill both workers at the end. scripts/test.sh keeps that order
(``--no-loadscope-reorder``; pytest-xdist would otherwise start the groups with the most tests
first, and the guests group, the longest by far, started when two thirds of the suite had run and
ran on alone for a quarter of an hour).
"""

from __future__ import annotations

import pytest


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    groups = {item: group_of(item) for item in items}
    rank: dict[str, int] = {}
    for item, group in groups.items():
        rank[group] = min(rank.get(group, 2), rank_of(item))
    for item in items:
        item.add_marker(pytest.mark.xdist_group(groups[item]))
    items.sort(key=lambda item: rank[groups[item]])  # stable: each group stays in collection order


def group_of(item: pytest.Item) -> str:
    """The unit one worker runs whole: the guests group, or the item's module."""
    return "guests" if item.get_closest_marker("guests") else item.nodeid.split("::", 1)[0]


def rank_of(item: pytest.Item) -> int:
    """How early the item's group should start: 0 for guests, 1 for slow or libvirt, 2 otherwise."""
    if item.get_closest_marker("guests"):
        return 0
    return 1 if item.get_closest_marker("slow") or item.get_closest_marker("libvirt") else 2
