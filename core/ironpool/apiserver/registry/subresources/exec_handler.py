"""The ``exec`` subresource (declared as :class:`~ironpool.api.subresources.PoolExec`: Machines), after
Kubernetes' ``pods/exec`` and IronCore's ``machines/exec``.

A console is a stream, not an object: the client opens a websocket on
``.../namespaces/{ns}/machines/{name}/exec`` (:mod:`ironpool.apiserver.endpoints.exec_stream`), and
the apiserver relays it to the daemon of the Machine's pool, which calls IRI ``Exec`` and streams the
serial console. What this handler decides is *where* that daemon is (IronCore's ``ExecLocation``):

- a Machine not bound to a pool (``spec.machinePoolRef`` unset) has no console: 400, naming the field;
- a Machine not ``Running`` has none either: 409, naming its state;
- the pool's ``status.daemonEndpoints.machinepoolletEndpoint.port`` with the first of the pool's
  ``status.addresses`` in :data:`PREFERRED_ADDRESS_TYPES` order; a pool that publishes no endpoint
  (its poollet serves no console) is a 503 naming the pool.

A POST without a websocket upgrade (``kubectl``'s SPDY upgrade, a plain request) is a 400 saying how
to connect.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import orjson

from ironpool.api import errors
from ironpool.api.channels import SUBPROTOCOLS
from ironpool.api.resource_info import ResourceInfo
from ironpool.api.resources import by_kind
from ironpool.api.subresources import PoolExec
from ironpool.apiserver.registry.subresources.handler import SubresourceHandler
from ironpool.store.interface import Document

if TYPE_CHECKING:
    from ironpool.apiserver.auth import ObjectCheck
    from ironpool.apiserver.registry.generic import Registry

#: which of a pool's addresses the apiserver dials, best first (as IronCore's and the kube-apiserver's
#: ``--*-preferred-address-types``; an InternalIP first because it needs no name resolution)
PREFERRED_ADDRESS_TYPES = ("InternalIP", "Hostname", "InternalDNS", "ExternalIP", "ExternalDNS")
RUNNING = "Running"


@dataclass(frozen=True)
class ExecTarget:
    """Where a Machine's console is served: the daemon's websocket URL, and its pool."""

    url: str
    pool: str


class ExecHandler(SubresourceHandler[PoolExec]):
    """``<plural>/exec``: finds the pool daemon that serves the object's console."""

    name = "exec"
    declared_as = PoolExec

    async def create(self, registry: Registry, info: ResourceInfo, namespace: str | None, name: str,
                     body: Any, *, dry_run: bool = False, check: ObjectCheck | None = None) -> Document:
        """A POST that is no websocket upgrade: there is no stream to give it."""
        raise errors.BadRequest(
            f"{info.plural}/exec streams a console over a websocket: send an HTTP/1.1 GET with "
            f"'Upgrade: websocket' and the subprotocol {' or '.join(SUBPROTOCOLS)} "
            f"(as `ironpool console {name}` does); SPDY upgrades are not served")

    async def target(self, registry: Registry, info: ResourceInfo, namespace: str | None,
                     name: str) -> ExecTarget:
        """Where the console of ``namespace/name`` is served (the errors of the module doc)."""
        declared = self.declaration(info)
        obj = orjson.loads(await registry.get_raw(info, namespace, name))
        spec, status = obj.get("spec") or {}, obj.get("status") or {}
        pool = (spec.get(declared.pool_ref) or {}).get("name")
        if not pool:
            raise errors.BadRequest(
                f"{info.kind} {name} is not bound to a {declared.pool_kind} (spec.{declared.pool_ref} is "
                "unset): it has no console until it is scheduled and running", kind=info.kind, name=name)
        state = status.get("state") or "Pending"
        if state != RUNNING:
            raise errors.Conflict(
                f"{info.kind} {name} is not {RUNNING} (status.state is {state}): its console opens once "
                "it runs", kind=info.kind, name=name)
        pool_info = by_kind(f"{info.group}/{info.version}", declared.pool_kind)
        try:
            pool_obj = orjson.loads(await registry.get_raw(pool_info, None, pool))
        except errors.NotFound:
            raise errors.ServiceUnavailable(
                f"{info.kind} {name} is bound to {declared.pool_kind} {pool}, which does not exist") from None
        pool_status = pool_obj.get("status") or {}
        endpoint = ((pool_status.get("daemonEndpoints") or {}).get("machinepoolletEndpoint") or {})
        port = endpoint.get("port")
        host = _preferred_address(pool_status.get("addresses") or [])
        if not port or host is None:
            missing = ("status.daemonEndpoints.machinepoolletEndpoint.port" if not port
                       else "status.addresses")
            raise errors.ServiceUnavailable(
                f"{declared.pool_kind} {pool} publishes no {missing}: its poollet serves no console")
        host = f"[{host}]" if ":" in host else host
        path = (f"/apis/{info.group}/{info.version}/namespaces/{quote(namespace or '', safe='')}/"
                f"{info.plural}/{quote(name, safe='')}/exec")
        return ExecTarget(f"ws://{host}:{int(port)}{path}", pool)


def _preferred_address(addresses: list[dict[str, Any]]) -> str | None:
    by_type: dict[str, str] = {}
    for a in addresses:
        by_type.setdefault(str(a.get("type")), str(a.get("address") or ""))
    for kind in PREFERRED_ADDRESS_TYPES:
        if by_type.get(kind):
            return by_type[kind]
    return None
