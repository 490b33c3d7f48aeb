"""The orphan collector on its own: ownership, grace over two relists, the cap, report mode, failures."""

from __future__ import annotations

from dataclasses import dataclass, field

from ironpool.poollet import keys
from ironpool.poollet.collector import CollectOptions, OrphanCollector
from ironpool.poollet.ownership import Owner, Ownership

POOL, CLUSTER = "pool-a", "cluster-1"
OWN = Ownership(keys.MACHINE_POOL_LABEL, keys.MACHINE_CLUSTER_LABEL, POOL, CLUSTER)


@dataclass
class Meta:
    id: str
    labels: dict[str, str]
    deleted_at: int = 0


@dataclass
class Obj:
    metadata: Meta


def obj(oid: str, pool: str | None = POOL, cluster: str | None = CLUSTER, uid: str | None = None) -> Obj:
    labels = {keys.MACHINE_UID_LABEL: uid or f"uid-{oid}", keys.MACHINE_NAMESPACE_LABEL: "default",
              keys.MACHINE_NAME_LABEL: oid}
    if pool is not None:
        labels[keys.MACHINE_POOL_LABEL] = pool
    if cluster is not None:
        labels[keys.MACHINE_CLUSTER_LABEL] = cluster
    return Obj(Meta(oid, labels))


@dataclass
class World:
    """A runtime's objects, the API's live uids, a clock, and what the collector did."""

    objects: dict[str, Obj] = field(default_factory=dict)
    live: set[str] = field(default_factory=set)
    now: float = 0.0
    fail: dict[str, str] = field(default_factory=dict)
    deletes: list[str] = field(default_factory=list)
    reports: list[tuple[str, str, str]] = field(default_factory=list)

    def collector(self, **opts: object) -> OrphanCollector:
        async def is_live(key: str, uid: str) -> bool:
            return uid in self.live

        async def delete(oid: str) -> None:
            self.deletes.append(oid)
            if oid in self.fail:
                raise RuntimeError(self.fail[oid])
            self.objects.pop(oid, None)

        async def report(type_: str, reason: str, message: str) -> None:
            self.reports.append((type_, reason, message))

        def key_of(o: Obj) -> str:
            return f"default/{o.metadata.labels[keys.MACHINE_NAME_LABEL]}"

        return OrphanCollector("machine", OWN, keys.MACHINE_UID_LABEL, key_of, is_live, delete,
                               CollectOptions(**opts), report, lambda: self.now)  # type: ignore[arg-type]

    def add(self, *objs: Obj) -> None:
        for o in objs:
            self.objects[o.metadata.id] = o

    async def relist(self, c: OrphanCollector, after: float = 1.0) -> None:
        self.now += after
        await c.collect(list(self.objects.values()))


def test_ownership_classifies_by_pool_and_cluster() -> None:
    assert OWN.classify(obj("a").metadata.labels) is Owner.OURS
    assert OWN.classify(obj("a", cluster=None).metadata.labels) is Owner.LEGACY
    assert OWN.classify(obj("a", cluster="other").metadata.labels) is Owner.FOREIGN
    assert OWN.classify(obj("a", pool="pool-b").metadata.labels) is Owner.FOREIGN
    assert OWN.classify(obj("a", pool=None, cluster=None).metadata.labels) is Owner.FOREIGN
    assert OWN.labels() == {keys.MACHINE_POOL_LABEL: POOL, keys.MACHINE_CLUSTER_LABEL: CLUSTER}


async def test_an_orphan_waits_out_the_grace_period_and_a_second_relist() -> None:
    w = World()
    w.add(obj("orphan"), obj("alive"))
    w.live.add("uid-alive")
    c = w.collector(grace=10.0)
    await w.relist(c)
    assert w.deletes == [] and c.status.pending == 1
    await w.relist(c, after=5.0)  # second relist, but within the grace period
    assert w.deletes == []
    await w.relist(c, after=5.0)
    assert w.deletes == ["orphan"] and set(w.objects) == {"alive"}
    assert c.status.collected == 1 and c.status.pending == 0
    assert [r[1] for r in w.reports] == ["OrphanFound", "GarbageCollected"]


