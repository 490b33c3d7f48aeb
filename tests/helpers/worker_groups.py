"""The pytest plugin that groups tests for ``--dist loadgroup`` (scripts/test.sh).

Each module runs whole on one worker, so its module fixtures (one ``ironpool up``, one rig) serve
all its tests; the tests marked ``guests`` (mostly whole modules), which start many guests or big
ones at once, run one after another on one worker, so that two of them never share the two cores
(see tests/helpers/guests.py). A module with a single such test is set up on both workers.
"""

from __future__ import annotations

import pytest


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        group = "guests" if item.get_closest_marker("guests") else item.nodeid.split("::", 1)[0]
        item.add_marker(pytest.mark.xdist_group(group))
