"""Server-side printing: Table answers for lists, gets and watches, with the strategies' columns."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from ironpool.api.resources import STRATEGIES
from ironpool.apiserver.app import build_app
from ironpool.apiserver.auth.authentication import Authenticator, parse_token_file
from ironpool.apiserver.endpoints.tables import table_version
from ironpool.store.sqlite import SQLiteStore

COMPUTE = "/apis/compute.ironcore.dev/v1alpha1"
KUBECTL_ACCEPT = ("application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;"
                  "g=meta.k8s.io,application/json")


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    store = SQLiteStore(str(tmp_path / "s.db"))
    app = build_app(store, Authenticator(parse_token_file('a,admin,1,"system:masters"\n')))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test",
                                 headers={"Authorization": "Bearer a"}) as c:
        for name, cpu in (("small", "2"), ("large", "8")):
            r = await c.post(f"{COMPUTE}/machineclasses", json={
                "apiVersion": "compute.ironcore.dev/v1alpha1", "kind": "MachineClass",
                "metadata": {"name": name}, "capabilities": {"cpu": cpu, "memory": "1Gi"}})
            assert r.status_code == 201, r.text
        r = await c.post(f"{COMPUTE}/namespaces/default/machines", json={
            "apiVersion": "compute.ironcore.dev/v1alpha1", "kind": "Machine",
            "metadata": {"name": "web", "labels": {"app": "web"}},
            "spec": {"machineClassRef": {"name": "small"}, "power": "On",
                     "machinePoolSelector": {"zone": "a"}}})
        assert r.status_code == 201, r.text
        yield c
    await store.close()


@pytest.mark.parametrize(("accept", "version"), [
    (KUBECTL_ACCEPT, "v1"),
    ("application/json;as=Table;v=v1beta1;g=meta.k8s.io", "v1beta1"),
    ("application/json", None),
    (None, None),
    ("application/json;as=Table;v=v9;g=meta.k8s.io,application/json", None),
    ("application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io,application/json", None),
])
def test_accept_negotiation(accept: str | None, version: str | None) -> None:
    assert table_version(accept) == version


async def test_list_as_table_has_the_cli_columns_and_metadata_rows(client: httpx.AsyncClient) -> None:
    r = await client.get(f"{COMPUTE}/namespaces/default/machines", headers={"Accept": KUBECTL_ACCEPT})
    assert r.status_code == 200, r.text
    table = r.json()
    assert (table["kind"], table["apiVersion"]) == ("Table", "meta.k8s.io/v1")
    assert table["metadata"]["resourceVersion"]
    columns = [(c["name"], c["priority"]) for c in table["columnDefinitions"]]
    assert columns == [("NAME", 0), ("MACHINECLASS", 0), ("POOL", 0), ("STATE", 0), ("POWER", 0), ("AGE", 0),
                       ("READY", 1), ("MACHINEID", 1), ("POOLSELECTOR", 1), ("IMAGE", 1),
                       ("IPS", 1)]
    [row] = table["rows"]
    assert row["cells"][:2] == ["web", "small"] and row["cells"][2] is None and row["cells"][4] == "On"
    assert row["cells"][5].endswith("s") and row["cells"][8] == "zone=a"
    assert row["object"]["kind"] == "PartialObjectMetadata"
    assert row["object"]["metadata"]["labels"] == {"app": "web"} and "spec" not in row["object"]


async def test_include_object_and_single_get(client: httpx.AsyncClient) -> None:
    path = f"{COMPUTE}/machineclasses"
    table = {"Accept": KUBECTL_ACCEPT}
    full = (await client.get(path, params={"includeObject": "Object"}, headers=table)).json()
    assert [row["object"]["capabilities"]["cpu"] for row in full["rows"]] == ["8", "2"]
    bare = (await client.get(path, params={"includeObject": "None"}, headers=table)).json()
    assert all("object" not in row for row in bare["rows"])
    bad = await client.get(path, params={"includeObject": "All"}, headers={"Accept": KUBECTL_ACCEPT})
    assert bad.status_code == 400 and "includeObject" in bad.json()["message"]
    one = (await client.get(f"{path}/small", headers={"Accept": KUBECTL_ACCEPT})).json()
    assert one["kind"] == "Table" and [r["cells"][0] for r in one["rows"]] == ["small"]
    plain = (await client.get(f"{path}/small")).json()
    assert plain["kind"] == "MachineClass"


async def test_paged_table_list_continues(client: httpx.AsyncClient) -> None:
    path = f"{COMPUTE}/machineclasses"
    first = (await client.get(path, params={"limit": 1}, headers={"Accept": KUBECTL_ACCEPT})).json()
    assert len(first["rows"]) == 1 and first["metadata"]["continue"]
    rest = (await client.get(path, params={"limit": 1, "continue": first["metadata"]["continue"]},
                             headers={"Accept": KUBECTL_ACCEPT})).json()
    assert [r["cells"][0] for r in first["rows"] + rest["rows"]] == ["large", "small"]


async def test_watch_as_table_sends_columns_once(client: httpx.AsyncClient) -> None:
    events: list[dict[str, Any]] = []
    async with client.stream("GET", f"{COMPUTE}/machineclasses", params={"watch": "1", "timeoutSeconds": "1"},
                             headers={"Accept": KUBECTL_ACCEPT}) as r:
        async for line in r.aiter_lines():
            if line.strip():
                events.append(orjson.loads(line))
    assert [e["type"] for e in events] == ["ADDED", "ADDED"]
    assert all(e["object"]["kind"] == "Table" for e in events)
    assert events[0]["object"]["columnDefinitions"] and not events[1]["object"]["columnDefinitions"]
    assert sorted(e["object"]["rows"][0]["cells"][0] for e in events) == ["large", "small"]


def test_every_kind_is_printed_with_its_strategy_columns() -> None:
    from ironpool.api.columns import NAME
    from ironpool.apiserver.endpoints.tables import writer_for

    for strategy in STRATEGIES:
        definitions = writer_for(strategy.info).definitions
        assert [d["name"] for d in definitions] == [c.header for c in strategy.columns]
        assert [d["format"] == "name" for d in definitions] == [c is NAME for c in strategy.columns]


async def test_pool_rows_are_rendered_as_they_are_written(client: httpx.AsyncClient,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    from ironpool.api.resources import resolve
    from ironpool.apiserver.endpoints.tables import writer_for

    pools = f"{COMPUTE}/machinepools"
    r = await client.post(pools, json={"metadata": {"name": "p1"}, "spec": {"taints": [
        {"key": "pool.ironpool.dev/unschedulable", "effect": "NoSchedule"}]}})
    assert r.status_code == 201, r.text
    r = await client.patch(f"{pools}/p1/status", headers={"Content-Type": "application/merge-patch+json"},
                           json={"status": {"state": "Ready", "capacity": {"cpu": "8", "memory": "16Gi"},
                                            "allocatable": {"cpu": "6", "memory": "12Gi"}}})
    assert r.status_code == 200, r.text
    # The list's Table is answered from rows rendered at the write: nothing is rendered now.
    writer = writer_for(resolve("machinepools"))
    rendered: list[bytes] = []
    ready = set(writer._rows)  # what was rendered before the Table is asked for
    real = writer._row
    monkeypatch.setattr(writer, "_row", lambda raw, obj=None: rendered.append(raw) or real(raw, obj))
    answer = await client.get(pools, params={"includeObject": "None"}, headers={"Accept": KUBECTL_ACCEPT})
    table = answer.json()
    names = [c["name"] for c in table["columnDefinitions"]]
    [row] = table["rows"]
    cells = dict(zip(names, row["cells"], strict=True))
    assert cells["CPU"] == "6/8" and cells["MEMORY"] == "12Gi/16Gi" and cells["STATE"] == "Ready"
    assert cells["TAINTS"] == "pool.ironpool.dev/unschedulable:NoSchedule" and "object" not in row
    assert len(rendered) == 1 and rendered[0] in ready  # the row of the stored object, ready before
