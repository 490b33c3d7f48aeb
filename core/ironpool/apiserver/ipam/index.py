"""What IP address management knows, in memory: per namespace the Prefix tree with every allocated
range, the NICs with their addresses and MACs per Network, the Networks and the Machines that use
them.

It is a :class:`~ironpool.store.mirror.StoreMirror` of Namespaces, Networks,
Machines, Prefixes and NetworkInterfaces: listed on first use, then kept current by a store watch
(writes of every apiserver) and at once by :meth:`IPAMIndex.committed` (this process's writes). It
is what decisions are made on; the guard keys (:mod:`.guards`) are what makes them hold. The
stored objects are the truth: a NIC's addresses are its ``status.ips`` (in the order of
``spec.ips``), a child Prefix's range is its ``spec.prefix`` inside ``spec.parentRef``. The parent
of a NIC's ephemeral address is not stored with the NIC: it is the deepest Prefix containing the
address, which is exact because ranges in one namespace nest or are disjoint and an address is
handed out only where no child range covers it. The Prefixes the apiserver makes to show a NIC's
ephemeral addresses (IronCore's ``<nic>-<index>``, controlled by the NIC) are views, not records.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections import OrderedDict
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

from ironpool.api.ipaddr import IPAddress, IPNetwork, parse_ip, parse_prefix
from ironpool.api.networking import ephemeral_prefix_name
from ironpool.api.resources import RESOURCES, ResourceInfo
from ironpool.apiserver.ipam.ranges import Allocations
from ironpool.store.interface import Document, Store

log = logging.getLogger("ironpool.apiserver.ipam")

_INDEXES: weakref.WeakKeyDictionary[Store, IPAMIndex] = weakref.WeakKeyDictionary()
_GONE_KEPT = 4096

NAMESPACE, NETWORK, NIC, PREFIX, MACHINE = "Namespace", "Network", "NetworkInterface", "Prefix", "Machine"
FOREIGN = "Foreign"  # a range another apiserver's guard keys hold, known before its objects are
#: the kinds whose writes change what the index knows, in the order a fresh index applies them
_ORDER = (NAMESPACE, NETWORK, MACHINE, PREFIX, NIC)
INDEXED_KINDS = frozenset(_ORDER)
_INFOS = {r.kind: r for r in RESOURCES}


@dataclass(frozen=True)
class Holder:
    """Who holds a range in a prefix: a child Prefix, or a NIC's address ``spec.ips[index]``."""

    kind: str
    name: str
    index: int = -1

    def describe(self) -> str:
        if self.kind == PREFIX:
            return f'prefix "{self.name}"'
        return f'networkinterface "{self.name}" (spec.ips[{self.index}])'


@dataclass
class PrefixNode:
    """An allocated Prefix (or, with ``name`` "", the address space of one family in a namespace)."""

    name: str
    uid: str
    net: IPNetwork | None
    parent: str | None
    labels: dict[str, str]
    deleting: bool = False
    children: Allocations[Holder] = field(default_factory=Allocations)
    used: list[str] | None = None  # status.used as last computed (None: changed since)


Span = tuple[int, int, int]
"""A range as (IP version, first address, address after the last), in integers."""

Source = Literal["value", "child", "root"]
"""A literal ``value``, an ephemeral prefix from a parent, or an ephemeral root prefix (a /32 of its own)."""


@dataclass(frozen=True)
class NicAddress:
    """One effective address of a NIC and where it comes from."""

    index: int
    ip: IPAddress
    source: Source
    parent: str | None  # the Prefix a "child" address was allocated from (None if it is gone)
    prefix_length: int  # of the Prefix the address belongs to (the host's subnet)

    @property
    def ephemeral(self) -> bool:
        return self.source != "value"

    @property
    def cidr(self) -> str:
        return f"{self.ip}/{self.prefix_length}"

    @property
    def span(self) -> Span:
        return self.ip.version, int(self.ip), int(self.ip) + 1


@dataclass
class NicEntry:
    """A stored NetworkInterface as IPAM sees it."""

    name: str
    uid: str
    network: str
    mac: str | None
    sources: list[Any]  # spec.ips as stored, to tell an unchanged source on update
    addresses: list[NicAddress]
    owner: tuple[str, str, str] | None  # the controlling owner: (kind, name, uid)
    deleting: bool
    labels: dict[str, str]
    annotations: dict[str, str]