async def test_after_a_restore_an_orphan_report_names_the_backup() -> None:
    w = World()
    w.add(obj("made-after-backup"))
    c = w.collector(grace=10.0, restored_from="2026-11-28T03:00:00Z")
    await w.relist(c)
    await w.relist(c, after=5.0)
    assert w.deletes == []  # reported, not deleted, within the grace period
    (found,) = [r for r in w.reports if r[1] == "OrphanFound"]
    assert "restored from a backup taken at 2026-11-28T03:00:00Z" in found[2]
    assert "made-after-backup" in found[2]


async def test_grace_zero_still_needs_two_relists() -> None:
    w = World()
    w.add(obj("orphan"))
    c = w.collector(grace=0.0)
    await w.relist(c, after=100.0)
    assert w.deletes == []
    await w.relist(c)
    assert w.deletes == ["orphan"]


async def test_an_orphan_whose_object_comes_back_is_forgotten() -> None:
    w = World()
    w.add(obj("x"))
    c = w.collector(grace=1.0)
    await w.relist(c)
    w.live.add("uid-x")  # the informer was behind; the Machine exists after all
    await w.relist(c, after=10.0)
    w.live.clear()  # gone again: the grace period starts over
    await w.relist(c, after=10.0)
    assert w.deletes == []
    await w.relist(c, after=10.0)
    assert w.deletes == ["x"]


async def test_foreign_and_legacy_objects_are_never_deleted_only_counted() -> None:
    w = World()
    w.add(obj("other-cluster", cluster="c2"), obj("other-pool", pool="pool-b"), obj("bare", pool=None,
                                                                                      cluster=None),
          obj("legacy", cluster=None))
    c = w.collector(grace=0.0)
    for _ in range(5):
        await w.relist(c, after=1000.0)
    assert w.deletes == [] and len(w.objects) == 4
    assert (c.status.foreign, c.status.legacy_orphans, c.status.pending) == (3, 1, 0)
    cond = c.status.condition("machine", 0.0, None, "now")
    assert cond["status"] == "True" and cond["reason"] == "Clean"
    assert "3 machine(s) of other installations or pools left alone" in cond["message"]


async def test_report_policy_never_deletes_and_says_so() -> None:
    w = World()
    w.add(obj("a"), obj("b"))
    c = w.collector(policy="report", grace=0.0)
    for _ in range(4):
        await w.relist(c, after=10.0)
    assert w.deletes == [] and c.status.pending == 2
    cond = c.status.condition("machine", 0.0, None, "now")
    assert cond["reason"] == "ReportOnly" and "would be collected" in cond["message"]
    assert sum(r[1] == "OrphanFound" for r in w.reports) == 2  # once per orphan, not per pass


async def test_at_most_max_per_pass_deletions() -> None:
    w = World()
    w.add(*(obj(f"o{i}") for i in range(7)))
    c = w.collector(grace=0.0, max_per_pass=3)
    await w.relist(c)
    await w.relist(c)
    assert len(w.deletes) == 3
    await w.relist(c)
    assert len(w.deletes) == 6
    await w.relist(c)
    assert len(w.deletes) == 7 and w.objects == {}


async def test_a_failing_delete_backs_off_is_reported_and_never_raises() -> None:
    w = World()
    w.add(obj("stuck"), obj("fine"))
    w.fail["stuck"] = "FAILED_PRECONDITION: still attached to domain x"
    c = w.collector(grace=0.0, retry_base=10.0)
    await w.relist(c)
    await w.relist(c)  # both due: "fine" goes, "stuck" fails
    assert w.deletes == ["stuck", "fine"]
    assert c.status.failing == 1 and "still attached" in c.status.last_error
    cond = c.status.condition("machine", 0.0, None, "now")
    assert (cond["status"], cond["reason"]) == ("False", "DeleteFailed")
    await w.relist(c, after=1.0)  # inside the backoff: no new attempt
    assert w.deletes == ["stuck", "fine"]
    await w.relist(c, after=10.0)
    assert w.deletes == ["stuck", "fine", "stuck"]
    del w.fail["stuck"]
    await w.relist(c, after=20.0)
    assert w.objects == {} and c.status.failing == 0 and c.status.collected == 2
    assert sum(r[1] == "GarbageCollectionFailed" for r in w.reports) == 1


async def test_an_api_error_while_checking_counts_as_alive() -> None:
    w = World()
    w.add(obj("x"))
    c = w.collector(grace=0.0)

    async def broken(key: str, uid: str) -> bool:
        raise ConnectionError("apiserver away")

    c.is_live = broken
    for _ in range(3):
        await w.relist(c)
    assert w.deletes == [] and c.status.pending == 0
