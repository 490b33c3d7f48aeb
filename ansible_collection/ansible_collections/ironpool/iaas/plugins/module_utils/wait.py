# Copyright: ironpool contributors
# SPDX-License-Identifier: Apache-2.0
"""Waiting for objects to reach a condition: one list, then a watch stream until every named object
is done or the deadline passes (no polling, so a wait ends as soon as the apiserver says so)."""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Callable, Collection
from typing import Any

from ansible_collections.ironpool.iaas.plugins.module_utils.views import dig

with contextlib.suppress(ImportError):  # the modules report the missing library before anything waits
    from ironpool.api.errors import Expired

Obj = dict[str, Any]
Done = Callable[["Obj | None"], bool]


def object_id(obj: Obj, across_namespaces: bool) -> str:
    """How :func:`wait_for_objects` names an object: ``name``, or ``namespace/name`` when it waits
    across every namespace."""
    meta = obj.get("metadata") or {}
    name = str(meta.get("name") or "")
    return f"{meta.get('namespace')}/{name}" if across_namespaces else name


def wait_for_objects(client: Any, info: Any, namespace: str | None, names: Collection[str], done: Done,
                     timeout: float) -> tuple[dict[str, Obj | None], bool]:
    """Wait until ``done(obj)`` holds for every object in ``names`` (``obj`` is None while the
    object does not exist). Returns the last state seen of each, and whether all were done in time.

    ``namespace=None`` for a namespaced kind waits across every namespace; ``names`` are then
    ``namespace/name``."""
    wanted = set(names)
    ns = namespace if info.namespaced else None
    across = info.namespaced and ns is None
    selector = None
    if len(wanted) == 1 and not across:
        selector = f"metadata.name={next(iter(wanted))}"
    deadline = time.monotonic() + timeout
    latest: dict[str, Obj | None] = dict.fromkeys(wanted)
    while True:
        page = client.list_raw(info, ns, field_selector=selector)
        latest = dict.fromkeys(wanted)
        for item in page.items:
            if object_id(item, across) in wanted:
                latest[object_id(item, across)] = item
        pending = {n for n in wanted if not done(latest[n])}
        remaining = deadline - time.monotonic()
        if not pending or remaining <= 0:
            return latest, not pending
        try:
            for event in client.watch_raw(info, ns, resource_version=page.resource_version,
                                          field_selector=selector, allow_bookmarks=False,
                                          timeout_seconds=max(1, math.ceil(remaining))):
                name = object_id(event.object, across)
                if name not in wanted:
                    continue
                latest[name] = None if event.type == "DELETED" else event.object
                if done(latest[name]):
                    pending.discard(name)
                else:
                    pending.add(name)
                if not pending:
                    return latest, True
                if time.monotonic() >= deadline:
                    return latest, False
        except Expired:
            continue  # the revision was compacted away: list again
        if time.monotonic() >= deadline:
            return latest, False


def wait_for_object(client: Any, info: Any, namespace: str | None, name: str, done: Done,
                    timeout: float) -> tuple[Obj | None, bool]:
    """:func:`wait_for_objects` for one object."""
    latest, ok = wait_for_objects(client, info, namespace, [name], done, timeout)
    return latest[name], ok


def gone(obj: Obj | None) -> bool:
    """Done when the object no longer exists."""
    return obj is None


def machine_scheduled(obj: Obj | None) -> bool:
    """The scheduler bound the Machine to a pool."""
    return bool(dig(obj, "spec", "machinePoolRef", "name"))


def machine_running(obj: Obj | None) -> bool:
    """The Machine's domain realises its current spec: state Running for power On, Shutdown for Off,
    its network interfaces attached (their addresses and SSH endpoint reported)."""
    if obj is None:
        return False
    want = "Shutdown" if dig(obj, "spec", "power") == "Off" else "Running"
    observed = dig(obj, "status", "observedGeneration")
    generation = dig(obj, "metadata", "generation")
    current = observed is None or generation is None or int(observed) >= int(generation)
    nics_ready = all(c.get("status") == "True" for c in dig(obj, "status", "conditions") or ()
                     if isinstance(c, dict) and c.get("type") == "NetworkInterfacesReady")
    return dig(obj, "status", "state") == want and current and nics_ready


def volume_scheduled(obj: Obj | None) -> bool:
    """The scheduler bound the Volume to a pool."""
    return bool(dig(obj, "spec", "volumePoolRef", "name"))


def volume_available(obj: Obj | None) -> bool:
    """The Volume is Available at (at least) its requested size."""
    if obj is None or dig(obj, "status", "state") != "Available":
        return False
    want = dig(obj, "spec", "resources", "storage")
    have = dig(obj, "status", "resources", "storage")
    if want is None or have is None:
        return True
    from ironpool.api.quantity import parse_quantity

    return bool(parse_quantity(have) >= parse_quantity(want))


MACHINE_CONDITIONS: dict[str, Done] = {"scheduled": machine_scheduled, "running": machine_running}
VOLUME_CONDITIONS: dict[str, Done] = {"scheduled": volume_scheduled, "available": volume_available}