@dataclass
class MachineEntry:
    """A Machine as IPAM sees it: the Networks its ephemeral NIC templates name."""

    uid: str
    deleting: bool
    networks: frozenset[str]


@dataclass
class NamespaceState:
    """Everything IPAM knows about one namespace."""

    terminating: bool = False
    prefixes: dict[str, PrefixNode] = field(default_factory=dict)
    spaces: dict[int, PrefixNode] = field(default_factory=dict)  # IP version -> root address space
    networks: dict[str, tuple[str, bool]] = field(default_factory=dict)  # name -> (uid, deleting)
    addresses: dict[str, dict[IPAddress, str]] = field(default_factory=dict)  # network -> ip -> nic
    macs: dict[str, dict[str, str]] = field(default_factory=dict)  # network -> mac -> nic
    nics: dict[str, NicEntry] = field(default_factory=dict)
    nics_by_network: dict[str, set[str]] = field(default_factory=dict)
    machines: dict[str, MachineEntry] = field(default_factory=dict)
    views: dict[str, tuple[str, int]] = field(default_factory=dict)  # prefix name -> (nic, index)
    # uids of NICs and Prefixes removed lately: what a guard key said they held is no news any more
    gone: OrderedDict[str, None] = field(default_factory=OrderedDict)

    def forget(self, uid: str) -> None:
        self.gone[uid] = None
        while len(self.gone) > _GONE_KEPT:
            self.gone.popitem(last=False)

    def space(self, version: int) -> PrefixNode:
        node = self.spaces.get(version)
        if node is None:
            node = self.spaces[version] = PrefixNode("", "", None, None, {})
        return node

    def deepest(self, ip: IPAddress) -> PrefixNode | None:
        """The most specific allocated Prefix that contains ``ip`` (None if none does)."""
        found: PrefixNode | None = None
        node = self.spaces.get(ip.version)
        address = int(ip)
        while node is not None:
            hit = node.children.containing(address)
            if hit is None or hit[2].kind != PREFIX:
                break
            node = self.prefixes.get(hit[2].name)
            found = node if node is not None else found
        return found


def owner_of(doc: Document) -> tuple[str, str, str] | None:
    """The controlling owner reference of ``doc`` as (kind, name, uid)."""
    for ref in (doc.get("metadata") or {}).get("ownerReferences") or []:
        if isinstance(ref, dict) and ref.get("controller"):
            return str(ref.get("kind")), str(ref.get("name")), str(ref.get("uid"))
    return None


def view_of(doc: Document) -> tuple[str, str] | None:
    """For a Prefix that shows a NIC's ephemeral address: (the NIC's name, its uid)."""
    owner = owner_of(doc)
    if owner is None or owner[0] != NIC:
        return None
    return owner[1], owner[2]


def span_of(net: IPNetwork) -> Span:
    return net.version, int(net.network_address), int(net.broadcast_address) + 1


def source_of(src: Any) -> Source:
    """Where the address of one ``spec.ips`` item comes from."""
    if not isinstance(src, dict) or src.get("ephemeral") is None:
        return "value"
    template = (src["ephemeral"].get("prefixTemplate") or {}).get("spec") or {}
    return "child" if template.get("parentRef") or template.get("parentSelector") else "root"


def _name_of(key: str) -> str:
    return key.rsplit("/", 1)[-1]


