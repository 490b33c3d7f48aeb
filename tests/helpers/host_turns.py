"""The pytest plugin that makes test runs on one host take turns with their guests.

The modules marked ``guests`` start many guests (or big ones) at once, and their deadlines
(tests/helpers/guests.py) assume the guests of one run on the machine's cores. Within a run they
already go one after another (tests/helpers/worker_groups.py); two runs of two clones on one
machine would still boot theirs together and miss those deadlines. So each such module holds an
exclusive lock on a file shared by every run on the host, from its first test's setup to its last
test's teardown. The lock is taken outside pytest-timeout's timer: waiting for the other run's
turn does not count against a test's timeout. A run alone never waits.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import IO

import pytest

LOCK_PATH = Path(os.environ.get("IRONPOOL_TEST_HOST_LOCK",
                                Path(tempfile.gettempdir()) / "ironpool-test-guests.lock"))

_held: IO[bytes] | None = None


def _takes_turns(item: pytest.Item | None) -> bool:
    return item is not None and item.get_closest_marker("guests") is not None


def _module(item: pytest.Item) -> str:
    return item.nodeid.split("::", 1)[0]


def _take_turn(item: pytest.Item) -> None:
    global _held
    held = LOCK_PATH.open("ab")
    try:
        fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        started = time.monotonic()
        reporter = item.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line(f"{_module(item)}: waiting for another test run's guests ({LOCK_PATH})")
        fcntl.flock(held, fcntl.LOCK_EX)
        item.add_report_section("setup", "host turn", f"waited {time.monotonic() - started:.0f} s")
    _held = held


def _end_turn() -> None:
    global _held
    if _held is not None:
        fcntl.flock(_held, fcntl.LOCK_UN)
        _held.close()
        _held = None


# tryfirst: this wrapper is the outermost one, outside pytest-timeout's own.
@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_protocol(item: pytest.Item, nextitem: pytest.Item | None) -> Iterator[None]:
    if _takes_turns(item) and _held is None:
        _take_turn(item)
    try:
        yield
    finally:
        # The module's fixtures (and its guests) are torn down with its last test.
        same_module = nextitem is not None and _takes_turns(nextitem) and _module(nextitem) == _module(item)
        if not same_module:
            _end_turn()
