# Copyright: ironpool contributors
# SPDX-License-Identifier: Apache-2.0
"""Waiting in a task: ``ironpool.client.wait`` (one list, then a watch, until every named object is
done), with the same readiness the CLI and the Pulumi provider use, and what a task says when a
wait fails: where each object was last, with the scheduler's reason while it is not placed.

With ``fail_on_unschedulable`` (the default) a wait for a Machine or Volume fails within seconds
when the scheduler says no pool offers its class or matches its pool selector, instead of waiting
out ``wait_timeout`` for a fleet that will not change by itself.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Collection, Mapping
from typing import Any

with contextlib.suppress(ImportError):  # the modules report the missing library before anything waits
    from ironpool.client.readiness import Readiness, Verdict, readiness_for
    from ironpool.client.wait import Gone, Unschedulable, WaitError, WaitTimeout, pending_summary, wait_for

Obj = dict[str, Any]


class WaitFailed(Exception):
    """A wait ended before every object was done; the message says why, ``last`` holds each object
    as last seen (None: it does not exist)."""

    def __init__(self, message: str, last: dict[str, Obj | None]) -> None:
        super().__init__(message)
        self.last = last


def await_objects(client: Any, info: Any, namespace: str | None, names: Collection[str], what: str,
                  params: Mapping[str, Any], readiness: Readiness | None = None) -> dict[str, Obj | None]:
    """Each object of ``names`` once it is ``what`` (``running``, ``available``, ``gone``, ...: the
    kind's readiness, unless ``readiness`` is given, which ``what`` then describes: "meet the wait
    condition"), waiting as the task's ``wait_timeout`` and ``fail_on_unschedulable`` say; raises
    :class:`WaitFailed`. ``namespace=None`` for a namespaced kind spans every namespace (the names are
    then ``namespace/name``)."""
    timeout = float(params["wait_timeout"])
    try:
        return wait_for(client, info, namespace, names, readiness or readiness_for(info.kind, what),
                        time.monotonic() + timeout,
                        fail_unschedulable=bool(params.get("fail_on_unschedulable", True)))
    except WaitError as exc:
        goal = what if readiness is not None else f"become {what}"
        raise WaitFailed(_message(exc, info.kind, namespace, goal, timeout), exc.last) from None


def _message(exc: Any, kind: str, namespace: str | None, goal: str, timeout: float) -> str:
    where = f"{namespace}/" if namespace else ""
    if isinstance(exc, Unschedulable):
        return (f"{kind} {where}{exc.name} cannot be scheduled: {exc.reason}. It stays Pending until a pool "
                f"offers its class or matches its pool selector (fail_on_unschedulable=false waits for "
                f"that instead)")
    if isinstance(exc, Gone):
        return f"{kind} {where}{exc.name} was deleted while waiting for it to {goal}"
    pending: dict[str, Verdict] = exc.pending
    if len(pending) == 1:
        name, verdict = next(iter(pending.items()))
        return f"{kind} {where}{name} did not {goal} within {timeout:g}s; last seen: {verdict.progress}"
    if isinstance(exc, WaitTimeout):
        scope = f" in namespace {namespace}" if namespace else ""
        return (f"{len(pending)} {kind}(s){scope} did not {goal} within {timeout:g}s: "
                f"{pending_summary(pending, 10)}")
    return str(exc)
