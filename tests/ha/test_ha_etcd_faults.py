"""Fault test: SIGKILL one member of a 3-member etcd under two apiservers, the member they talk to
and the raft leader at once: writes through both apiservers go on, a watch through each carries
on, and every acknowledged write is stored."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import httpx
import orjson
import pytest

from tests.ha.conftest import ControlPlane, start_control_plane
from tests.helpers.etcd import etcd_cluster

SECRETS = "/api/v1/namespaces/default/secrets"


@pytest.fixture
def plane(tmp_path: Path) -> Iterator[ControlPlane]:
    with etcd_cluster(3) as cluster:
        control = start_control_plane(cluster, tmp_path)
        try:
            yield control
        finally:
            control.stop()


def secret(name: str) -> dict[str, object]:
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name}, "data": {"k": "dg=="}}


async def test_writes_and_watches_go_on_when_an_etcd_member_dies(plane: ControlPlane) -> None:
    a, b = plane.servers
    acknowledged: list[str] = []
    seen: dict[str, set[str]] = {a.url: set(), b.url: set()}
    async with httpx.AsyncClient(headers=a.headers(), timeout=60) as http:
        rv = (await http.get(a.url + SECRETS)).json()["metadata"]["resourceVersion"]

        async def watch(url: str) -> None:
            async with http.stream("GET", url + SECRETS, params={"watch": "true", "resourceVersion": rv},
                                   timeout=None) as stream:
                async for line in stream.aiter_lines():
                    event = orjson.loads(line)
                    assert event["type"] != "ERROR", event
                    seen[url].add(event["object"]["metadata"]["name"])

        watches = [asyncio.ensure_future(watch(url)) for url in seen]

        async def write(i: int) -> None:
            r = await http.post((a.url, b.url)[i % 2] + SECRETS, json=secret(f"s{i}"))
            if r.status_code == 201:
                acknowledged.append(f"s{i}")

        try:
            await asyncio.gather(*(write(i) for i in range(20)))
            victim = plane.etcd.members[0]  # every apiserver's etcd client starts on the first member
            plane.etcd.make_leader(victim)
            plane.etcd.kill(victim)
            await asyncio.gather(*(write(i) for i in range(20, 60)))
            assert len(acknowledged) == 60  # nothing refused: the store waits out the election

            async def all_seen() -> None:
                while not all(set(acknowledged) <= names for names in seen.values()):
                    await asyncio.sleep(0.05)

            await asyncio.wait_for(all_seen(), 30)
        finally:
            for task in watches:
                task.cancel()
        stored = {s["metadata"]["name"] for s in (await http.get(b.url + SECRETS)).json()["items"]}
    assert set(acknowledged) <= stored
