"""The poollets' finalizer helpers on a real apiserver: adding is written once, removing lets a deleted
object go, an object already gone is no error, and a stale copy never overwrites a newer write."""

from __future__ import annotations

import pytest
from ironpool.api.core import Secret
from ironpool.api.errors import Conflict
from ironpool.client.rest import AsyncClient
from ironpool.poollet.finalizers import add_finalizer, has_finalizer, remove_finalizer

FINALIZER = "test.ironpool.dev/keep"


async def test_a_finalizer_holds_a_deletion_until_it_is_removed(client: AsyncClient) -> None:
    made = await client.create(Secret.model_validate({"metadata": {"name": "held", "namespace": "default",
                                                                   "finalizers": ["other/one"]}}))
    held = await add_finalizer(client, made, FINALIZER)
    assert held.metadata.finalizers == ["other/one", FINALIZER]
    again = await add_finalizer(client, held, FINALIZER)
    assert again.metadata.resource_version == held.metadata.resource_version  # nothing written
    await client.delete(Secret, "held", namespace="default")
    deleting = await client.get(Secret, "held", namespace="default")
    assert deleting.metadata.deletion_timestamp and has_finalizer(deleting, FINALIZER)
    rest = await remove_finalizer(client, deleting, FINALIZER)
    assert rest.metadata.finalizers == ["other/one"]
    await remove_finalizer(client, rest, "other/one")
    assert [s.metadata.name for s in (await client.list(Secret, namespace="default")).items] == []


async def test_removing_from_an_object_already_gone_is_no_error(client: AsyncClient) -> None:
    made = await client.create(Secret.model_validate({"metadata": {"name": "gone", "namespace": "default"}}))
    held = await add_finalizer(client, made, FINALIZER)
    await client.delete(Secret, "gone", namespace="default")
    await remove_finalizer(client, await client.get(Secret, "gone", namespace="default"), FINALIZER)
    assert await remove_finalizer(client, held, FINALIZER) is held


async def test_a_finalizer_added_to_a_stale_copy_is_a_conflict_not_a_lost_write(client: AsyncClient) -> None:
    raced = {"metadata": {"name": "raced", "namespace": "default"}}
    stale = await client.create(Secret.model_validate(raced))
    newer = await add_finalizer(client, stale, "other/first")
    with pytest.raises(Conflict):
        await add_finalizer(client, stale, FINALIZER)
    now = await client.get(Secret, "raced", namespace="default")
    assert now.metadata.finalizers == ["other/first"]
    await remove_finalizer(client, newer, "other/first")
