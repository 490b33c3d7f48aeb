"""Allocation decisions: which addresses and MAC a NIC gets, which range a Prefix gets, or why not.

Pure functions over the :class:`~.index.IPAMIndex`; they decide and never record (the index learns
the outcome from the committed object). Refusals name the field: ``422 Invalid`` for input that can
never work as written (a missing Network or parent, an address outside its parent or reserved),
``409 Conflict`` for what is taken by someone else right now (an address, a MAC, an overlapping
prefix, a full parent).

Which addresses of a parent are handed out: every address of an IPv6 parent but its first two
(the subnet-router anycast and the gateway), every address of an IPv4 parent but the network
address, the first host address (the gateway a host may put on a bridge) and the broadcast address
(a /24 hands out 253 addresses, .2 to .254). /31, /32, /127 and /128 parents hand out all.
"""

from __future__ import annotations

import ipaddress
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ironpool.api import errors
from ironpool.api.errors import Cause
from ironpool.api.fieldpath import FieldErrors
from ironpool.api.ipaddr import IPAddress, IPNetwork, parse_ip, parse_prefix, single
from ironpool.api.meta import LabelSelectorSpec
from ironpool.api.networking import ephemeral_prefix_name
from ironpool.api.resource_info import ResourceInfo
from ironpool.api.selectors import compile_selector
from ironpool.apiserver.ipam.index import (
    MACHINE,
    NIC,
    PREFIX,
    Holder,
    IPAMIndex,
    NamespaceState,
    NicAddress,
    NicEntry,
    PrefixNode,
    source_of,
)

Obj = dict[str, Any]
_MAC_OUI = "52:54:00"  # QEMU's, as libvirt uses it
_MAX_LISTED = 5


@dataclass
class Refusal:
    """The problems found with one write, split by the status code they call for."""

    invalid: FieldErrors = field(default_factory=FieldErrors)
    conflict: FieldErrors = field(default_factory=FieldErrors)

    def raise_if_any(self, info: ResourceInfo, name: str) -> None:
        causes = self.invalid.causes + self.conflict.causes
        if not causes:
            return
        parts = [f"{c.field}: {c.message}" for c in causes]
        body = parts[0] if len(parts) == 1 else "[" + ", ".join(parts) + "]"
        if self.invalid:
            raise errors.Invalid(f'{info.qualified_kind} "{name}" is invalid: {body}', kind=info.kind,
                                 name=name, group=info.group, causes=causes)
        raise errors.Conflict(f'{info.qualified_kind} "{name}" conflicts with what is allocated: {body}',
                              kind=info.plural, name=name, group=info.group, causes=causes)


@dataclass(frozen=True)
class NicPlan:
    """What a NIC gets: its MAC and its effective addresses, in the order of ``spec.ips``."""

    mac: str
    addresses: list[NicAddress]


def listing(names: list[str]) -> str:
    """``"a", "b" and 3 more``."""
    shown = ", ".join(f'"{n}"' for n in names[:_MAX_LISTED])
    return shown + (f" and {len(names) - _MAX_LISTED} more" if len(names) > _MAX_LISTED else "")


def _bounds(net: IPNetwork) -> tuple[int, int]:
    return int(net.network_address), int(net.broadcast_address) + 1


def host_range(net: IPNetwork) -> tuple[int, int]:
    """The addresses of ``net`` handed out one by one (see the module docstring)."""
    start, end = _bounds(net)
    if net.max_prefixlen - net.prefixlen < 2:
        return start, end
    return start + 2, end - 1 if net.version == 4 else end


def _reserved(net: IPNetwork, ip: IPAddress) -> str | None:
    lo, hi = host_range(net)
    if lo <= int(ip) < hi:
        return None
    if int(ip) == int(net.network_address):
        return "the network address" if net.version == 4 else "the subnet-router anycast address"
    return "the gateway address" if int(ip) == int(net.network_address) + 1 else "the broadcast address"


def _address(version: int, value: int) -> IPAddress:
    return ipaddress.IPv4Address(value) if version == 4 else ipaddress.IPv6Address(value)


def _new_mac(taken: Mapping[str, str]) -> str:
    while True:
        mac = _MAC_OUI + "".join(f":{b:02x}" for b in secrets.token_bytes(3))
        if mac not in taken:
            return mac


