"""DefaultBinder: binds an object to its pool through the ``binding`` subresource, as kube-scheduler
posts a ``Binding`` to ``pods/binding``: a small object naming the pool, not the whole Machine.

The Binding carries the resourceVersion the decision was made on, so an object that changed
meanwhile is not bound on stale information (409 Conflict; the scheduler tries again). The
apiserver refuses a bind that would overcommit the pool (409 as well), which keeps several
schedulers honest, and an object already bound is a 409 too, so no object is ever bound twice.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ironpool.api import Machine, Volume
from ironpool.api.conditions import SCHEDULED, scheduled_message, set_condition
from ironpool.client.wire import resource_for_model
from ironpool.scheduler.framework.interface import SUCCESS, BindPlugin, CycleState, Status
from ironpool.scheduler.model import Kind, SchedulingRequest

if TYPE_CHECKING:
    from ironpool.client.rest import AsyncClient

NAME = "DefaultBinder"
_RESOURCES = {"machine": resource_for_model(Machine), "volume": resource_for_model(Volume)}
_REF_FIELD: dict[Kind, str] = {"machine": "machinePoolRef", "volume": "volumePoolRef"}


_POOL_KIND: dict[Kind, str] = {"machine": "MachinePool", "volume": "VolumePool"}


async def bind_to_pool(client: AsyncClient, kind: Kind, key: str, resource_version: str, pool: str,
                       obj: dict[str, Any] | None = None) -> dict[str, Any]:
    """Bind the object if it is still at ``resource_version``; the object as now stored, built from
    ``obj`` (as the decision saw it) and the answer's resourceVersion (the binding sends no object
    back), with the ``Scheduled`` condition the binding set (so the reporter has nothing to write)."""
    ns, _, name = key.partition("/")
    status = await client.bind_raw(_RESOURCES[kind], name, _POOL_KIND[kind], pool, ns or None,
                                   resource_version)
    base = obj or {"metadata": {"name": name, "namespace": ns or None}}
    version = (status.get("metadata") or {}).get("resourceVersion", "")
    spec = {**(base.get("spec") or {}), _REF_FIELD[kind]: {"name": pool}}
    doc = {**base, "metadata": {**(base.get("metadata") or {}), "resourceVersion": version}, "spec": spec}
    set_condition(doc, SCHEDULED, "True", SCHEDULED, scheduled_message(key, pool))
    return doc


class DefaultBinder(BindPlugin):
    name = NAME

    async def bind(self, client: AsyncClient, state: CycleState, req: SchedulingRequest,
                   pool: str) -> Status:
        try:
            state.bound = await bind_to_pool(client, req.kind, req.key, req.resource_version, pool, req.obj)
        except Exception as exc:
            return Status.from_error(NAME, exc)
        return SUCCESS
