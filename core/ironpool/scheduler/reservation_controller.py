"""The networked scheduler's side of Reservations: plans written, acceptance told, expiry, and what
Machines use of each.

* A Reservation the scheduler has not answered is planned whole (:mod:`.gang`) in the scheduling
  loop, between decisions, so Machines and plans never count the same room twice; the plan is held in
  the cache at once and written into ``status.pools`` (each pool ``Pending`` with its part) with
  ``Scheduled=True``, on the version the plan was made from. Capacity admission charges it to all
  its pools in that write or refuses it (409): then the plan is dropped and made again on what the
  watch shows. A set that does not fit gets ``Scheduled=False`` naming the shortfall, and holds
  nothing; that answer is final (the spec cannot change; a new Reservation asks again).
* A dry run is planned the same way and answered with the plan (also the part that fits when not
  all of it does), but nothing is held, and it is deleted when its time to live runs out.
* When every pool has accepted its part (the poollets write each pool's ``state``) the Reservation
  gets ``Accepted=True``; when a pool rejected its part, ``Accepted=False`` (it holds nothing then).
* At ``creationTimestamp + ttlSecondsAfterCreation`` it gets ``Expired=True``: what no Machine uses
  is released (Machines within keep their room).
* ``status.pools[].consumed`` shows, per pool, the Machines bound within it by class, written at
  most every :data:`CONSUMED_INTERVAL` per Reservation however many Machines bind.
"""

from __future__ import annotations

import heapq
import logging
import time
from collections.abc import Callable, Coroutine
from fractions import Fraction
from typing import Any

from ironpool.api import reservation as rsv
from ironpool.api.compute import Reservation
from ironpool.api.conditions import SCHEDULED, with_condition
from ironpool.api.errors import ApiError, Conflict, NotFound
from ironpool.api.quantity import Quantity
from ironpool.client.rest import AsyncClient
from ironpool.client.wire import resource_for_model
from ironpool.scheduler.cache import Hold
from ironpool.scheduler.core import SchedulerCore
from ironpool.scheduler.gang import GangPlan
from ironpool.scheduler.reservations import ReservationInfo
from ironpool.scheduler.tasks import TaskSet

log = logging.getLogger(__name__)

RESERVATIONS = resource_for_model(Reservation)
CONSUMED_INTERVAL = 0.5  # seconds between two writes of one Reservation's consumed counts
_RETRY = 1.0  # seconds before a plan whose write was refused for room is made again


def _resources(part: Hold) -> dict[str, str]:
    out = {rsv.class_key(c): str(n) for c, n in sorted(part.classes.items()) if n}
    for r, v in part.block.items():
        out[r] = str(Quantity(Fraction(v, 1000), "DecimalSI") if r == "cpu" else Quantity(v, "BinarySI"))
    return out


def _conditions(obj: dict[str, Any], *changes: tuple[str, str, str, str]) -> list[dict[str, Any]]:
    current = obj
    for ctype, status, reason, message in changes:
        conditions = with_condition(current, ctype, status, reason, message)
        if conditions is not None:
            current = {**current, "status": {**(current.get("status") or {}), "conditions": conditions}}
    return list((current.get("status") or {}).get("conditions") or [])


