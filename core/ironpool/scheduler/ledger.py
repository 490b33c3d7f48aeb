"""The pool claim ledger: optimistic concurrency between scheduler processes.

Each scheduler decides against its own cache, so two of them can pick the same last free slot for
two *different* Machines; a resourceVersion precondition on the Machine cannot see that. Before
binding, a scheduler therefore claims the object's resources in the pool's annotation
``scheduler.ironpool.dev/claims`` ({uid: [unix time, demand]}) with a merge patch carrying the
pool's resourceVersion (compare-and-swap). The claim is only written if everything claimed in the
ledger plus what the scheduler knows is bound there still leaves room; a lost race (409) re-reads
the pool and checks again. The cache charges a claimed object once, through its claim.

The ledger is opt-in (``poolLedger: true``): the apiserver itself refuses a bind that would overcommit
a pool (apiserver/admission.py), which makes concurrent schedulers safe without these extra writes.
A ledger still saves lost binds when many schedulers contend for nearly full pools.

Claims are pruned when their object is known deleted or bound to another pool, and when an
object's claim is older than the assume TTL while the object is still unbound (a binder that died).
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from typing import Any

from ironpool.api import MachinePool, VolumePool
from ironpool.api.errors import Conflict, NotFound
from ironpool.client.rest import AsyncClient
from ironpool.client.wire import resource_for_model
from ironpool.scheduler.cache import SchedulerCache
from ironpool.scheduler.model import CLAIMS_ANNOTATION, Kind, PoolInfo, encode_claims, pool_from_json

_POOL_MODELS: dict[Kind, Any] = {"machine": MachinePool, "volume": VolumePool}
_ATTEMPTS = 8


class ClaimRejected(Exception):
    """The pool no longer has room once the ledger is taken into account."""


#: (kind, uid) -> "deleted" | "bound:<pool>" | "unbound" | None (unknown)
UidState = Callable[[Kind, str], str | None]


class PoolLedger:
    """Claims and releases on pool ledgers, serialised per pool within this process."""

    def __init__(self, client: AsyncClient, cache: SchedulerCache, uid_state: UidState,
                 ttl: float) -> None:
        self.client = client
        self.cache = cache
        self.uid_state = uid_state
        self.ttl = ttl
        self._locks: dict[tuple[Kind, str], asyncio.Lock] = {}
        #: the newest pool document this process wrote (the informer may not have delivered it yet)
        self._latest: dict[tuple[Kind, str], dict[str, Any]] = {}

    def _lock(self, kind: Kind, pool: str) -> asyncio.Lock:
        return self._locks.setdefault((kind, pool), asyncio.Lock())

    def observe_pool(self, kind: Kind, doc: dict[str, Any]) -> None:
        """Informer event: forget our own copy once the informer has caught up with it."""
        key = (kind, str((doc.get("metadata") or {}).get("name", "")))
        mine = self._latest.get(key)
        if mine is not None and _rv(doc) >= _rv(mine):
            del self._latest[key]

    async def _read(self, kind: Kind, pool: str, fresh: bool) -> PoolInfo:
        """The newest pool we know: our last write or the informer's copy; a GET when told to."""
        if not fresh:
            mine = self._latest.get((kind, pool))
            cached = self.cache.pools.get((kind, pool))
            if mine is not None and (cached is None or _rv(mine) >= _int(cached.resource_version)):
                return pool_from_json(kind, mine)
            if cached is not None:
                return cached
        doc = await self.client.get_raw(resource_for_model(_POOL_MODELS[kind]), pool)
        return pool_from_json(kind, doc)

    def _prune(self, kind: Kind, pool: PoolInfo, now: float) -> dict[str, tuple[float, dict[str, int]]]:
        kept: dict[str, tuple[float, dict[str, int]]] = {}
        for uid, (t, demand) in pool.claims.items():
            state = self.uid_state(kind, uid)
            if state == "deleted" or (state is not None and state.startswith("bound:")
                                      and state != f"bound:{pool.name}"):
                continue
            if state == "unbound" and now - t > self.ttl:
                continue
            kept[uid] = (t, demand)
        return kept

    def _used(self, kind: Kind, pool: PoolInfo, claims: dict[str, tuple[float, dict[str, int]]],
              exclude_uid: str) -> dict[str, int]:
        used: dict[str, int] = {}
        for uid, (_, demand) in claims.items():
            if uid != exclude_uid:
                for r, v in demand.items():
                    used[r] = used.get(r, 0) + v
        for p in self.cache.placements_on(kind, pool.name):
            if p.uid != exclude_uid and p.uid not in claims and p.demand is not None:
                for r, v in p.demand.items():
                    used[r] = used.get(r, 0) + v
        return used

    async def _write(self, kind: Kind, pool: PoolInfo,
                     claims: dict[str, tuple[float, dict[str, int]]]) -> None:
        info = resource_for_model(_POOL_MODELS[kind])
        patch = {"metadata": {"resourceVersion": pool.resource_version,
                              "annotations": {CLAIMS_ANNOTATION: encode_claims(claims)}}}
        self._latest[(kind, pool.name)] = await self.client.patch_raw(info, pool.name, patch)

    async def claim(self, kind: Kind, pool_name: str, uid: str, demand: dict[str, int]) -> None:
        """Record ``uid``'s demand on the pool, or raise ClaimRejected/Conflict."""
        async with self._lock(kind, pool_name):
            fresh = False
            for _ in range(_ATTEMPTS):
                pool = await self._read(kind, pool_name, fresh)
                now = time.time()
                claims = self._prune(kind, pool, now)
                used = self._used(kind, pool, claims, uid)
                for r, d in demand.items():
                    if pool.allocatable.get(r, 0) - used.get(r, 0) < d:
                        raise ClaimRejected(f"pool {pool_name} has too little {r} once claims are counted")
                claims[uid] = (now, dict(demand))
                try:
                    await self._write(kind, pool, claims)
                    return
                except Conflict:
                    fresh = True  # another writer got there first: read it again and re-check
            raise Conflict(f"pool {pool_name}: ledger contended, giving up for now")

    async def release(self, kind: Kind, pool_name: str, uid: str) -> None:
        """Drop ``uid``'s claim (the bind failed); best effort, stale claims are pruned later."""
        async with self._lock(kind, pool_name):
            fresh = False
            for _ in range(_ATTEMPTS):
                try:
                    pool = await self._read(kind, pool_name, fresh)
                except NotFound:
                    return
                if uid not in pool.claims:
                    return
                claims = self._prune(kind, pool, time.time())
                claims.pop(uid, None)
                try:
                    await self._write(kind, pool, claims)
                    return
                except Conflict:
                    fresh = True

    async def prune(self, kind: Kind, pool_name: str) -> None:
        """Rewrite the ledger without claims of deleted/moved/abandoned objects (if any)."""
        async with self._lock(kind, pool_name):
            try:
                pool = await self._read(kind, pool_name, False)
            except NotFound:
                return
            claims = self._prune(kind, pool, time.time())
            if len(claims) != len(pool.claims):
                # a lost race means someone else rewrote it; the next claim prunes anyway
                with contextlib.suppress(Conflict, NotFound):
                    await self._write(kind, pool, claims)


def _int(v: object) -> int:
    try:
        return int(str(v))
    except ValueError:
        return 0


def _rv(doc: dict[str, Any]) -> int:
    return _int((doc.get("metadata") or {}).get("resourceVersion", "0"))
