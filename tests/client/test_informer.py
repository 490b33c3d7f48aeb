"""Informer against the real apiserver: sync, handlers, indexes, reconnect after a restart, relist on 410."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import pytest
from ironpool.api.compute import Machine, MachineClass
from ironpool.api.errors import Expired
from ironpool.client.config import ClientConfig
from ironpool.client.informer import Informer, RawInformer, SharedInformerFactory, without_managed_fields
from ironpool.client.rest import AsyncClient, Client
from ironpool.client.wire import resource_for_model
from ironpool.store.sqlite import SQLiteStore

from tests.conftest import ApiServer, start_apiserver, stop_apiserver
from tests.helpers.wait import eventually

pytestmark = pytest.mark.timeout(120)


def mc(name: str, cpu: str = "2") -> MachineClass:
    return MachineClass.model_validate(
        {"metadata": {"name": name}, "capabilities": {"cpu": cpu, "memory": "1Gi"}}
    )


async def until(predicate: Callable[[], bool], timeout: float = 15, what: str = "condition") -> None:
    await eventually(predicate, timeout, what)


class Recorder:
    """Handlers that record what the informer emitted."""

    def __init__(self, informer: Informer[MachineClass]) -> None:
        self.events: list[tuple[str, str]] = []
        self.updates: list[tuple[str, str]] = []  # (old cpu, new cpu)
        informer.add_event_handler(on_add=self.add, on_update=self.update, on_delete=self.delete)

    def add(self, obj: MachineClass) -> None:
        self.events.append(("add", obj.metadata.name or ""))

    async def update(self, old: MachineClass, new: MachineClass) -> None:  # async handlers work too
        self.events.append(("update", new.metadata.name or ""))
        self.updates.append((str(old.capabilities["cpu"]), str(new.capabilities["cpu"])))

    def delete(self, obj: MachineClass) -> None:
        self.events.append(("delete", obj.metadata.name or ""))


async def test_list_then_watch_with_handlers_and_index(config: ClientConfig) -> None:
    with Client(config) as sync:
        sync.create(mc("pre"))
    async with AsyncClient(config) as client:
        informer = Informer(client, MachineClass, indexers={"cpu": lambda o: [str(o.capabilities["cpu"])]})
        rec = Recorder(informer)
        informer.start()
        await informer.wait_for_sync(timeout=10)
        assert informer.has_synced and informer.keys() == ["pre"]
        assert rec.events == [("add", "pre")]

        await client.create(mc("new", cpu="4"))
        await client.patch(MachineClass, "pre", {"metadata": {"labels": {"x": "y"}}})
        await client.delete(MachineClass, "new")
        await until(lambda: len(rec.events) == 4, what="three watch events")
        assert rec.events[1:] == [("add", "new"), ("update", "pre"), ("delete", "new")]
        assert informer.keys() == ["pre"]
        assert [o.metadata.name for o in informer.by_index("cpu", "2")] == ["pre"]
        assert informer.by_index("cpu", "4") == []
        assert informer.list_count == 1
        await informer.stop()


async def test_namespaced_informer_and_late_handler_replay(config: ClientConfig) -> None:
    async with AsyncClient(config) as client:
        await client.create(mc("c1"))
        for ns, name in (("default", "a"), ("default", "b")):
            await client.create(
                Machine.model_validate(
                    {"metadata": {"name": name, "namespace": ns}, "spec": {"machineClassRef": {"name": "c1"}}}
                )
            )
        factory = SharedInformerFactory(client)
        informer = factory.informer(Machine, namespace="default")
        assert factory.informer(Machine, namespace="default") is informer  # shared
        informer.add_indexer("class", lambda m: [m.spec.machine_class_ref.name])
        factory.start()
        await factory.wait_for_sync(timeout=10)
        assert informer.keys() == ["default/a", "default/b"]
        assert informer.get_by_name("a", "default") is not None
        assert len(informer.by_index("class", "c1")) == 2
        late: list[str] = []
        informer.add_event_handler(on_add=lambda m: late.append(m.metadata.name or ""))
        assert sorted(late) == ["a", "b"]  # a handler added after sync sees the cache first
        await factory.stop()


async def test_raw_informer_hands_out_the_json_documents(config: ClientConfig) -> None:
    async with AsyncClient(config) as client:
        await client.create(mc("pre"))
        factory = SharedInformerFactory(client)
        raw = factory.raw_informer(MachineClass)
        assert factory.raw_informer(MachineClass) is raw and isinstance(raw, RawInformer)
        assert factory.informer(MachineClass) is not raw  # the typed one is another informer
        seen: list[tuple[str, str]] = []
        raw.add_event_handler(on_add=lambda d: seen.append(("add", d["capabilities"]["cpu"])),
                              on_update=lambda _o, n: seen.append(("update", n["metadata"]["labels"]["x"])))
        factory.start()
        await factory.wait_for_sync(timeout=10)
        await client.patch(MachineClass, "pre", {"metadata": {"labels": {"x": "y"}}})
        await until(lambda: len(seen) == 2, what="the update")
        assert seen == [("add", "2"), ("update", "y")]
        doc = raw.get("pre")
        assert isinstance(doc, dict) and doc["kind"] == "MachineClass"
        await factory.stop()


async def test_a_first_list_goes_page_by_page_through_the_transform(config: ClientConfig) -> None:
    async with AsyncClient(config) as client:
        for i in range(5):
            await client.create(mc(f"c{i}"))
        assert "managedFields" in (await client.get_raw(resource_for_model(MachineClass), "c0"))["metadata"]
        informer = RawInformer(client, MachineClass, page_size=2)  # three pages
        informer.set_transform(without_managed_fields)
        added: list[dict[str, Any]] = []
        late: list[str] = []

        def add(doc: dict[str, Any]) -> None:
            if not added:  # a handler registered while the first list is under way misses nothing
                informer.add_event_handler(on_add=lambda d: late.append(d["metadata"]["name"]))
            added.append(doc)

        informer.add_event_handler(on_add=add)
        informer.start()
        await informer.wait_for_sync(timeout=10)
        assert sorted(d["metadata"]["name"] for d in added) == [f"c{i}" for i in range(5)]
        assert sorted(late) == [f"c{i}" for i in range(5)]
        assert not any("managedFields" in d["metadata"] for d in added)
        await client.patch(MachineClass, "c0", {"metadata": {"labels": {"x": "y"}}})
        await until(lambda: (informer.get("c0") or {})["metadata"].get("labels") == {"x": "y"}, what="update")
        assert "managedFields" not in (informer.get("c0") or {})["metadata"]
        assert informer.list_count == 1 and len(added) == 5
        await informer.stop()


async def test_reconnects_from_last_resource_version_after_apiserver_restart(
    apiserver: ApiServer, config: ClientConfig, tmp_path: Path
) -> None:
    port = urlparse(apiserver.url).port
    async with AsyncClient(config) as client:
        await client.create(mc("before"))
        informer = Informer(client, MachineClass, backoff_base=0.05, backoff_cap=0.5)
        rec = Recorder(informer)
        informer.start()
        await informer.wait_for_sync(timeout=10)

        stop_apiserver(apiserver)
        await until(lambda: informer.watch_count >= 2, what="the informer to retry its watch")
        restarted = await asyncio.to_thread(start_apiserver, tmp_path, apiserver.db_path, port)
        try:
            with Client(config) as sync:
                sync.create(mc("after"))
            await until(lambda: ("add", "after") in rec.events, what="the event after the restart")
            # Resumed from its resourceVersion: no second list, no duplicate add for "before".
            assert informer.list_count == 1
            assert rec.events == [("add", "before"), ("add", "after")]
        finally:
            await informer.stop()
            stop_apiserver(restarted)


async def test_relists_and_emits_differences_when_the_revision_expired(
    apiserver: ApiServer, config: ClientConfig, tmp_path: Path
) -> None:
    port = urlparse(apiserver.url).port
    async with AsyncClient(config) as client:
        for name in ("keep", "change", "gone"):
            await client.create(mc(name))
        informer = Informer(client, MachineClass, backoff_base=0.05, backoff_cap=0.5)
        rec = Recorder(informer)
        informer.start()
        await informer.wait_for_sync(timeout=10)
        stale_rv = informer.resource_version

        # While the server is down, change the data and compact the history past the informer's RV.
        stop_apiserver(apiserver)
        store = SQLiteStore(str(apiserver.db_path))
        prefix = "/registry/compute.ironcore.dev/machineclasses/_/"
        changed = await store.get(prefix + "change")
        assert changed is not None
        changed["capabilities"]["cpu"] = "8"
        await store.update(prefix + "change", changed)
        fresh = await store.get(prefix + "keep")
        assert fresh is not None
        fresh["metadata"] = {**fresh["metadata"], "name": "fresh", "uid": "0000-fresh"}
        await store.create(prefix + "fresh", fresh)
        await store.delete(prefix + "gone")
        await store.compact(await store.current_revision())
        await store.close()

        restarted = await asyncio.to_thread(start_apiserver, tmp_path, apiserver.db_path, port)
        try:
            with Client(config) as sync, pytest.raises(Expired):
                for _ in sync.watch_raw(informer.info, resource_version=stale_rv, timeout_seconds=2):
                    pass
            await until(lambda: informer.list_count >= 2, what="the relist after 410")
            await until(lambda: len(rec.events) == 6, what="the synthetic differences")
            assert sorted(rec.events[3:]) == [("add", "fresh"), ("delete", "gone"), ("update", "change")]
            assert rec.updates == [("2", "8")]
            assert informer.keys() == ["change", "fresh", "keep"]
            # And it keeps watching from the new list's revision.
            await client.delete(MachineClass, "keep")
            await until(lambda: ("delete", "keep") in rec.events, what="a watch event after the relist")
        finally:
            await informer.stop()
            stop_apiserver(restarted)


async def test_stop_is_clean_while_the_server_is_unreachable() -> None:
    async with AsyncClient(ClientConfig(server="http://127.0.0.1:1")) as client:
        informer = Informer(client, MachineClass, backoff_base=0.01, backoff_cap=0.05)
        task = informer.start()
        await asyncio.sleep(0.2)
        assert not informer.has_synced
        with pytest.raises(TimeoutError):
            await informer.wait_for_sync(timeout=0.1)
        await informer.stop()
        assert task.done()
