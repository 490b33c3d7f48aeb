"""What only the etcd backend has: its URL, its layout in etcd, TLS, several members and failover,
compaction shared by several stores, and a write whose answer was lost."""

from __future__ import annotations

import asyncio
import itertools
import socket
from collections.abc import Iterator
from typing import Any

import grpc
import pytest
from aetcd import rpc
from ironpool.store.etcd import EtcdStore, parse_url
from ironpool.store.etcd_client import EtcdTls
from ironpool.store.etcd_codec import WatchedEvent
from ironpool.store.interface import DECODED_MAX, RevisionCompacted, StoreError, open_store

from tests.helpers import etcd as helper
from tests.helpers.etcd import EtcdCluster, etcd_cluster
from tests.helpers.wait import eventually

P = "/registry/compute.ironcore.dev/machines/default/"
_ROOTS = itertools.count()


def doc(name: str, **spec: Any) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Thing", "metadata": {"name": name}, "spec": spec}


def root() -> str:
    return f"/etcd-test-{next(_ROOTS)}"


def test_a_watch_event_decodes_its_document_on_first_use_only() -> None:
    small = WatchedEvent("ADDED", "/k", b'{"metadata":{"resourceVersion":"7"},"spec":{"a":1}}', 7)
    held = small.held_bytes
    first = small.object
    assert first == {"metadata": {"resourceVersion": "7"}, "spec": {"a": 1}}
    assert small.object is first  # decoded once, then shared
    assert small.held_bytes == held  # the ring's byte count does not move when a reader decodes
    big_raw = b'{"metadata":{},"spec":{"x":"%s"}}' % (b"y" * DECODED_MAX)
    big = WatchedEvent("MODIFIED", "/k", big_raw, 8)
    assert big.object["spec"]["x"] == "y" * DECODED_MAX
    assert big.object is not big.object  # too large to keep decoded beside its JSON
    assert big.held_bytes == len(big_raw)


def test_url_endpoints_prefix_and_options() -> None:
    assert parse_url("h1:2379,h2:2379,[::1]:2380/ironpool/a?ring=10&compaction-interval=5m") == (
        ["h1:2379", "h2:2379", "[::1]:2380"], "/ironpool/a", {"ring": "10", "compaction-interval": "5m"})
    store = open_store("etcd://127.0.0.1:2379/x?ring=16&compaction-interval=90s")
    assert isinstance(store, EtcdStore)
    assert (store.prefix, store.ring_size, store.compaction_interval) == ("/x", 16, 90.0)
    with pytest.raises(ValueError, match=r"etcd endpoint 'h2' is not HOST:PORT"):
        open_store("etcd://h1:2379,h2")
    with pytest.raises(ValueError, match=r"unknown etcd option\(s\) \['histroy'\]"):
        open_store("etcd://h1:2379?histroy=5")
    with pytest.raises(ValueError, match="compaction-interval='soon' must be a duration"):
        open_store("etcd://h1:2379?compaction-interval=soon")
    with pytest.raises(ValueError, match="ring='0' must be a positive integer"):
        open_store("etcd://h1:2379?ring=0")
    with pytest.raises(ValueError, match="only apply to an etcd:// store"):
        open_store("sqlite:///tmp/x.db", etcd_tls=EtcdTls(ca_file="/ca"))
    with pytest.raises(ValueError, match="--etcd-certfile and --etcd-keyfile go together"):
        EtcdTls(cert_file="/c")


async def test_layout_in_etcd_and_values_written_by_others(etcd_cluster: EtcdCluster) -> None:
    prefix = root()
    store = EtcdStore(etcd_cluster.endpoints + prefix, compaction_interval=0)
    try:
        created = await store.create(P + "a", doc("a", x=1))
        channel = grpc.aio.insecure_channel(etcd_cluster.members[0].endpoint)
        kv = rpc.KVStub(channel)
        stored = (await kv.Range(rpc.RangeRequest(key=f"{prefix}{P}a".encode()))).kvs[0]
        # The value leaves the version to etcd's mod_revision, as Kubernetes does.
        assert stored.value.startswith(b'{"metadata":{"name":"a"}')
        assert stored.mod_revision == int(created["metadata"]["resourceVersion"])
        # Something else wrote a document in another shape: it still reads, with its revision.
        put = await kv.Put(rpc.PutRequest(key=f"{prefix}{P}b".encode(), value=b'{"kind":"Thing","spec":{}}'))
        got = await store.get(P + "b")
        assert got == {"kind": "Thing", "spec": {}, "metadata": {"resourceVersion": str(put.header.revision)}}
        page = await store.list_raw(P)
        assert [len(item) > 0 for item in page.items] == [True, True]
        await channel.close()
    finally:
        await store.close()


@pytest.fixture(scope="module")
def three_members() -> Iterator[EtcdCluster]:
    with etcd_cluster(3) as cluster:
        yield cluster


async def test_writes_and_watches_go_on_when_a_member_dies(three_members: EtcdCluster) -> None:
    cluster = three_members
    store = EtcdStore(cluster.endpoints + root(), compaction_interval=0)
    try:
        base = await store.current_revision()
        watch = aiter(store.watch(P, base))
        first = await store.create(P + "m0", doc("m0"))
        event = await asyncio.wait_for(anext(watch), 10)
        assert event.revision == int(first["metadata"]["resourceVersion"])
        victim = cluster.members[store.conn.current]
        cluster.kill(victim)  # the member this store talks to
        written = [first]
        for i in range(1, 20):
            written.append(await store.create(P + f"m{i}", doc(f"m{i}")))
        assert store.conn.endpoints[store.conn.current] != victim.endpoint
        seen = [await asyncio.wait_for(anext(watch), 15) for _ in range(19)]
        assert [e.key for e in seen] == [P + f"m{i}" for i in range(1, 20)]
        assert len((await store.list(P)).items) == 20
    finally:
        await store.close()
        cluster.start(victim)
        cluster.wait_ready()


