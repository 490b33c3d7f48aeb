"""Deliberate garbage collection of runtime objects whose API object is gone.

A poollet's runtime may hold machines or volumes that no API object asks for any more: the API object
was force-deleted, or the poollet was down while it went. Deleting such an orphan is irreversible, so
the collector is careful (learned the hard way: a second installation on the same libvirtd once
collected the first one's volumes):

- only objects that are :attr:`Owner.OURS` are candidates (see :mod:`ironpool.poollet.ownership`);
  foreign and legacy objects are counted and reported, never deleted;
- an orphan is deleted only after it was seen orphaned for ``grace`` seconds *and* in two relists, so
  a fresh or restored database, or an informer that is behind, cannot trigger a mass deletion (after
  ``ironpool restore`` what was made after the backup is such an orphan: reported, with the backup's
  time, for the grace period before it goes);
- at most ``max_per_pass`` deletions per relist, with a warning when the cap holds some back;
- ``policy="report"`` never deletes, it only says what it would collect;
- a failed deletion (a volume still attached to a running domain, say) is retried with backoff and
  shown on the pool; it never stops the poollet.

What it found is published on the pool as a ``GarbageCollection`` condition and as Events on the pool.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from ironpool.api.conditions import condition
from ironpool.poollet.ownership import Owner, Ownership

log = logging.getLogger(__name__)

GCPolicy = Literal["collect", "report"]
CONDITION_TYPE = "GarbageCollection"


@dataclass(frozen=True)
class CollectOptions:
    """How deliberately orphans are collected."""

    policy: GCPolicy = "collect"
    grace: float = 300.0
    max_per_pass: int = 20
    retry_base: float = 5.0
    retry_cap: float = 300.0
    #: when the installation's store was restored, the time its backup was taken: an orphan may then
    #: be what was made after the backup, and its report says so
    restored_from: str = ""


class _Metadata(Protocol):
    id: str
    deleted_at: int

    @property
    def labels(self) -> Mapping[str, str]: ...


class RuntimeObject(Protocol):
    """An IRI machine or volume: what the collector reads of it."""

    @property
    def metadata(self) -> _Metadata: ...


@dataclass
class _Orphan:
    key: str
    uid: str
    first_seen: float
    first_pass: int
    retry_at: float = 0.0
    failures: int = 0
    last_error: str = ""
    announced: bool = False


@dataclass
class CollectionStatus:
    """What the last pass found; published on the pool."""

    foreign: int = 0
    legacy_orphans: int = 0
    pending: int = 0
    failing: int = 0
    collected: int = 0
    last_error: str = ""
    report_only: bool = False

    def condition(self, what: str, grace: float, previous: Any, now: str) -> dict[str, Any]:
        """The pool's ``GarbageCollection`` condition: False only while deletions keep failing."""
        parts = []
        if self.pending:
            verb = "would be collected (gc policy: report)" if self.report_only else (
                f"wait out the {grace:.0f}s grace period")
            parts.append(f"{self.pending} orphaned {what}(s) {verb}")
        if self.failing:
            parts.append(f"{self.failing} failed to delete ({self.last_error})")
        if self.legacy_orphans:
            parts.append(f"{self.legacy_orphans} orphaned {what}(s) without an installation label "
                         "left alone (made before ownership labels)")
        if self.foreign:
            parts.append(f"{self.foreign} {what}(s) of other installations or pools left alone")
        parts.append(f"{self.collected} collected since start")
        if self.failing:
            status, reason = "False", "DeleteFailed"
        elif self.report_only and self.pending:
            status, reason = "True", "ReportOnly"
        elif self.pending:
            status, reason = "True", "OrphansPending"
        else:
            status, reason = "True", "Clean"
        return condition(CONDITION_TYPE, status, reason, "; ".join(parts), previous, now)