def _parents(state: NamespaceState, namespace: str, template: Obj, version: int, path: str,
             refusal: Refusal) -> list[PrefixNode]:
    """The Prefixes a child may be allocated from: its ``parentRef``, or those its ``parentSelector``
    matches (by name), of its IP family and not being deleted."""
    family = "IPv4" if version == 4 else "IPv6"
    ref = (template.get("parentRef") or {}).get("name")
    if ref:
        node = state.prefixes.get(ref)
        if node is None or node.net is None:
            refusal.invalid.not_found(f"{path}.parentRef.name", ref,
                                      f'prefix "{ref}" does not exist in namespace "{namespace}"')
            return []
        if node.net.version != version:
            refusal.invalid.invalid(f"{path}.parentRef.name", ref,
                                    f'prefix "{ref}" ({node.net}) is not {family}')
            return []
        if node.deleting:
            refusal.conflict.invalid(f"{path}.parentRef.name", ref, f'prefix "{ref}" is being deleted')
            return []
        return [node]
    selector = compile_selector(LabelSelectorSpec.model_validate(template.get("parentSelector") or {}))
    nodes = [n for _, n in sorted(state.prefixes.items()) if n.net is not None and n.net.version == version
             and not n.deleting and selector.matches(n.labels)]
    if not nodes:
        refusal.invalid.not_found(f"{path}.parentSelector", selector.format(),
                                  f'no {family} prefix in namespace "{namespace}" matches')
    return nodes


# -- NetworkInterfaces ---------------------------------------------------------------------------


def plan_nic(index: IPAMIndex, namespace: str, name: str, spec: Obj, refusal: Refusal, *,
             old: NicEntry | None, path: str = "spec") -> NicPlan | None:
    """The MAC and addresses of the NIC ``name`` with ``spec`` (replacing ``old``, whose unchanged
    sources keep their addresses); problems go to ``refusal`` (and None is returned)."""
    state = index.ns(namespace)
    before = len(refusal.invalid.causes) + len(refusal.conflict.causes)
    network = str((spec.get("networkRef") or {}).get("name") or "")
    if old is None:
        known = state.networks.get(network)
        if known is None:
            refusal.invalid.not_found(f"{path}.networkRef.name", network,
                                      f'network "{network}" does not exist in namespace "{namespace}"')
        elif known[1]:
            refusal.conflict.invalid(f"{path}.networkRef.name", network,
                                     f'network "{network}" is being deleted')
    in_use = state.addresses.get(network, {})
    macs = state.macs.get(network, {})
    mac = spec.get("macAddress")
    if mac:
        holder = macs.get(mac)
        if holder is not None and holder != name:
            refusal.conflict.invalid(f"{path}.macAddress", mac,
                                     f'MAC in use by networkinterface "{holder}" on network "{network}"')
    else:
        mac = _new_mac(macs)
    planned: set[IPAddress] = set()

    def free_in_network(ip: IPAddress, where: str) -> bool:
        holder = in_use.get(ip)
        if holder is not None and holder != name:
            refusal.conflict.invalid(where, str(ip),
                                     f'address in use by networkinterface "{holder}" on network "{network}"')
            return False
        if ip in planned:
            refusal.conflict.invalid(where, str(ip), "address given twice in this network interface")
            return False
        return True

    kept = {a.index: a for a in old.addresses} if old is not None else {}
    addresses: list[NicAddress] = []
    for i, src in enumerate(spec.get("ips") or []):
        p = f"{path}.ips[{i}]"
        if old is not None and i in kept and i < len(old.sources) and old.sources[i] == src:
            address: NicAddress | None = kept[i]
        elif source_of(src) == "value":
            ip = parse_ip(str(src.get("value")))
            address = None
            if ip is not None and free_in_network(ip, f"{p}.value"):
                container = state.deepest(ip)
                length = container.net.prefixlen if container and container.net else ip.max_prefixlen
                address = NicAddress(i, ip, "value", None, length)
        else:
            view = ephemeral_prefix_name(name, i)
            if view in state.prefixes:
                refusal.conflict.invalid(p, view, f'prefix "{view}" exists and is not this network '
                                         "interface's: the prefix of this ephemeral address needs the name")
                continue
            address = _ephemeral(state, namespace, name, i, src, p, refusal, free_in_network,
                                 lambda ip: in_use.get(ip, name) != name or ip in planned)
        if address is not None:
            planned.add(address.ip)
            addresses.append(address)
    if len(refusal.invalid.causes) + len(refusal.conflict.causes) > before:
        return None
    return NicPlan(str(mac), addresses)


