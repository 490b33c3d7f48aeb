"""What IPAM allocations look like as guard keys, so every apiserver over one store decides on the
same state (:class:`~ironpool.store.interface.Guard`: keys committed in the same transaction as the
object write, if still at the revision read).

A stored NIC or Prefix *claims* keys; a write takes the claims its new object has and its old one
had not, and releases the others:

* ``ipam/addresses/<ns>/<network>/<ip>`` and ``ipam/macs/<ns>/<network>/<mac>``: ``{"holder": h}``;
  taken only when absent, so two NICs of a Network never share an address or a MAC.
* ranges inside a container (a parent Prefix, or ``~``: a namespace's root ranges of one IP
  version). A range of fewer than :data:`BLOCK` addresses lies in one aligned block and is recorded
  in the block's key ``ipam/blocks/<ns>/<container>/<v>/<block start>`` (``{"start": ["size", h]}``);
  larger ranges are recorded in the container's key ``ipam/ranges/<ns>/<container>/<v>``
  (``{"ranges": {"start": ["size", h]}, "blocks": ["block start", ...]}``). Addresses and sizes
  are decimal strings (IPv6 ones overflow JSON numbers). A small range
  checks its block and the container key (written only when its block becomes used or empty), a
  large one the container key, whose block list tells it where small ranges are. So an address
  costs two small keys, whatever the size of the prefix.

Holders name the object and its uid (``nic/<name>/<uid>/<index>``, ``prefix/<name>/<uid>``), so a
release never frees what a newer object of the same name holds. The functions here are pure; the
admission plugin reads the keys, applies the claims and hands the guards to the write.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ironpool.api.ipaddr import parse_ip, parse_prefix
from ironpool.apiserver.ipam.index import FOREIGN, NIC, PREFIX, Holder, IPAMIndex, source_of, view_of

BLOCK = 256
ROOTS = "~"  # the container of a namespace's root ranges ("~" is in no object name)
_PLURAL = {"address": "addresses", "mac": "macs"}
#: the prefixes of the keys many objects share (a container's ranges, a block's small ranges)
SHARED_KEYS = ("ipam/ranges/", "ipam/blocks/")

Obj = dict[str, Any]


@dataclass(frozen=True)
class Claim:
    """One thing a stored object holds: an address or MAC of a Network, or a range in a container."""

    kind: str  # "address", "mac" or "range"
    namespace: str
    scope: str  # the Network, or the container
    item: str  # the address or MAC; for a range "v/start+size"
    holder: str

    @property
    def range(self) -> tuple[int, int, int]:
        """(IP version, start, end) of a range claim."""
        version, _, span = self.item.partition("/")
        start, _, size = span.partition("+")
        return int(version), int(start), int(start) + int(size)

    def guard_keys(self) -> list[str]:
        """The guard keys this claim reads and may write."""
        if self.kind != "range":
            return [f"ipam/{_PLURAL[self.kind]}/{self.namespace}/{self.scope}/{self.item}"]
        version, start, end = self.range
        container = container_key(self.namespace, self.scope, version)
        if end - start >= BLOCK:
            return [container]
        return [container, f"ipam/blocks/{self.namespace}/{self.scope}/{version}/{block_of(start)}"]


def block_of(address: int) -> str:
    """The start of the block an address is in (a string: IPv6 addresses overflow JSON numbers)."""
    return str(address // BLOCK * BLOCK)


def container_key(namespace: str, container: str, version: int) -> str:
    return f"ipam/ranges/{namespace}/{container}/{version}"


def _range(namespace: str, container: str, version: int, start: int, size: int, holder: str) -> Claim:
    return Claim("range", namespace, container, f"{version}/{start}+{size}", holder)


def claims(index: IPAMIndex, kind: str, doc: Obj | None) -> set[Claim]:
    """What a stored NetworkInterface or Prefix ``doc`` holds (nothing for other kinds, for the
    Prefixes that only show a NIC's address, and for ``None``)."""
    if doc is None:
        return set()
    m = doc["metadata"]
    namespace, name, uid = m.get("namespace") or "", m["name"], m.get("uid") or ""
    spec = doc.get("spec") or {}
    if kind == PREFIX:
        net = parse_prefix(str(spec.get("prefix") or ""))
        if net is None or view_of(doc) is not None:
            return set()
        container = (spec.get("parentRef") or {}).get("name") or ROOTS
        return {_range(namespace, container, net.version, int(net.network_address), net.num_addresses,
                       f"prefix/{name}/{uid}")}
    if kind != NIC:
        return set()
    network = str((spec.get("networkRef") or {}).get("name") or "")
    owner = f"nic/{name}/{uid}"
    out: set[Claim] = set()
    if spec.get("macAddress"):
        out.add(Claim("mac", namespace, network, str(spec["macAddress"]), owner))
    state = index.ns(namespace)
    effective = (doc.get("status") or {}).get("ips") or []
    for i, src in enumerate(spec.get("ips") or []):
        ip = parse_ip(str(effective[i])) if i < len(effective) else None
        if ip is None:
            continue
        out.add(Claim("address", namespace, network, str(ip), owner))
        source = source_of(src)
        if source == "value":
            continue
        template = ((src.get("ephemeral") or {}).get("prefixTemplate") or {}).get("spec") or {}
        container = ROOTS
        if source == "child":
            deepest = state.deepest(ip)
            container = (template.get("parentRef") or {}).get("name") or (deepest.name if deepest else "")
            if not container:
                continue  # its parent is gone: nothing left to hold there
        out.add(_range(namespace, container, ip.version, int(ip), 1, f"{owner}/{i}"))
    return out


@dataclass
class Taken(Exception):
    """A claim collides with what another object holds in the guard keys (the index had not heard of
    it yet): ``holder`` of ``span`` (``start+size``; None for an address or MAC) at ``key``."""

    claim: Claim
    key: str
    holder: str
    span: str | None = None


def learn(index: IPAMIndex, taken: Taken) -> None:
    """Tell the index what another apiserver holds, so the next decision avoids it (the index's
    store watch brings the object itself soon after)."""
    claim = taken.claim
    state = index.ns(claim.namespace)
    parts = taken.holder.split("/")  # nic/<name>/<uid>[/<index>], prefix/<name>/<uid>, or "block"
    if len(parts) >= 3 and parts[2] in state.gone:
        return  # removed since the key was read: the index knows better already
    if claim.kind in ("address", "mac"):
        name = taken.holder.split("/")[1] if taken.holder.count("/") >= 2 else taken.holder
        ip = parse_ip(claim.item)
        if claim.kind == "mac":
            state.macs.setdefault(claim.scope, {}).setdefault(claim.item, name)
        elif ip is not None:
            state.addresses.setdefault(claim.scope, {}).setdefault(ip, name)
        return
    version = claim.range[0]
    start, _, size = (taken.span or "0+0").partition("+")
    if parts[0] == "nic" and len(parts) == 4:
        holder = Holder(NIC, parts[1], int(parts[3]))
    elif parts[0] == "prefix" and len(parts) == 3:
        holder = Holder(PREFIX, parts[1])
    else:
        holder = Holder(FOREIGN, taken.key)
    index.record(claim.namespace, (version, int(start), int(start) + int(size)),
                 None if claim.scope == ROOTS else claim.scope, holder)


def _held_over(entries: dict[str, list[Any]], start: int, end: int, holder: str) -> str | None:
    """The ``start`` key of an entry (``{start: [size, holder]}``, all aligned to their size) that
    overlaps ``[start, end)`` and is someone else's: one that contains the range starts at an
    aligned address below it, one inside it starts within it."""
    size = end - start
    step = size
    while step <= BLOCK:
        key = str(start - start % step)
        entry = entries.get(key)
        if entry is not None and int(key) + int(entry[0]) > start and entry[1] != holder:
            return key
        step *= 2
    for inside in range(start + 1, end) if size <= BLOCK else ():
        entry = entries.get(str(inside))
        if entry is not None and entry[1] != holder:
            return str(inside)
    return None


def apply_claims(values: dict[str, Obj | None], releases: Iterable[Claim], takes: Iterable[Claim]) -> None:
    """Change the guard values (key -> content, None when absent) in place: give back ``releases``
    (only what their holder still holds), then record ``takes``; raises :class:`Taken` for a take
    that collides with what someone else holds."""
    for claim in releases:
        _release(values, claim)
    for claim in takes:
        _take(values, claim)


def _release(values: dict[str, Obj | None], claim: Claim) -> None:
    if claim.kind != "range":
        [key] = claim.guard_keys()
        if (values.get(key) or {}).get("holder") == claim.holder:
            values[key] = None
        return
    _, start, end = claim.range
    entry = [str(end - start), claim.holder]
    keys = claim.guard_keys()
    container = dict(values.get(keys[0]) or {})
    if len(keys) == 1:
        ranges = dict(container.get("ranges") or {})
        if ranges.get(str(start)) == entry:
            del ranges[str(start)]
            container["ranges"] = ranges
            values[keys[0]] = container if ranges or container.get("blocks") else None
        return
    block = dict(values.get(keys[1]) or {})
    if block.get(str(start)) != entry:
        return
    del block[str(start)]
    values[keys[1]] = block or None
    if not block:
        blocks = [b for b in container.get("blocks") or [] if b != block_of(start)]
        container["blocks"] = blocks
        values[keys[0]] = container if blocks or container.get("ranges") else None


def _take(values: dict[str, Obj | None], claim: Claim) -> None:
    keys = claim.guard_keys()
    if claim.kind != "range":
        current = values.get(keys[0])
        if current is not None and current.get("holder") != claim.holder:
            raise Taken(claim, keys[0], str(current.get("holder")))
        values[keys[0]] = {"holder": claim.holder}
        return
    _, start, end = claim.range
    container = dict(values.get(keys[0]) or {})
    ranges = dict(container.get("ranges") or {})
    blocks = list(container.get("blocks") or [])
    for other, (size, holder) in ranges.items():  # few: only ranges of a block or more
        if int(other) < end and start < int(other) + int(size) and holder != claim.holder:
            raise Taken(claim, keys[0], holder, f"{other}+{size}")
    if len(keys) == 1:
        for b in blocks:
            if start <= int(b) < end:  # small ranges lie inside it
                raise Taken(claim, keys[0], "block", f"{b}+{BLOCK}")
        ranges[str(start)] = [str(end - start), claim.holder]
        container["ranges"] = ranges
        values[keys[0]] = container
        return
    block = dict(values.get(keys[1]) or {})
    other = _held_over(block, start, end, claim.holder)
    if other is not None:
        raise Taken(claim, keys[1], block[other][1], f"{other}+{block[other][0]}")
    block[str(start)] = [str(end - start), claim.holder]
    values[keys[1]] = block
    first = block_of(start)
    if first not in blocks:
        container["blocks"] = sorted([*blocks, first], key=int)
        container.setdefault("ranges", ranges)
        values[keys[0]] = container