@dataclass
class OrphanCollector:
    """Collects the orphans among one pool's runtime objects; :meth:`collect` runs after each relist."""

    what: str  # "machine" or "volume", for messages
    ownership: Ownership
    uid_label: str
    key_of: Callable[[Any], str | None]
    is_live: Callable[[str, str], Awaitable[bool]]
    delete: Callable[[str], Awaitable[object]]
    options: CollectOptions = field(default_factory=CollectOptions)
    report: Callable[[str, str, str], Awaitable[None]] | None = None
    clock: Callable[[], float] = time.monotonic
    status: CollectionStatus = field(default_factory=CollectionStatus)
    passes: int = 0
    _orphans: dict[str, _Orphan] = field(default_factory=dict)
    _noted: set[str] = field(default_factory=set)

    async def collect(self, items: Iterable[RuntimeObject]) -> None:
        """One pass over a fresh listing. Never raises: a failure is retried and reported."""
        self.passes += 1
        now = self.clock()
        status = CollectionStatus(collected=self.status.collected,
                                  report_only=self.options.policy == "report")
        orphaned: set[str] = set()
        listed: set[str] = set()
        due: list[tuple[str, _Orphan]] = []
        for item in items:
            md = item.metadata
            listed.add(md.id)
            if md.deleted_at:
                continue
            owner = self.ownership.classify(md.labels)
            if owner is Owner.FOREIGN:
                status.foreign += 1
                self._note_once(md.id, "%s %s is not this installation's (pool %r, cluster %r); "
                                "leaving it alone", md.labels.get(self.ownership.pool_label),
                                md.labels.get(self.ownership.cluster_label))
                continue
            uid, key = md.labels.get(self.uid_label), self.key_of(item)
            if not uid or key is None or await self._live(key, uid):
                continue
            if owner is Owner.LEGACY:
                status.legacy_orphans += 1
                self._note_once(md.id, "%s %s (for %s, uid %s) predates ownership labels; never collected",
                                key, uid)
                continue
            orphaned.add(md.id)
            orphan = self._orphans.get(md.id)
            if orphan is None:
                orphan = self._orphans[md.id] = _Orphan(key, uid, now, self.passes)
            if (now - orphan.first_seen >= self.options.grace and self.passes > orphan.first_pass
                    and now >= orphan.retry_at):
                due.append((md.id, orphan))
        for gone in set(self._orphans) - orphaned:
            del self._orphans[gone]  # deleted, adopted or its API object came back
        self._noted &= listed
        plan = ("would be deleted (gc policy: report)" if self.options.policy == "report"
                else f"deleting it after a {self.options.grace:.0f}s grace period")
        if self.options.restored_from:
            plan += (f" (the store was restored from a backup taken at {self.options.restored_from}: "
                     "it may have been made after that backup)")
        for oid, orphan in self._orphans.items():
            await self._announce(oid, orphan, plan)
        if self.options.policy == "collect":
            await self._delete_due(due, now, status)
        status.pending = len(self._orphans)
        failing = [o for o in self._orphans.values() if o.failures]
        status.failing = len(failing)
        status.last_error = failing[-1].last_error if failing else ""
        self.status = status

    async def _live(self, key: str, uid: str) -> bool:
        try:
            return await self.is_live(key, uid)
        except Exception as exc:  # the apiserver may be away: unknown is not "gone"
            log.debug("cannot tell whether %s %s (uid %s) exists: %s", self.what, key, uid, exc)
            return True

    async def _delete_due(self, due: list[tuple[str, _Orphan]], now: float, status: CollectionStatus) -> None:
        cap = self.options.max_per_pass
        if len(due) > cap:
            log.warning("%d orphaned %ss are due for collection; deleting %d this pass (the cap per pass)",
                        len(due), self.what, cap)
        for oid, orphan in due[:cap]:
            try:
                await self.delete(oid)
            except Exception as exc:
                orphan.failures += 1
                orphan.last_error = f"{self.what} {oid}: {exc}"
                delay = min(self.options.retry_base * 2 ** (orphan.failures - 1), self.options.retry_cap)
                orphan.retry_at = now + delay
                log.warning("garbage collection of %s %s (%s) failed (attempt %d, next in %.0fs): %s",
                            self.what, oid, orphan.key, orphan.failures, delay, exc)
                if orphan.failures == 1:
                    await self._report("Warning", "GarbageCollectionFailed", orphan.last_error)
                continue
            del self._orphans[oid]
            status.collected += 1
            log.info("garbage-collected IRI %s %s: %s (uid %s) no longer exists", self.what, oid,
                     orphan.key, orphan.uid)
            await self._report("Normal", "GarbageCollected", f"deleted {self.what} {oid} of {orphan.key} "
                               f"(uid {orphan.uid}): it no longer exists")

    async def _announce(self, oid: str, orphan: _Orphan, plan: str) -> None:
        if orphan.announced:
            return
        orphan.announced = True
        message = f"{self.what} {oid} of {orphan.key} (uid {orphan.uid}) is orphaned: {plan}"
        log.warning("%s", message)
        await self._report("Warning", "OrphanFound", message)

    def _note_once(self, oid: str, fmt: str, *args: Any) -> None:
        if oid not in self._noted:
            self._noted.add(oid)
            log.info(fmt, self.what, oid, *args)

    async def _report(self, type_: str, reason: str, message: str) -> None:
        if self.report is None:
            return
        try:
            await self.report(type_, reason, message)
        except Exception as exc:  # events are best effort
            log.debug("could not report %s: %s", reason, exc)
