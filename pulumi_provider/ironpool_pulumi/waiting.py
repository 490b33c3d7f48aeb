"""Waiting for one object to reach a state, or to be gone, by watching it until a deadline.

A watch reports each change as it happens, so a wait ends within milliseconds of the change and
costs no polling; when a stream ends early (server timeout, compaction) the wait re-reads the object
and watches again from there.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

from ironpool.api.errors import Expired, NotFound
from ironpool.api.resources import ResourceInfo
from ironpool.client import Client

Obj = dict[str, Any]


class WaitTimeout(Exception):
    """The deadline passed first; ``last`` is the object as last seen (None: it was gone)."""

    def __init__(self, last: Obj | None) -> None:
        super().__init__("deadline passed")
        self.last = last


class Gone(Exception):
    """The object was deleted while we waited for it to reach a state."""


def _watch(client: Client, info: ResourceInfo, namespace: str | None, name: str, rv: str,
           deadline: float) -> Any:
    remaining = max(1, math.ceil(deadline - time.monotonic()))
    return client.watch_raw(info, namespace, rv, field_selector=f"metadata.name={name}",
                            timeout_seconds=remaining, allow_bookmarks=False)


def wait_until(client: Client, info: ResourceInfo, namespace: str | None, name: str,
               done: Callable[[Obj], bool], deadline: float, current: Obj | None = None) -> Obj:
    """The object once ``done(object)`` holds; raises :class:`WaitTimeout` or :class:`Gone`."""
    obj = current
    while True:
        if obj is None:
            try:
                obj = client.get_raw(info, name, namespace)
            except NotFound:
                raise Gone() from None
        if done(obj):
            return obj
        if time.monotonic() >= deadline:
            raise WaitTimeout(obj)
        rv = str((obj.get("metadata") or {}).get("resourceVersion") or "")
        try:
            for event in _watch(client, info, namespace, name, rv, deadline):
                if event.type == "DELETED":
                    raise Gone()
                if event.type in ("ADDED", "MODIFIED"):
                    obj = event.object
                    if done(obj):
                        return obj
                if time.monotonic() >= deadline:
                    break
        except Expired:
            obj = None  # our revision was compacted away: read the object afresh
            continue
        if time.monotonic() >= deadline:
            raise WaitTimeout(obj)
        obj = None


def wait_gone(client: Client, info: ResourceInfo, namespace: str | None, name: str, deadline: float) -> None:
    """Return once the object no longer exists (finalizers done); raises :class:`WaitTimeout`."""
    try:
        wait_until(client, info, namespace, name, lambda _obj: False, deadline)
    except Gone:
        return
