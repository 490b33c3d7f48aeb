"""StoreMirror: an admission plugin's view follows writes made by anyone over the store, applies this
process's own commits at once, and never lets an older state win over a newer one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ironpool.api.resources import RESOURCES
from ironpool.store.mirror import StoreMirror
from ironpool.store.sqlite import SQLiteStore

from tests.helpers.wait import eventually

POOLS = next(r for r in RESOURCES if r.kind == "MachinePool")


def pool(name: str, cpu: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "status": {"allocatable": {"cpu": cpu}}}


async def test_follows_other_writers_and_keeps_the_newest(tmp_path: Path) -> None:
    store = SQLiteStore(str(tmp_path / "s.db"))
    view: dict[str, Any] = {}

    def apply(info: Any, key: str, doc: dict[str, Any] | None) -> None:
        if doc is None:
            view.pop(key, None)
        else:
            view[key] = doc["status"]["allocatable"]["cpu"]

    a = POOLS.key(None, "a")
    await store.create(a, pool("a", "1"))
    mirror = StoreMirror(store, [POOLS], apply)
    await mirror.start()
    try:
        assert view == {a: "1"}
        # Written by "another apiserver" (straight into the store): the watch brings it.
        b = POOLS.key(None, "b")
        await store.create(b, pool("b", "2"))
        await eventually(lambda: view.get(b) == "2", message="a write by someone else")
        # This process's own commit is applied before the watch brings it, and stays.
        updated = await store.update(a, pool("a", "3"))
        mirror.committed(POOLS, a, updated)
        assert view[a] == "3"
        # An older state (as a late watch event would carry) does not win.
        stale = await store.get(b)
        await store.update(b, pool("b", "5"))
        await eventually(lambda: view.get(b) == "5", message="the newer state")
        mirror.committed(POOLS, b, stale)
        assert view[b] == "5"
        # A removal made here holds until the watch brings it, and a later re-create applies.
        removed = await store.delete(a)
        mirror.committed(POOLS, a, None)
        assert a not in view
        again = await store.create(a, pool("a", "7"))
        assert int(again["metadata"]["resourceVersion"]) > int(removed["metadata"]["resourceVersion"])
        await eventually(lambda: view.get(a) == "7", message="the re-created pool")
        # The same when the watch brings the removal before this process hears of its own commit.
        await store.delete(a)
        await eventually(lambda: a not in view, message="the removal through the watch")
        mirror.committed(POOLS, a, None)
        await store.create(a, pool("a", "8"))
        await eventually(lambda: view.get(a) == "8", message="the pool created once more")
    finally:
        await mirror.stop()
        await store.close()