def _ephemeral(state: NamespaceState, namespace: str, name: str, i: int, src: Obj, path: str,
               refusal: Refusal, free_in_network: Callable[[IPAddress, str], bool],
               taken_in_network: Callable[[IPAddress], bool]) -> NicAddress | None:
    template = src["ephemeral"]["prefixTemplate"]["spec"]
    tp = f"{path}.ephemeral.prefixTemplate.spec"
    me = Holder(NIC, name, i)
    given = parse_prefix(str(template["prefix"])) if template.get("prefix") else None
    version = given.version if given is not None else (4 if template.get("ipFamily") == "IPv4" else 6)
    if source_of(src) == "root":
        assert given is not None  # validation: a root prefix names its range
        ip = given.network_address
        others = [h for h in state.space(version).children.overlaps(*_bounds(given)) if h != me]
        if others:
            refusal.conflict.invalid(f"{tp}.prefix", str(given), f"overlaps {others[0].describe()}")
            return None
        if not free_in_network(ip, f"{tp}.prefix"):
            return None
        return NicAddress(i, ip, "root", None, ip.max_prefixlen)
    parents = _parents(state, namespace, template, version, tp, refusal)
    if given is not None:
        for parent in parents:
            assert parent.net is not None
            ip = given.network_address
            if ip not in parent.net:
                if len(parents) == 1:
                    refusal.invalid.invalid(f"{tp}.prefix", str(given),
                                            f'is outside the parent prefix "{parent.name}" ({parent.net})')
                continue
            reserved = _reserved(parent.net, ip)
            if reserved:
                refusal.invalid.invalid(f"{tp}.prefix", str(given),
                                        f'is reserved: {reserved} of prefix "{parent.name}" ({parent.net})')
                return None
            hit = parent.children.containing(int(ip))
            if hit is not None and hit[2] != me:
                refusal.conflict.invalid(f"{tp}.prefix", str(given), f"is taken by {hit[2].describe()}")
                return None
            if not free_in_network(ip, f"{tp}.prefix"):
                return None
            return NicAddress(i, ip, "child", parent.name, parent.net.prefixlen)
        if len(parents) > 1:
            refusal.invalid.invalid(f"{tp}.prefix", str(given),
                                    "is outside every prefix the selector matches")
        return None
    def taken(value: int) -> bool:
        return taken_in_network(_address(version, value))

    for parent in parents:
        assert parent.net is not None
        lo, hi = host_range(parent.net)
        start = parent.children.first_free(lo, hi, 1, taken)
        if start is not None:
            return NicAddress(i, _address(version, start), "child", parent.name, parent.net.prefixlen)
    if parents:
        where = f"{tp}.parentRef.name" if template.get("parentRef") else f"{tp}.parentSelector"
        what = ", ".join(f'"{p.name}" ({p.net})' for p in parents[:_MAX_LISTED])
        lo, hi = host_range(parents[0].net) if parents[0].net is not None else (0, 0)
        detail = f"all {hi - lo} allocatable addresses are taken" if len(parents) == 1 else "all are full"
        refusal.conflict.add(Cause(where, f"no free address in prefix {what}: {detail}", "FieldValueInvalid"))
    return None


# -- Prefixes ------------------------------------------------------------------------------------


def plan_prefix(index: IPAMIndex, namespace: str, name: str, spec: Obj,
                refusal: Refusal) -> tuple[IPNetwork, str | None] | None:
    """The range (and parent) a new Prefix gets; problems go to ``refusal``."""
    state = index.ns(namespace)
    view = state.views.get(name)
    if view is not None:
        refusal.conflict.invalid("metadata.name", name, f'is the name of the prefix that shows address '
                                 f'spec.ips[{view[1]}] of networkinterface "{view[0]}"')
        return None
    me = Holder(PREFIX, name)
    given = parse_prefix(str(spec["prefix"])) if spec.get("prefix") else None
    if not spec.get("parentRef") and not spec.get("parentSelector"):
        assert given is not None  # validation: a root prefix names its range
        others = [h for h in state.space(given.version).children.overlaps(*_bounds(given)) if h != me]
        if others:
            refusal.conflict.invalid("spec.prefix", str(given), "overlaps " + _described(state, others))
            return None
        return given, None
    version = given.version if given is not None else (4 if spec.get("ipFamily") == "IPv4" else 6)
    parents = _parents(state, namespace, spec, version, "spec", refusal)
    length = given.prefixlen if given is not None else int(spec.get("prefixLength") or 0)
    for parent in parents:
        assert parent.net is not None
        single_parent = len(parents) == 1
        if given is not None:
            if not given.subnet_of(parent.net):  # type: ignore[arg-type]  # same version (checked)
                if single_parent:
                    refusal.invalid.invalid("spec.prefix", str(given),
                                            f'is outside the parent prefix "{parent.name}" ({parent.net})')
                continue
            others = [h for h in parent.children.overlaps(*_bounds(given)) if h != me]
            if others:
                if single_parent:
                    refusal.conflict.invalid("spec.prefix", str(given),
                                             "overlaps " + _described(state, others))
                continue
            return given, parent.name
        if length < parent.net.prefixlen:
            if single_parent:
                refusal.invalid.invalid("spec.prefixLength", length,
                                        f'is shorter than the parent prefix "{parent.name}" ({parent.net})')
            continue
        start, end = _bounds(parent.net)
        size = 1 << (parent.net.max_prefixlen - length)
        found = parent.children.first_free(start, end, size)
        if found is not None:
            return ipaddress.ip_network(f"{_address(version, found)}/{length}"), parent.name
        if single_parent:
            refusal.conflict.invalid("spec.prefixLength", length,
                                     f'no free /{length} left in prefix "{parent.name}" ({parent.net})')
    if len(parents) > 1:
        what = str(given) if given is not None else f"/{length}"
        names = listing([p.name for p in parents])
        refusal.conflict.invalid("spec.parentSelector", None,
                                 f"no prefix the selector matches has {what} free ({names})")
    return None


