"""DefaultBinder: binds an object by setting ``spec.machinePoolRef`` / ``spec.volumePoolRef``.

The write carries the resourceVersion the decision was made on, so an object that changed meanwhile
is not bound on stale information (409 Conflict; the scheduler tries again). The apiserver refuses
a bind that would overcommit the pool (409 as well), which keeps several schedulers honest.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ironpool.api import Machine, Volume
from ironpool.client.wire import resource_for_model
from ironpool.scheduler.framework.interface import SUCCESS, BindPlugin, CycleState, Status
from ironpool.scheduler.model import Kind, SchedulingRequest

if TYPE_CHECKING:
    from ironpool.client.rest import AsyncClient

NAME = "DefaultBinder"
_RESOURCES = {"machine": resource_for_model(Machine), "volume": resource_for_model(Volume)}
_REF_FIELD: dict[Kind, str] = {"machine": "machinePoolRef", "volume": "volumePoolRef"}


async def bind_to_pool(client: AsyncClient, kind: Kind, key: str, resource_version: str,
                       pool: str) -> dict[str, Any]:
    """Set the object's pool reference if it is still at ``resource_version``; the object as written."""
    ns, _, name = key.partition("/")
    patch = {"metadata": {"resourceVersion": resource_version}, "spec": {_REF_FIELD[kind]: {"name": pool}}}
    return await client.patch_raw(_RESOURCES[kind], name, patch, ns or None)


class DefaultBinder(BindPlugin):
    name = NAME

    async def bind(self, client: AsyncClient, state: CycleState, req: SchedulingRequest,
                   pool: str) -> Status:
        try:
            state.bound = await bind_to_pool(client, req.kind, req.key, req.resource_version, pool)
        except Exception as exc:
            return Status.from_error(NAME, exc)
        return SUCCESS
