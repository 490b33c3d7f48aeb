"""IPAM admission: the apiserver allocates addresses, MACs and prefixes as objects are written, so
an allocation is atomic and a refusal names the field (a plugin of the admission chain).

Allocation runs in the chain's synchronous ``validate`` phase, right before the write, on the
in-memory :class:`~ironpool.apiserver.ipam.index.IPAMIndex`: no other request can commit between
the decision and the write (the same argument as capacity admission's), so no two NICs ever get one
address, also under concurrent creates. The index learns the outcome from the committed object, and
a removed NIC or Prefix gives its addresses back at once. As for capacity, this holds for one
apiserver per store; several would need the decision and the write in one store transaction.

What the plugin writes into the object it admits (the allocation is part of the write):

* a NetworkInterface gets ``spec.macAddress`` (if it had none) and ``status``: ``state:
  Available``, ``ips`` (one per ``spec.ips`` item, in order) and ``addresses`` (the same with the
  prefix length of the Prefix each belongs to). The status is the apiserver's: status writes of
  clients do not change it.
* a Prefix gets ``spec.prefix`` (a child with ``prefixLength``), ``spec.parentRef`` (a child found
  by ``parentSelector``), and ``status``: ``phase: Allocated`` and ``used`` as of this write (the
  networking controller refreshes ``used`` of parents whose children changed).

It also refuses deleting a Network that live NICs or Machines use, and a Prefix with live children,
naming them (in a terminating namespace everything goes), and checks a Machine's ephemeral NIC
templates as the NICs they will become, so a Machine that could not get its NICs is refused with
the Machine's field paths instead of being half made.
"""

from __future__ import annotations

from typing import Any, ClassVar

from ironpool.api.meta import now_rfc3339
from ironpool.api.resource_info import ResourceInfo
from ironpool.apiserver.admission.plugin import AdmissionPlugin, Attributes
from ironpool.apiserver.ipam.index import INDEXED_KINDS, MACHINE, NETWORK, NIC, PREFIX, IPAMIndex, view_of
from ironpool.apiserver.ipam.planner import (
    NicPlan,
    Refusal,
    check_view,
    foreign_nic,
    plan_nic,
    plan_prefix,
    refuse_network_delete,
    refuse_prefix_delete,
)
from ironpool.store.interface import Document, Store

Obj = dict[str, Any]


def _since(old_status: Obj, key: str, value: Any, stamp_key: str) -> str:
    """The transition time to keep: the old one if ``key`` keeps its value."""
    if old_status.get(key) == value and old_status.get(stamp_key):
        return str(old_status[stamp_key])
    return now_rfc3339()


def nic_status(plan: NicPlan, old_status: Obj) -> Obj:
    """The status of a NIC with ``plan``'s addresses."""
    return {
        "state": "Available",
        "lastStateTransitionTime": _since(old_status, "state", "Available", "lastStateTransitionTime"),
        "ips": [str(a.ip) for a in plan.addresses],
        "addresses": [a.cidr for a in plan.addresses],
    }