class ReservationController:
    """Keeps every Reservation's answer, acceptance, expiry and use current (see the module)."""

    def __init__(self, client: AsyncClient, core: SchedulerCore, wake: Callable[[], None],
                 clock: Callable[[], float] = time.time) -> None:
        self.client = client
        self.core = core
        self.wake = wake
        self.clock = clock
        #: keys that may need work, in arrival order
        self._pending: dict[str, None] = {}
        self._timers: list[tuple[float, str]] = []
        self._expiry: dict[str, float] = {}
        self._retry_at: dict[str, float] = {}
        self._consumed_at: dict[str, float] = {}
        self._writing: set[str] = set()
        self._tasks = TaskSet()
        self.planned = 0
        self.rejected = 0
        self.conflicts = 0

    # ---- what the watch says -------------------------------------------------------------------
    def observe(self, info: ReservationInfo) -> None:
        self._pending[info.key] = None
        if info.expires_at is not None and not info.expired and self._expiry.get(info.key) != info.expires_at:
            self._expiry[info.key] = info.expires_at
            heapq.heappush(self._timers, (info.expires_at, info.key))
        self.wake()

    def forget(self, key: str) -> None:
        self._expiry.pop(key, None)
        self._pending.pop(key, None)
        self._retry_at.pop(key, None)
        self._consumed_at.pop(key, None)

    def placements_changed(self, reservation: str) -> None:
        """A Machine within ``reservation`` was bound or left: its consumed counts may be stale."""
        if reservation in self.core.reservations:
            self._pending[reservation] = None
            self.wake()

    # ---- the loop's side -----------------------------------------------------------------------
    def next_in(self) -> float | None:
        """Seconds until there is work without a new event (0: now), or None."""
        now = self.clock()
        times = [t for t in self._retry_at.values()]
        times += [t + CONSUMED_INTERVAL for k, t in self._consumed_at.items() if k in self._pending]
        if self._timers:
            times.append(self._timers[0][0])
        if any(k not in self._retry_at and k not in self._consumed_at for k in self._pending):
            return 0.0
        return max(0.0, min(times) - now) if times else None

    def step(self) -> None:
        """Do what is due: plans are made here (in the scheduling loop), writes run on."""
        now = self.clock()
        while self._timers and self._timers[0][0] <= now:
            _, key = heapq.heappop(self._timers)
            self._pending[key] = None
        for key in list(self._pending):
            if self._retry_at.get(key, 0.0) > now or key in self._writing:
                continue
            self._retry_at.pop(key, None)
            del self._pending[key]
            info = self.core.reservations.get(key)
            if info is not None:
                self._reconcile(info, now)

    def _reconcile(self, info: ReservationInfo, now: float) -> None:
        key = info.key
        if not info.answered:
            if key in self.core.planning:
                return
            plan = self.core.plan_reservation(info)
            if not plan.fits and (self.core.planning or self.core.cache.assumed_count) \
                    and not self.core.refusal_is_final(info):
                # It would fit were the decisions not written yet to fail (another scheduler may have
                # taken their room). A refusal is final, so it waits for them.
                self._retry_at[key] = now + _RETRY / 10
                self._pending[key] = None
                return
            self._spawn(key, self._answer(info, plan))
            return
        if info.expires_at is not None and now >= info.expires_at and not info.expired:
            self._spawn(key, self._expire(info))
            return
        if info.dry_run or info.expired or not info.states:
            return
        states = info.states
        rejected = sorted(p for p, s in states.items() if s == rsv.REJECTED)
        if rejected and info.accepted_reason != "Rejected":
            message = f"rejected by the runtime of pool {', '.join(rejected)}; nothing is held any more"
            self._spawn(key, self._conditions(info, (rsv.ACCEPTED_CONDITION, "False", "Rejected", message)))
            return
        accepted = all(s == rsv.ACCEPTED for s in states.values())
        if not rejected and accepted and info.accepted_condition != "True":
            pools = f"{len(states)} pool{'s' if len(states) != 1 else ''}"
            message = f"accepted by {pools}: {', '.join(sorted(states))}"
            self._spawn(key, self._conditions(info, (rsv.ACCEPTED_CONDITION, "True", "Accepted", message)))
            return
        if info.holds and self._consumed(info) != self._written_consumed(info):
            last = self._consumed_at.get(key, 0.0)
            if now - last < CONSUMED_INTERVAL:
                self._pending[key] = None  # due when the interval has passed
                return
            self._consumed_at[key] = now
            self._spawn(key, self._write_consumed(info))

    def _spawn(self, key: str, coro: Coroutine[Any, Any, None]) -> None:
        self._writing.add(key)

        async def run() -> None:
            try:
                await coro
            except (Conflict, NotFound):
                self.conflicts += 1
            except ApiError as exc:
                log.warning("reservation %s: %s", key, exc)
                self._retry_at[key] = self.clock() + _RETRY
                self._pending[key] = None
            finally:
                self._writing.discard(key)
                self.wake()

        self._tasks.spawn(run())

    async def stop(self) -> None:
        await self._tasks.stop()

    # ---- writes ----------------------------------------------------------------------------------
    async def _patch(self, info: ReservationInfo, status: dict[str, Any]) -> None:
        patch = {"metadata": {"resourceVersion": info.resource_version}, "status": status}
        await self.client.patch_raw(RESERVATIONS, info.name, patch, info.namespace, subresource="status")

    async def _answer(self, info: ReservationInfo, plan: GangPlan) -> None:
        """Write the plan (or the refusal); a refused write drops the plan held in the cache."""
        message = plan.message(self.core.cache)
        if info.dry_run:
            reason = "Fits" if plan.fits else "DoesNotFit"
        else:
            reason = "Planned" if plan.fits else "Unschedulable"
        changes = [(SCHEDULED, "True" if plan.fits else "False", reason, message)]
        status: dict[str, Any] = {}
        if plan.fits or info.dry_run:
            status["pools"] = [{"ref": pool, "state": rsv.PENDING, "resources": _resources(part)}
                               for pool, part in sorted(plan.parts.items())]
        if plan.fits and not info.dry_run:
            changes.append((rsv.ACCEPTED_CONDITION, "False", "Pending",
                            f"waiting for {len(plan.parts)} pool{'s' if len(plan.parts) != 1 else ''} to "
                            f"accept their part"))
        status["conditions"] = _conditions(info.obj, *changes)
        try:
            await self._patch(info, status)
        except Conflict as exc:
            self.core.drop_plan(info.key)
            if "too little" in str(exc) or "does not exist" in str(exc):
                # Another scheduler or apiserver took the room meanwhile: plan again shortly.
                self._retry_at[info.key] = self.clock() + _RETRY / 10
                self._pending[info.key] = None
            raise
        except BaseException:
            self.core.drop_plan(info.key)
            raise
        if plan.fits:
            self.planned += 1
        else:
            self.rejected += 1
        log.info("reservation %s: %s", info.key, message)

    async def _conditions(self, info: ReservationInfo, *changes: tuple[str, str, str, str]) -> None:
        await self._patch(info, {"conditions": _conditions(info.obj, *changes)})

    async def _expire(self, info: ReservationInfo) -> None:
        if info.dry_run:
            await self.client.delete_raw(RESERVATIONS, info.name, info.namespace,
                                         resource_version=info.resource_version)
            return
        ttl = (info.obj.get("spec") or {}).get("ttlSecondsAfterCreation")
        await self._conditions(info, (rsv.EXPIRED, "True", "TTLExpired",
                                      f"released what no machine used after {ttl}s"))

    def _consumed(self, info: ReservationInfo) -> dict[str, dict[str, str]]:
        """Per pool, the Machines bound within it by class, as ``status.pools[].consumed``."""
        out: dict[str, dict[str, str]] = {}
        for pool in info.holds:
            classes = self.core.cache.within_classes.get((pool, info.key), {})
            out[pool] = {rsv.class_key(c): str(n) for c, n in sorted(classes.items()) if n}
        return out

    @staticmethod
    def _written_consumed(info: ReservationInfo) -> dict[str, dict[str, str]]:
        return {str(e["ref"]): dict(e.get("consumed") or {}) for e in rsv.pool_entries(info.obj)
                if e["ref"] in info.holds}

    async def _write_consumed(self, info: ReservationInfo) -> None:
        consumed = self._consumed(info)
        pools = []
        for entry in rsv.pool_entries(info.obj):
            entry = dict(entry)
            if entry["ref"] in consumed:
                if consumed[entry["ref"]]:
                    entry["consumed"] = consumed[entry["ref"]]
                else:
                    entry.pop("consumed", None)
            pools.append(entry)
        await self._patch(info, {"pools": pools})