def check_view(index: IPAMIndex, namespace: str, name: str, doc: Obj, nic: tuple[str, str]) -> None:
    """A Prefix that claims to show a NIC's ephemeral address must show exactly that address."""
    state = index.ns(namespace)
    entry = state.nics.get(nic[0])
    spec = doc.get("spec") or {}
    if entry is not None and entry.uid == nic[1]:
        for a in entry.addresses:
            if (a.ephemeral and ephemeral_prefix_name(entry.name, a.index) == name
                    and spec.get("prefix") == str(single(a.ip))
                    and (spec.get("parentRef") or {}).get("name") == a.parent):
                return
    raise errors.Conflict(f'prefix "{name}" claims to show an address of networkinterface "{nic[0]}" that '
                          "the network interface does not hold", kind="prefixes", name=name,
                          group="ipam.ironcore.dev")


def _described(state: NamespaceState, holders: list[Holder]) -> str:
    parts = []
    for h in holders[:_MAX_LISTED]:
        node = state.prefixes.get(h.name) if h.kind == PREFIX else None
        parts.append(f"{h.describe()} ({node.net})" if node is not None else h.describe())
    return ", ".join(parts)


# -- users ---------------------------------------------------------------------------------------


def refuse_network_delete(index: IPAMIndex, namespace: str, name: str) -> None:
    """409 while live NICs or Machines use the Network (naming them)."""
    if index.ns(namespace).terminating:
        return
    nics, machines = index.network_users(namespace, name)
    users = []
    if nics:
        users.append(f"networkinterfaces {listing(nics)}")
    if machines:
        users.append(f"machines {listing(machines)}")
    if users:
        raise errors.Conflict(f'network "{name}" is in use by {" and ".join(users)}: delete them first',
                              kind="networks", name=name, group="networking.ironcore.dev")


def refuse_prefix_delete(index: IPAMIndex, namespace: str, name: str) -> None:
    """409 while live child Prefixes or NIC addresses are allocated from the Prefix (naming them)."""
    state = index.ns(namespace)
    if state.terminating:
        return
    users = index.prefix_users(namespace, name)
    if users:
        prefixes = sorted({h.name for h in users if h.kind == PREFIX})
        nics = sorted({h.name for h in users if h.kind == NIC})
        parts = ([f"prefixes {listing(prefixes)}"] if prefixes else []) + (
            [f"networkinterfaces {listing(nics)}"] if nics else [])
        raise errors.Conflict(f'prefix "{name}" has addresses allocated to {" and ".join(parts)}: '
                              "delete them first", kind="prefixes", name=name, group="ipam.ironcore.dev")


def foreign_nic(index: IPAMIndex, namespace: str, name: str, machine: str, uid: str) -> NicEntry | None:
    """The NIC ``name`` if it exists and is not (nor about to be replaced as) the ephemeral NIC of the
    Machine ``machine``/``uid``; NICs of gone Machines are garbage and do not count."""
    state = index.ns(namespace)
    entry = state.nics.get(name)
    if entry is None or entry.owner == (MACHINE, machine, uid):
        return None
    if entry.owner is not None and entry.owner[0] == MACHINE and not index.live_nic(state, entry):
        return None
    return entry