class IPAMAdmission(AdmissionPlugin):
    """Allocates NIC addresses and MACs and Prefix ranges; refuses deleting what is in use."""

    name: ClassVar[str] = "IPAM"
    kinds: ClassVar[frozenset[str] | None] = INDEXED_KINDS

    def __init__(self, store: Store) -> None:
        self.index = IPAMIndex.for_store(store)

    async def ready(self) -> None:
        await self.index.ready()

    def committed(self, info: ResourceInfo, key: str, doc: Document | None) -> None:
        self.index.committed(info, key, doc)

    def validate(self, attrs: Attributes) -> None:
        kind = attrs.info.kind
        if kind == NIC:
            self._nic(attrs)
        elif kind == PREFIX:
            self._prefix(attrs)
        elif kind == NETWORK and attrs.operation == "DELETE":
            refuse_network_delete(self.index, attrs.namespace or "", attrs.name)
        elif kind == MACHINE and attrs.new is not None and attrs.subresource is None:
            self._machine(attrs)

    # -- NetworkInterfaces -------------------------------------------------------------------

    def _nic(self, attrs: Attributes) -> None:
        new, old = attrs.new, attrs.old
        if new is None:
            return  # released when the NIC is removed
        old_status = dict((old or {}).get("status") or {})
        if attrs.subresource == "status" or (new["metadata"].get("deletionTimestamp") and old is not None):
            new["status"] = old_status  # the status is the allocation's, not the client's
            return
        namespace = attrs.namespace or ""
        refusal = Refusal()
        existing = self.index.ns(namespace).nics.get(attrs.name) if old is not None else None
        plan = plan_nic(self.index, namespace, attrs.name, new.get("spec") or {}, refusal, old=existing)
        refusal.raise_if_any(attrs.info, attrs.name)
        assert plan is not None
        new.setdefault("spec", {})["macAddress"] = plan.mac
        new["status"] = nic_status(plan, old_status)

    # -- Prefixes ----------------------------------------------------------------------------

    def _prefix(self, attrs: Attributes) -> None:
        namespace = attrs.namespace or ""
        new, old = attrs.new, attrs.old
        if new is None:
            if old is not None and view_of(old) is None:
                refuse_prefix_delete(self.index, namespace, attrs.name)
            return
        view = view_of(new)
        old_status = dict((old or {}).get("status") or {})
        if view is not None:
            if old is None:
                check_view(self.index, namespace, attrs.name, new, view)
            new["status"] = {"phase": "Allocated", "lastPhaseTransitionTime": _since(
                old_status, "phase", "Allocated", "lastPhaseTransitionTime")}
            return
        node = self.index.ns(namespace).prefixes.get(attrs.name) if old is not None else None
        spec = new.setdefault("spec", {})
        if node is None or node.net is None:
            refusal = Refusal()
            planned = plan_prefix(self.index, namespace, attrs.name, spec, refusal)
            refusal.raise_if_any(attrs.info, attrs.name)
            assert planned is not None
            net, parent = planned
            spec["prefix"] = str(net)
            spec.setdefault("ipFamily", "IPv4" if net.version == 4 else "IPv6")
            if parent is not None:
                spec["parentRef"] = {"name": parent}
        used = self.index.used(namespace, attrs.name) or []
        new["status"] = {
            "phase": "Allocated",
            "lastPhaseTransitionTime": _since(old_status, "phase", "Allocated", "lastPhaseTransitionTime"),
            "used": used,
        }

    # -- Machines ----------------------------------------------------------------------------

    def _machine(self, attrs: Attributes) -> None:
        """Check each new or changed ephemeral NIC template as the NIC it will become."""
        new, old = attrs.new, attrs.old
        assert new is not None
        if new["metadata"].get("deletionTimestamp"):
            return
        namespace, machine = attrs.namespace or "", attrs.name
        uid = str(new["metadata"].get("uid"))
        before = {n.get("name"): n for n in ((old or {}).get("spec") or {}).get("networkInterfaces") or []}
        refusal = Refusal()
        state = self.index.ns(namespace)
        for i, nic in enumerate((new.get("spec") or {}).get("networkInterfaces") or []):
            template = (nic.get("ephemeral") or {}).get("networkInterfaceTemplate")
            if template is None or before.get(nic.get("name")) == nic:
                continue
            path = f"spec.networkInterfaces[{i}]"
            nic_name = f"{machine}-{nic.get('name')}"
            if foreign_nic(self.index, namespace, nic_name, machine, uid) is not None:
                refusal.conflict.invalid(f"{path}.name", nic.get("name"),
                                         f'networkinterface "{nic_name}" already exists and is not this '
                                         "machine's ephemeral network interface")
                continue
            existing = state.nics.get(nic_name)
            mine = existing if existing is not None and existing.owner == (MACHINE, machine, uid) else None
            plan_nic(self.index, namespace, nic_name, template.get("spec") or {}, refusal, old=mine,
                     path=f"{path}.ephemeral.networkInterfaceTemplate.spec")
        refusal.raise_if_any(attrs.info, machine)
