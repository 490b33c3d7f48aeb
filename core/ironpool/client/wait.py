"""One wait for every front end: until named objects reach a :mod:`~ironpool.client.readiness`, with a
deadline, progress as it happens, and an early end when the scheduler says no pool can take one.

A wait lists the objects once, then watches them from that revision, so it ends within milliseconds
of the change that makes them ready and costs no polling; a stream the server ends (its timeout, a
compaction) is followed by a fresh list. Each object's verdict is passed to ``progress`` whenever
its one-line account changes (the CLI prints it; the IaC front ends keep the last for their
messages). With ``fail_unschedulable``, a wait fails once an object's scheduler reason has said for
``settle`` seconds that only a change to the fleet can place it (a class just created may take its
pools a moment to offer); a Machine that waits for capacity keeps waiting. An object deleted while
the wait wants it in some state fails the wait at once, and so does one that can never be ready
(a Reservation refused whole: :attr:`~ironpool.client.readiness.Verdict.failed`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Collection, Mapping
from typing import TYPE_CHECKING, Any

from ironpool.api.errors import Expired
from ironpool.client.readiness import Readiness, Verdict

if TYPE_CHECKING:
    from ironpool.api.resource_info import ResourceInfo
    from ironpool.client.rest import Client

Obj = dict[str, Any]
Progress = Callable[[str, Verdict], None]

#: Seconds a "no pool can take it until the fleet changes" reason must hold before a wait gives up.
UNSCHEDULABLE_SETTLE = 3.0


class WaitError(Exception):
    """A wait ended before every object was done: ``last`` holds each object as last seen (None:
    it does not exist) and ``pending`` the verdict of each one not done."""

    def __init__(self, message: str, last: Mapping[str, Obj | None], pending: Mapping[str, Verdict]) -> None:
        super().__init__(message)
        self.last = dict(last)
        self.pending = dict(pending)


class WaitTimeout(WaitError):
    """The deadline passed first."""


class Unschedulable(WaitError):
    """The scheduler says no pool can take an object until the fleet changes; ``reason`` says why."""

    def __init__(self, message: str, last: Mapping[str, Obj | None], pending: Mapping[str, Verdict],
                 name: str, reason: str) -> None:
        super().__init__(message, last, pending)
        self.name = name
        self.reason = reason


class Gone(WaitError):
    """An object (``name``) was deleted while the wait wanted it in some state."""

    def __init__(self, message: str, last: Mapping[str, Obj | None], pending: Mapping[str, Verdict],
                 name: str) -> None:
        super().__init__(message, last, pending)
        self.name = name


def key_of(obj: Obj, across_namespaces: bool) -> str:
    """How a wait names an object: ``name``, or ``namespace/name`` when it spans every namespace."""
    meta = obj.get("metadata") or {}
    name = str(meta.get("name") or "")
    return f"{meta.get('namespace')}/{name}" if across_namespaces else name


def pending_summary(pending: Mapping[str, Verdict], limit: int = 5) -> str:
    """``web-1: on pool p1: state Pending; web-2: ...`` for the first ``limit`` objects."""
    shown = [f"{name}: {v.progress}" for name, v in sorted(pending.items())[:limit]]
    more = len(pending) - limit
    return "; ".join(shown) + (f"; and {more} more" if more > 0 else "")


class _Tracker:
    """The objects of one wait: their last state, verdicts, and since when each is unschedulable."""

    def __init__(self, names: Collection[str], readiness: Readiness, progress: Progress | None) -> None:
        self.names = set(names)
        self.readiness = readiness
        self.progress = progress
        self.latest: dict[str, Obj | None] = dict.fromkeys(self.names)
        self.seen: set[str] = set()
        self.verdicts: dict[str, Verdict] = {}
        self.stuck_since: dict[str, float] = {}

    def update(self, name: str, obj: Obj | None) -> None:
        self.latest[name] = obj
        if obj is not None:
            self.seen.add(name)
        verdict = self.readiness(obj)
        previous = self.verdicts.get(name)
        self.verdicts[name] = verdict
        if verdict.unschedulable:
            if previous is None or previous.unschedulable != verdict.unschedulable:
                self.stuck_since[name] = time.monotonic()
        else:
            self.stuck_since.pop(name, None)
        if self.progress is not None and (previous is None or previous.progress != verdict.progress):
            self.progress(name, verdict)

    @property
    def pending(self) -> dict[str, Verdict]:
        return {n: v for n, v in self.verdicts.items() if not v.done}

    def vanished(self) -> str | None:
        """An object seen during the wait that no longer exists, when the wait wants it to."""
        for name in sorted(self.seen):
            if self.latest.get(name) is None and not self.verdicts[name].done:
                return name
        return None

    def settled(self, settle: float) -> str | None:
        """An object whose fleet-bound reason has held for ``settle`` seconds."""
        now = time.monotonic()
        for name, since in sorted(self.stuck_since.items()):
            if now - since >= settle:
                return name
        return None

    def next_settle(self, settle: float) -> float | None:
        """Seconds until the earliest unschedulable reason has held for ``settle``."""
        if not self.stuck_since:
            return None
        return max(0.0, min(self.stuck_since.values()) + settle - time.monotonic())


def wait_for(
    client: Client,
    info: ResourceInfo,
    namespace: str | None,
    names: Collection[str],
    readiness: Readiness,
    deadline: float,
    progress: Progress | None = None,
    fail_unschedulable: bool = False,
    settle: float = UNSCHEDULABLE_SETTLE,
    known: Mapping[str, Obj] | None = None,
) -> dict[str, Obj | None]:
    """Wait until ``readiness`` holds for every object of ``names`` (of kind ``info`` in
    ``namespace``; ``namespace=None`` for a namespaced kind spans every namespace and the names are
    ``namespace/name``) or ``deadline`` (``time.monotonic()``) passes. Returns each object as it was
    when done (None: it does not exist); raises :class:`WaitTimeout`, :class:`Unschedulable` or
    :class:`Gone`. ``known``: every object as the caller just got it from the server (a create's
    answer), to watch on from instead of listing first."""
    ns = namespace if info.namespaced else None
    across = info.namespaced and ns is None
    tracker = _Tracker(names, readiness, progress)
    only = next(iter(tracker.names)) if len(tracker.names) == 1 and not across else None
    selector = f"metadata.name={only}" if only is not None else None
    start = _known_revision(known or {}, tracker.names)
    while True:
        if start is None:
            page = client.list_raw(info, ns, field_selector=selector)
            listed, revision = {key_of(o, across): o for o in page.items}, page.resource_version
        else:
            listed, revision, start = dict(known or {}), start, None
        for name in sorted(tracker.names):
            tracker.update(name, listed.get(name))
        outcome = _check(tracker, info, deadline, fail_unschedulable, settle)
        if outcome is not None:
            return outcome
        timeout = max(1, math.ceil(_watch_time(tracker, deadline, fail_unschedulable, settle)))
        ends = time.monotonic() + timeout
        try:
            for event in client.watch_raw(info, ns, resource_version=revision,
                                          field_selector=selector, allow_bookmarks=False,
                                          timeout_seconds=timeout):
                name = key_of(event.object, across)
                if name not in tracker.names:
                    continue
                tracker.update(name, None if event.type == "DELETED" else event.object)
                outcome = _check(tracker, info, deadline, fail_unschedulable, settle)
                if outcome is not None:
                    return outcome
                if _watch_time(tracker, deadline, fail_unschedulable, settle) < ends - time.monotonic() - 1:
                    break  # a reason started to settle: watch again, until it has
        except Expired:
            pass  # our revision was compacted away: list again
        outcome = _check(tracker, info, deadline, fail_unschedulable, settle)
        if outcome is not None:
            return outcome


def _known_revision(known: Mapping[str, Obj], names: set[str]) -> str | None:
    """The revision to watch on from when ``known`` holds every object of ``names`` (the oldest of
    theirs, so no change to any is missed); None: list first."""
    revisions = [str((known[n].get("metadata") or {}).get("resourceVersion") or "") if n in known else ""
                 for n in names]
    if not revisions or not all(r.isdigit() for r in revisions):
        return None
    return min(revisions, key=int)


def _watch_time(tracker: _Tracker, deadline: float, fail_unschedulable: bool, settle: float) -> float:
    """How long the next watch may last: to the deadline, or until a reason has settled."""
    remaining = deadline - time.monotonic()
    until = tracker.next_settle(settle) if fail_unschedulable else None
    return remaining if until is None else min(remaining, until)


def _check(tracker: _Tracker, info: ResourceInfo, deadline: float, fail_unschedulable: bool,
           settle: float) -> dict[str, Obj | None] | None:
    """The result when every object is done; raises when the wait is over otherwise; else None."""
    pending = tracker.pending
    if not pending:
        return dict(tracker.latest)
    failed = next((name for name in sorted(pending) if pending[name].failed), None)
    if failed is not None:  # it never will be ready: no reason to wait
        reason = pending[failed].failed
        raise Unschedulable(f"{info.kind} {failed}: {reason}", tracker.latest, pending, failed, reason)
    vanished = tracker.vanished()
    if vanished is not None:
        raise Gone(f"{info.kind} {vanished} was deleted while waiting for it", tracker.latest, pending,
                   vanished)
    if fail_unschedulable:
        stuck = tracker.settled(settle)
        if stuck is not None:
            reason = tracker.verdicts[stuck].unschedulable
            raise Unschedulable(f"{info.kind} {stuck} cannot be scheduled: {reason}", tracker.latest, pending,
                                stuck, reason)
    if time.monotonic() >= deadline:
        raise WaitTimeout(pending_summary(pending), tracker.latest, pending)
    return None


def wait_for_one(client: Client, info: ResourceInfo, namespace: str | None, name: str, readiness: Readiness,
                 deadline: float, progress: Progress | None = None, fail_unschedulable: bool = False,
                 settle: float = UNSCHEDULABLE_SETTLE, known: Obj | None = None) -> Obj | None:
    """:func:`wait_for` of one object (``known``: as the caller just got it); returns it as it was
    when done."""
    return wait_for(client, info, namespace, [name], readiness, deadline, progress, fail_unschedulable,
                    settle, {name: known} if known is not None else None)[name]
