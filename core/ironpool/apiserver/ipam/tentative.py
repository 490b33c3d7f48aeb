"""Setting aside what a write was just given, between the decision and the end of its write.

The decision (admission's synchronous ``validate``) and the commit are separated by the guard phase,
which may wait for a lock or a store round trip; writes decided meanwhile must not be handed the same
address. So the decision records its outcome in the index at once, under the holder the committed
object will have (applying that object later finds it already there), and :meth:`SetAside.undo`
gives it back if the write does not commit. Only what the write newly takes is set aside; what the
stored object already holds is left alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ironpool.api.ipaddr import IPAddress, IPNetwork
from ironpool.apiserver.ipam.index import NIC, PREFIX, Holder, IPAMIndex, NicEntry, Span, span_of
from ironpool.apiserver.ipam.planner import NicPlan
from ironpool.store.interface import Document


@dataclass
class SetAside:
    """What one write's decision took in the index for the object ``name``."""

    index: IPAMIndex
    namespace: str
    name: str
    network: str = ""
    mac: str | None = None
    ips: list[IPAddress] = field(default_factory=list)
    ranges: list[tuple[Span, str | None, Holder]] = field(default_factory=list)
    prefix: IPNetwork | None = None

    def undo(self) -> None:
        """Give back what the object does not hold as committed (its write did not happen)."""
        state = self.index.ns(self.namespace)
        entry = state.nics.get(self.name)
        macs, addresses = state.macs.get(self.network, {}), state.addresses.get(self.network, {})
        mac_committed = entry is not None and entry.mac == self.mac
        if self.mac is not None and macs.get(self.mac) == self.name and not mac_committed:
            del macs[self.mac]
        committed_ips = {a.ip for a in entry.addresses} if entry is not None else set()
        for ip in self.ips:
            if addresses.get(ip) == self.name and ip not in committed_ips:
                del addresses[ip]
        node = state.prefixes.get(self.name)
        if self.prefix is not None and node is not None and node.net == self.prefix:
            return  # the Prefix was committed with this range after all
        for span, parent, holder in self.ranges:
            if entry is not None and any(a.index == holder.index and a.span == span for a in entry.addresses):
                continue
            container = state.space(span[0]) if parent is None else state.prefixes.get(parent)
            if container is not None:
                container.children.release(span[1], holder)


def reserve_nic(index: IPAMIndex, namespace: str, name: str, doc: Document, plan: NicPlan,
                existing: NicEntry | None) -> SetAside:
    """Set aside the addresses and MAC ``plan`` gives the NIC ``name`` that ``existing`` does not hold."""
    state = index.ns(namespace)
    network = str(((doc.get("spec") or {}).get("networkRef") or {}).get("name") or "")
    aside = SetAside(index, namespace, name, network)
    macs = state.macs.setdefault(network, {})
    if plan.mac not in macs:
        macs[plan.mac] = name
        aside.mac = plan.mac
    held = {(a.index, a.ip) for a in existing.addresses} if existing is not None else set()
    addresses = state.addresses.setdefault(network, {})
    for a in plan.addresses:
        if (a.index, a.ip) in held:
            continue
        if a.ip not in addresses:
            addresses[a.ip] = name
            aside.ips.append(a.ip)
        if a.source == "root" or (a.source == "child" and a.parent is not None):
            holder = Holder(NIC, name, a.index)
            index.record(namespace, a.span, a.parent, holder)
            aside.ranges.append((a.span, a.parent, holder))
    return aside


def reserve_prefix(index: IPAMIndex, namespace: str, name: str, net: IPNetwork,
                   parent: str | None) -> SetAside:
    """Set aside the range a new Prefix ``name`` is given."""
    holder = Holder(PREFIX, name)
    index.record(namespace, span_of(net), parent, holder)
    return SetAside(index, namespace, name, ranges=[(span_of(net), parent, holder)], prefix=net)
