"""Restarts, kill -9 during concurrent writes, and compacted revisions, against real processes."""

from __future__ import annotations

import asyncio
import json
import signal
from pathlib import Path
from typing import TYPE_CHECKING, Any

import httpx
from ironpool.store.sqlite import SQLiteStore

if TYPE_CHECKING:
    from tests.conftest import ApiServer


def _fixtures(server: ApiServer) -> dict[str, Any]:
    """The globals of the shared tests/conftest.py, whatever name pytest imported it under
    (several conftest modules share the name ``conftest``, so ``sys.modules`` is no guide)."""
    return type(server).headers.__globals__


def start_apiserver(tmp_path: Path, db_path: Path, like: ApiServer) -> ApiServer:
    return _fixtures(like)["start_apiserver"](tmp_path, db_path=db_path)  # type: ignore[no-any-return]


def stop_apiserver(server: ApiServer) -> None:
    _fixtures(server)["stop_apiserver"](server)


CLASSES = "/apis/compute.ironcore.dev/v1alpha1/machineclasses"


def machine_class(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "compute.ironcore.dev/v1alpha1",
        "kind": "MachineClass",
        "metadata": {"name": name},
        "capabilities": {"cpu": "1", "memory": "1Gi"},
    }


def restart(server: ApiServer, tmp_path: Path, *, kill: bool = False) -> ApiServer:
    if kill:
        server.process.send_signal(signal.SIGKILL)
        server.process.wait()
    else:
        stop_apiserver(server)
    return start_apiserver(tmp_path, server.db_path, server)


def test_data_survives_restart(apiserver: ApiServer, tmp_path: Path) -> None:
    with httpx.Client(base_url=apiserver.url, headers=apiserver.headers()) as c:
        created = c.post(CLASSES, json=machine_class("small")).json()
    again = restart(apiserver, tmp_path)
    try:
        with httpx.Client(base_url=again.url, headers=again.headers()) as c:
            got = c.get(f"{CLASSES}/small")
            assert got.status_code == 200 and got.json() == created
            # Revisions continue from where they were.
            nxt = c.post(CLASSES, json=machine_class("large")).json()
            assert int(nxt["metadata"]["resourceVersion"]) == int(created["metadata"]["resourceVersion"]) + 1
    finally:
        stop_apiserver(again)


async def test_kill_9_during_concurrent_writes_loses_no_acknowledged_write(
    apiserver: ApiServer, tmp_path: Path
) -> None:
    acknowledged: list[str] = []
    enough = asyncio.Event()

    async def writer(w: int, client: httpx.AsyncClient) -> None:
        for i in range(100_000):
            name = f"w{w}-{i}"
            try:
                r = await client.post(CLASSES, json=machine_class(name))
            except httpx.HTTPError:
                return  # the server is gone
            assert r.status_code == 201, r.text
            acknowledged.append(name)
            if len(acknowledged) >= 400:
                enough.set()

    async with httpx.AsyncClient(base_url=apiserver.url, headers=apiserver.headers(), timeout=10) as client:
        writers = [asyncio.ensure_future(writer(w, client)) for w in range(8)]
        await asyncio.wait_for(enough.wait(), 60)
        apiserver.process.send_signal(signal.SIGKILL)  # mid-burst: the writers are still sending
        await asyncio.wait_for(asyncio.gather(*writers), 30)

    again = restart(apiserver, tmp_path, kill=True)
    try:
        with httpx.Client(base_url=again.url, headers=again.headers()) as c:
            stored = {o["metadata"]["name"] for o in c.get(CLASSES).json()["items"]}
        missing = [n for n in acknowledged if n not in stored]
        assert not missing, f"{len(missing)} acknowledged writes lost, e.g. {missing[:5]}"
        assert len(acknowledged) >= 400
    finally:
        stop_apiserver(again)


def test_compacted_revision_expires_watch_and_continue(apiserver: ApiServer, tmp_path: Path) -> None:
    with httpx.Client(base_url=apiserver.url, headers=apiserver.headers()) as c:
        for i in range(4):
            assert c.post(CLASSES, json=machine_class(f"c{i}")).status_code == 201
        first = c.get(CLASSES, params={"limit": 2}).json()
        old_rv = first["metadata"]["resourceVersion"]
        token = first["metadata"]["continue"]
        assert c.post(CLASSES, json=machine_class("c9")).status_code == 201
    stop_apiserver(apiserver)

    async def compact() -> None:
        store = SQLiteStore(str(apiserver.db_path))
        await store.compact(await store.current_revision())
        await store.close()

    asyncio.run(compact())
    again = start_apiserver(tmp_path, apiserver.db_path, apiserver)
    try:
        with httpx.Client(base_url=again.url, headers=again.headers(), timeout=10) as c:
            r = c.get(CLASSES, params={"limit": 2, "continue": token})
            assert r.status_code == 410 and r.json()["reason"] == "Expired"
            with c.stream("GET", CLASSES, params={"watch": "true", "resourceVersion": old_rv}) as stream:
                lines = [json.loads(line) for line in stream.iter_lines() if line.strip()]
            assert len(lines) == 1 and lines[0]["type"] == "ERROR"
            assert lines[0]["object"]["code"] == 410 and lines[0]["object"]["reason"] == "Expired"
            # Relisting and watching from the list's revision works.
            listed = c.get(CLASSES).json()
            assert len(listed["items"]) == 5
            with c.stream(
                "GET",
                CLASSES,
                params={"watch": "true", "resourceVersion": listed["metadata"]["resourceVersion"]},
            ) as stream:
                assert c.delete(f"{CLASSES}/c0").status_code == 200
                event = json.loads(next(line for line in stream.iter_lines() if line.strip()))
            assert event["type"] == "DELETED" and event["object"]["metadata"]["name"] == "c0"
    finally:
        stop_apiserver(again)