async def test_tls_with_client_certificates() -> None:
    with etcd_cluster(1, tls=True) as cluster:
        assert cluster.tls is not None
        tls = EtcdTls(str(cluster.tls.ca), str(cluster.tls.cert), str(cluster.tls.key))
        store = open_store(cluster.url("/tls"), etcd_tls=tls)
        try:
            created = await store.create(P + "a", doc("a"))
            assert (await store.get(P + "a")) == created
        finally:
            await store.close()
        # Without a client certificate the members refuse the connection.
        anonymous = EtcdStore(cluster.endpoints, tls=EtcdTls(ca_file=str(cluster.tls.ca)))
        anonymous.conn.retry_deadline = 1.0
        try:
            with pytest.raises(StoreError, match="etcd read schema version"):
                await anonymous.get(P + "a")
        finally:
            await anonymous.close()


async def test_one_of_several_stores_compacts_each_interval(etcd_cluster: EtcdCluster) -> None:
    prefix = root()
    stores = [EtcdStore(etcd_cluster.endpoints + prefix, compaction_interval=0.2) for _ in range(2)]
    try:
        start = await stores[0].current_revision()
        await stores[1].create(P + "a", doc("a"))

        async def compacted() -> bool:
            await stores[0].create(P + f"x{await stores[0].current_revision()}", doc("x"))
            try:
                await stores[0].list(P, revision=start)
            except RevisionCompacted:
                return True
            return False

        await eventually(compacted, timeout=10, message="compaction past the first revision")
        with pytest.raises(RevisionCompacted):
            await anext(aiter(stores[1].watch(P, start)))
    finally:
        for store in stores:
            await store.close()


class _LostAnswer:
    """A KV stub whose first Txn commits in etcd but whose answer never arrives."""

    def __init__(self, real: Any) -> None:
        self.real = real
        self.lost = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.real, name)

    async def Txn(self, request: Any, timeout: float | None = None) -> Any:
        answer = await self.real.Txn(request, timeout=timeout)
        if not self.lost:
            self.lost += 1
            raise grpc.aio.AioRpcError(grpc.StatusCode.UNAVAILABLE, grpc.aio.Metadata(), grpc.aio.Metadata(),
                                       "connection reset")
        return answer


async def test_a_write_whose_answer_was_lost_is_acknowledged_once(etcd_cluster: EtcdCluster) -> None:
    store = EtcdStore(etcd_cluster.endpoints + root(), compaction_interval=0)
    try:
        await store.current_revision()
        real_kv = store.conn.kv

        def lossy() -> tuple[int, Any]:
            return real_kv()[0], stub

        stub = _LostAnswer(real_kv()[1])
        store.conn.kv = lossy  # type: ignore[method-assign]
        created = await store.create(P + "a", doc("a", x=1))  # retried: finds its own create, no KeyExists
        assert stub.lost == 1
        assert await store.get(P + "a") == created
        stub.lost = 0
        rv = int(created["metadata"]["resourceVersion"])
        updated = await store.update(P + "a", doc("a", x=2), expected_revision=rv)  # retried: finds its own
        assert stub.lost == 1
        assert (await store.get(P + "a")) == updated and updated["spec"] == {"x": 2}
    finally:
        await store.close()


async def test_get_recent_needs_no_round_trip_and_the_feed_moves_it_on(etcd_cluster: EtcdCluster) -> None:
    prefix = root()
    mine, other = (EtcdStore(etcd_cluster.endpoints + prefix, compaction_interval=0) for _ in range(2))
    try:
        created = await mine.create(P + "a", doc("a", x=1))
        ranges = 0
        real_kv = mine.conn.kv

        class Counting:
            def __getattr__(self, name: str) -> Any:
                return getattr(real_kv()[1], name)

            async def Range(self, request: Any, timeout: float | None = None) -> Any:
                nonlocal ranges
                ranges += 1
                return await real_kv()[1].Range(request, timeout=timeout)

        mine.conn.kv = lambda: (real_kv()[0], Counting())  # type: ignore[method-assign]
        assert await mine.get_recent(P + "a") == created
        assert ranges == 0  # its own write's answer
        watch = aiter(mine.watch(P, int(created["metadata"]["resourceVersion"])))  # starts the feed
        moved = await other.update(P + "a", doc("a", x=2))
        assert (await asyncio.wait_for(anext(watch), 5)).revision == int(moved["metadata"]["resourceVersion"])
        ranges = 0
        assert await mine.get_recent(P + "a") == moved  # the feed's event, no read
        assert ranges == 0
        await other.delete(P + "a")
        await asyncio.wait_for(anext(watch), 5)
        assert await mine.get_recent(P + "a") is None and ranges == 1  # gone from the cache: read
    finally:
        await mine.close()
        await other.close()


def test_the_test_cluster_started_on_a_port_taken_meanwhile_starts_anew_on_others(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The suite's etcd helper: another process can bind a picked port before etcd does (CI lost two
    tests that way); the helper then starts the cluster again on other ports instead of failing."""
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        taken = busy.getsockname()[1]
        picks = itertools.chain([taken], iter(helper.free_port, None))
        monkeypatch.setattr(helper, "free_port", lambda: next(picks))
        with etcd_cluster() as cluster:
            assert cluster.members[0].client_port != taken
            assert cluster.members[0].alive
            first_log = cluster.members[0].log_path.parent.parent / "1" / "m0.log"
            assert "address already in use" in first_log.read_text()
