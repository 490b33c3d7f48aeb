"""Finalizers on API objects, as controller-runtime's ``controllerutil`` handles them: a controller
adds its finalizer before it makes anything for an object, and removes it once that is gone, so the
object's deletion waits for the clean-up.

The change is an update at the object's resourceVersion: a concurrent writer makes it a Conflict (the
work queue retries with the object as it is now) instead of a lost finalizer.
"""

from __future__ import annotations

from typing import Any, TypeVar

from ironpool.api.errors import NotFound
from ironpool.client.rest import AsyncClient

M = TypeVar("M", bound=Any)


def has_finalizer(obj: Any, finalizer: str) -> bool:
    return finalizer in (obj.metadata.finalizers or [])


async def add_finalizer(client: AsyncClient, obj: M, finalizer: str) -> M:
    """``obj`` with ``finalizer`` (written if it lacked it)."""
    if has_finalizer(obj, finalizer):
        return obj
    updated = obj.model_copy(deep=True)
    updated.metadata.finalizers = [*(obj.metadata.finalizers or []), finalizer]
    return await client.update(updated, namespace=obj.metadata.namespace)


async def remove_finalizer(client: AsyncClient, obj: M, finalizer: str) -> M:
    """``obj`` without ``finalizer`` (written if it had it; an object already gone is fine)."""
    if not has_finalizer(obj, finalizer):
        return obj
    updated = obj.model_copy(deep=True)
    updated.metadata.finalizers = [f for f in obj.metadata.finalizers or [] if f != finalizer]
    try:
        return await client.update(updated, namespace=obj.metadata.namespace)
    except NotFound:
        return obj