class IPAMIndex:
    """Prefix trees, NIC addresses and MACs, Networks and Machines of every namespace.

    Use :meth:`for_store`: the admission plugin and the networking controller share one index.
    """

    @classmethod
    def for_store(cls, store: Store) -> IPAMIndex:
        index = _INDEXES.get(store)
        if index is None:
            index = _INDEXES[store] = cls(store)
        return index

    def __init__(self, store: Store) -> None:
        self.store = store
        self.loaded = False
        self._namespaces: dict[str, NamespaceState] = {}
        #: called with (namespace, prefix name) when the children of an allocated Prefix change
        self.listeners: list[Callable[[str, str], None]] = []
        #: called with (info, key, doc or None) for every change applied, this process's or another's
        self.watchers: list[Callable[[ResourceInfo, str, Document | None], None]] = []
        # Imported here: the admission package imports this module through its IPAM plugin.
        from ironpool.store.mirror import StoreMirror

        self.mirror = StoreMirror(store, [_INFOS[k] for k in _ORDER], self._mirrored)
        self._loading: list[tuple[ResourceInfo, str, Document | None]] | None = None
        self._lock = asyncio.Lock()

    def ns(self, namespace: str) -> NamespaceState:
        state = self._namespaces.get(namespace)
        if state is None:
            state = self._namespaces[namespace] = NamespaceState()
        return state

    def namespaces(self) -> Iterator[tuple[str, NamespaceState]]:
        yield from self._namespaces.items()

    # -- building ----------------------------------------------------------------------------

    async def ready(self) -> None:
        """Start the mirror once (the first relevant write after start-up): what the store holds,
        applied parents before children, then every change as it comes."""
        if self.loaded:
            return
        async with self._lock:
            if self.loaded:
                return
            self._loading = []
            await self.mirror.start()
            loading, self._loading = self._loading, None
            # A child's range is taken inside its parent, and a NIC's address inside its Prefix.
            loading.sort(key=lambda change: (_ORDER.index(change[0].kind), _length(change[2])))
            for info, key, doc in loading:
                self._apply_key(info, key, doc)
            self.loaded = True

    # -- keeping up --------------------------------------------------------------------------

    def committed(self, info: ResourceInfo, key: str, doc: Document | None) -> None:
        """This process committed ``doc`` at ``key`` (None: removed it); the mirror applies it now
        (and ignores the same change when its watch brings it)."""
        if info.kind in INDEXED_KINDS:
            self.mirror.committed(info, key, doc)

    def _mirrored(self, info: ResourceInfo, key: str, doc: Document | None) -> None:
        if self._loading is not None:
            self._loading.append((info, key, doc))
            return
        self._apply_key(info, key, doc)
        for watcher in self.watchers:
            watcher(info, key, doc)

    def _apply_key(self, info: ResourceInfo, key: str, doc: Document | None) -> None:
        namespace = _name_of(key) if info.kind == NAMESPACE else info.namespace_of_key(key) or ""
        self._apply(info, namespace, _name_of(key), doc)

    def _apply(self, info: ResourceInfo, namespace: str, name: str, doc: Document | None) -> None:
        kind = info.kind
        if kind == NAMESPACE:
            if doc is None:
                self._namespaces.pop(name, None)  # removed once it was empty
            else:
                self.ns(name).terminating = bool(doc["metadata"].get("deletionTimestamp"))
            return
        state = self.ns(namespace)
        deleting = bool(doc and doc["metadata"].get("deletionTimestamp"))
        if kind == NETWORK:
            if doc is None:
                state.networks.pop(name, None)
            else:
                state.networks[name] = (str(doc["metadata"].get("uid")), deleting)
        elif kind == MACHINE:
            self._apply_machine(state, name, doc, deleting)
        elif kind == PREFIX:
            if doc is None or view_of(doc) is None:
                self._apply_prefix(namespace, state, name, doc, deleting)
        else:
            self._apply_nic(namespace, state, name, doc, deleting)

    @staticmethod
    def _apply_machine(state: NamespaceState, name: str, doc: Document | None, deleting: bool) -> None:
        if doc is None:
            state.machines.pop(name, None)
            return
        networks = set()
        for nic in (doc.get("spec") or {}).get("networkInterfaces") or []:
            template = ((nic.get("ephemeral") or {}).get("networkInterfaceTemplate") or {}).get("spec")
            network = ((template or {}).get("networkRef") or {}).get("name")
            if network:
                networks.add(str(network))
        state.machines[name] = MachineEntry(str(doc["metadata"].get("uid")), deleting, frozenset(networks))

    def _apply_prefix(self, namespace: str, state: NamespaceState, name: str, doc: Document | None,
                      deleting: bool) -> None:
        node = state.prefixes.get(name)
        if doc is None:
            if node is not None and node.net is not None:
                self._release_range(namespace, state, span_of(node.net), node.parent, Holder(PREFIX, name))
            if node is not None:
                state.forget(node.uid)
            state.prefixes.pop(name, None)
            return
        spec = doc.get("spec") or {}
        net = parse_prefix(str(spec.get("prefix") or "")) if spec.get("prefix") else None
        parent = (spec.get("parentRef") or {}).get("name")
        labels = dict(doc["metadata"].get("labels") or {})
        if node is not None and node.net == net:
            node.labels, node.deleting = labels, deleting  # the allocation is set once
            return
        if node is not None:  # allocated just now (an old Pending prefix)
            if node.net is not None:
                self._release_range(namespace, state, span_of(node.net), node.parent, Holder(PREFIX, name))
            node.net, node.parent, node.labels, node.deleting = net, parent, labels, deleting
        else:
            node = state.prefixes[name] = PrefixNode(name, str(doc["metadata"].get("uid")), net, parent,
                                                     labels, deleting)
        if net is not None:
            self._take_range(namespace, state, span_of(net), parent, Holder(PREFIX, name), stored=True)

    def _apply_nic(self, namespace: str, state: NamespaceState, name: str, doc: Document | None,
                   deleting: bool) -> None:
        old = state.nics.pop(name, None)
        if old is not None:
            self._release_nic(namespace, state, old)
            if doc is None or doc["metadata"].get("uid") != old.uid:
                state.forget(old.uid)
        if doc is None:
            return
        entry = self.entry_of(state, name, doc, deleting)
        state.nics[name] = entry
        state.nics_by_network.setdefault(entry.network, set()).add(name)
        if entry.mac:
            state.macs.setdefault(entry.network, {})[entry.mac] = name
        owned = state.addresses.setdefault(entry.network, {})
        for a in entry.addresses:
            owned[a.ip] = name
            if a.ephemeral:
                state.views[ephemeral_prefix_name(name, a.index)] = (name, a.index)
            if a.source == "root" or (a.source == "child" and a.parent is not None):
                self._take_range(namespace, state, a.span, a.parent, Holder(NIC, name, a.index), stored=True)

    @staticmethod
    def entry_of(state: NamespaceState, name: str, doc: Document, deleting: bool = False) -> NicEntry:
        """A NIC document as IPAM sees it (its addresses from ``status.ips``)."""
        spec = doc.get("spec") or {}
        sources = list(spec.get("ips") or [])
        effective = (doc.get("status") or {}).get("ips") or []
        addresses = []
        for i, src in enumerate(sources):
            ip = parse_ip(str(effective[i])) if i < len(effective) else None
            if ip is None or not isinstance(src, dict):
                continue
            source, container = source_of(src), state.deepest(ip)
            length = container.net.prefixlen if container is not None and container.net else ip.max_prefixlen
            parent = container.name if source == "child" and container is not None else None
            addresses.append(NicAddress(i, ip, source, parent, length))
        meta = doc["metadata"]
        return NicEntry(
            name=name, uid=str(meta.get("uid")),
            network=str((spec.get("networkRef") or {}).get("name") or ""),
            mac=spec.get("macAddress"), sources=sources, addresses=addresses, owner=owner_of(doc),
            deleting=deleting, labels=dict(meta.get("labels") or {}),
            annotations=dict(meta.get("annotations") or {}),
        )

    def _release_nic(self, namespace: str, state: NamespaceState, entry: NicEntry) -> None:
        users = state.nics_by_network.get(entry.network)
        if users is not None:
            users.discard(entry.name)
        macs = state.macs.get(entry.network, {})
        if entry.mac and macs.get(entry.mac) == entry.name:
            del macs[entry.mac]
        owned = state.addresses.get(entry.network, {})
        for a in entry.addresses:
            if owned.get(a.ip) == entry.name:
                del owned[a.ip]
            if a.ephemeral:
                state.views.pop(ephemeral_prefix_name(entry.name, a.index), None)
            if a.source == "root" or (a.source == "child" and a.parent is not None):
                self._release_range(namespace, state, a.span, a.parent, Holder(NIC, entry.name, a.index))

    def record(self, namespace: str, span: Span, parent: str | None, holder: Holder) -> None:
        """Record a range held elsewhere (see :func:`.guards.learn`)."""
        self._take_range(namespace, self.ns(namespace), span, parent, holder)

    def _take_range(self, namespace: str, state: NamespaceState, span: Span, parent: str | None,
                    holder: Holder, stored: bool = False) -> None:
        """Record ``holder``'s range. A ``stored`` object's range is the truth: it replaces what was
        only set aside or learned there (a decision of this apiserver that loses to it, what a guard
        key told); anything else gives way to what is recorded."""
        version, start, end = span
        node = state.space(version) if parent is None else state.prefixes.get(parent)
        if node is None:
            return  # the parent is gone (a NIC or Prefix outliving it); nothing to hold
        present = node.children.containing(start)
        if present is not None and present[:2] == (start, end) and present[2] == holder:
            return  # set aside or learned before the object itself came
        for other_start, _, other in node.children.within(start, end):
            if stored or other.kind == FOREIGN:
                node.children.release(other_start, other)
        if node.children.overlaps(start, end):
            log.warning("%s/%s: a range at %d overlaps an allocation already recorded in %s; not recorded",
                        namespace, holder.name, start, node.name or "the namespace")
            return
        node.children.take(start, end, holder)
        self._changed(namespace, node)

    def _release_range(self, namespace: str, state: NamespaceState, span: Span, parent: str | None,
                       holder: Holder) -> None:
        version, start, _ = span
        node = state.space(version) if parent is None else state.prefixes.get(parent)
        if node is not None and node.children.release(start, holder):
            self._changed(namespace, node)

    def _changed(self, namespace: str, node: PrefixNode) -> None:
        node.used = None
        if node.name:
            for listener in self.listeners:
                listener(namespace, node.name)

    # -- questions ---------------------------------------------------------------------------

    def used(self, namespace: str, prefix: str) -> list[str] | None:
        """``status.used`` of an allocated Prefix: its children's ranges (None if unknown)."""
        node = self.ns(namespace).prefixes.get(prefix)
        if node is None or node.net is None:
            return None
        if node.used is None:
            bits, address = node.net.max_prefixlen, type(node.net.network_address)
            node.used = [f"{address(start)}/{bits - (end - start).bit_length() + 1}"
                         for start, end, _ in node.children]
        return list(node.used)

    def live_nic(self, state: NamespaceState, entry: NicEntry) -> bool:
        """A NIC that still uses what it holds: not being deleted, and not the ephemeral NIC of a
        Machine that is being deleted or gone (the controller deletes those)."""
        if entry.deleting:
            return False
        if entry.owner is not None and entry.owner[0] == MACHINE:
            machine = state.machines.get(entry.owner[1])
            return machine is not None and machine.uid == entry.owner[2] and not machine.deleting
        return True

    def network_users(self, namespace: str, network: str) -> tuple[list[str], list[str]]:
        """The live NICs and Machines that use a Network: (networkinterfaces, machines)."""
        state = self.ns(namespace)
        nics = sorted(n for n in state.nics_by_network.get(network, ())
                      if self.live_nic(state, state.nics[n]))
        machines = sorted(m for m, e in state.machines.items() if network in e.networks and not e.deleting)
        return nics, machines

    def prefix_users(self, namespace: str, prefix: str) -> list[Holder]:
        """The live children of a Prefix: child Prefixes and NIC addresses allocated from it."""
        state = self.ns(namespace)
        node = state.prefixes.get(prefix)
        if node is None:
            return []
        users = []
        for _, _, holder in node.children:
            if holder.kind == PREFIX:
                child = state.prefixes.get(holder.name)
                if child is not None and not child.deleting:
                    users.append(holder)
            else:
                nic = state.nics.get(holder.name)
                if nic is not None and self.live_nic(state, nic):
                    users.append(holder)
        return users


def _length(doc: Document | None) -> int:
    """A Prefix's length (unallocated ones last); 0 for other objects."""
    if doc is None or doc.get("kind") != PREFIX:
        return 0
    net = parse_prefix(str((doc.get("spec") or {}).get("prefix") or ""))
    return net.prefixlen if net is not None else 1 << 10
