"""A namespace's quota state, as its guard key ``quota/<namespace>`` holds it: the namespace's
ResourceQuotas (their limits and scopes) and a tally of its Machines and Volumes by class.

The key exists exactly while the namespace has a ResourceQuota: a quota's create, change and
removal write it, and the removal of the last one removes it. ``tally`` is absent until the first
write of a Machine or Volume after the key was made counts the namespace's objects once (see
:mod:`.resource_quota`); from then on every write that changes the tally carries the key.

The tally is what the quotas need and nothing per object, so the key stays small however many
objects the namespace holds: per MachineClass the number of Machines (what they use of cpu and
memory is that number times the class's capabilities, as IronCore counts them), per VolumeClass
(``""``: none) the number of Volumes and the storage they request. A write changes it by what its
object adds or frees (a Volume's storage from the object as it was and as it will be stored).
Numbers are decimal strings in the key (storage in nano-units overflows JSON's 64-bit integers).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ironpool.api.quota import MACHINE, VOLUME, Amounts, amounts_of, in_scope, requirements_of, usage

Obj = dict[str, Any]
_PLURAL = {MACHINE: "machines", VOLUME: "volumes"}
_KIND = {plural: kind for kind, plural in _PLURAL.items()}

Group = tuple[str, str | None]
"""(kind, class) of a tally entry: ``("Machine", "small")``, ``("Volume", None)``"""
Capabilities = Mapping[str, Amounts | None]
"""MachineClass name -> its capabilities in nano-units (None: the class does not exist)"""


def quota_key(namespace: str) -> str:
    """The guard key of a namespace's quota state."""
    return f"quota/{namespace}"


@dataclass(frozen=True, slots=True)
class Quota:
    """One ResourceQuota as the key holds it: its limits (as written, canonical) and scope."""

    hard: Mapping[str, str]
    scopes: tuple[Mapping[str, Any], ...]

    @classmethod
    def of(cls, doc: Mapping[str, Any]) -> Quota:
        """The entry of a ResourceQuota (JSON, canonical)."""
        hard = (doc.get("spec") or {}).get("hard") or {}
        return cls({str(k): str(v) for k, v in hard.items()}, tuple(requirements_of(doc)))

    def encode(self) -> Obj:
        out: Obj = {"hard": dict(self.hard)}
        if self.scopes:
            out["scopes"] = [dict(s) for s in self.scopes]
        return out

    def counts(self, kind: str, cls: str | None) -> bool:
        return in_scope(kind, cls, self.scopes)

    def limits(self) -> Amounts:
        """The limits in nano-units."""
        return amounts_of(self.hard)


@dataclass(frozen=True, slots=True)
class Entry:
    """How many objects of one kind and class there are, and (Volumes) the storage they request."""

    count: int = 0
    storage: int = 0

    def __add__(self, other: Entry) -> Entry:
        return Entry(self.count + other.count, self.storage + other.storage)


def entry_of(kind: str, storage: int) -> Entry:
    """What one object adds to its group's entry."""
    return Entry(1, storage if kind == VOLUME else 0)


def amounts(group: Group, entry: Entry, caps: Capabilities) -> Amounts:
    """What a group's objects use, by quota resource name (:func:`ironpool.api.quota.usage`)."""
    kind, cls = group
    return usage(kind, entry.count, entry.storage, caps.get(cls or "") if kind == MACHINE else None)


@dataclass(frozen=True, slots=True)
class QuotaState:
    """A namespace's quotas and tally (see the module docstring); changed by making a new one."""

    quotas: Mapping[str, Quota] = field(default_factory=dict)
    #: (kind, class) -> entry; None until the namespace's objects were counted
    tally: Mapping[Group, Entry] | None = None

    @classmethod
    def decode(cls, value: Mapping[str, Any] | None) -> QuotaState:
        raw = value or {}
        quotas = {str(name): Quota({str(k): str(v) for k, v in (q.get("hard") or {}).items()},
                                   tuple(q.get("scopes") or ()))
                  for name, q in (raw.get("quotas") or {}).items()}
        stored = raw.get("tally")
        if stored is None:
            return cls(quotas, None)
        tally: dict[Group, Entry] = {}
        for plural, groups in stored.items():
            for name, e in (groups or {}).items():
                entry = Entry(int(e.get("count", 0)), int(e.get("storage", 0)))
                tally[(_KIND[plural], str(name) or None)] = entry
        return cls(quotas, tally)

    def encode(self) -> Obj:
        out: Obj = {"quotas": {name: q.encode() for name, q in sorted(self.quotas.items())}}
        if self.tally is not None:
            groups: dict[str, Obj] = {}
            for (kind, cls), e in sorted(self.tally.items(), key=lambda i: (i[0][0], i[0][1] or "")):
                stored: Obj = {"count": str(e.count)}
                if kind == VOLUME:
                    stored["storage"] = str(e.storage)
                groups.setdefault(_PLURAL[kind], {})[cls or ""] = stored
            out["tally"] = groups
        return out

    def machine_classes(self) -> list[str]:
        """The MachineClasses the tally counts Machines of."""
        return sorted({cls for (kind, cls), e in (self.tally or {}).items() if kind == MACHINE and cls})

    def used(self, quota: Quota, caps: Capabilities) -> Amounts:
        """What the objects ``quota`` counts use of each resource it limits."""
        used: Amounts = dict.fromkeys(quota.hard, 0)
        for group, e in (self.tally or {}).items():
            if e.count and quota.counts(*group):
                for r, v in amounts(group, e, caps).items():
                    if r in used:
                        used[r] += v
        return used

    def with_quotas(self, quotas: Mapping[str, Quota]) -> QuotaState:
        return QuotaState(dict(quotas), self.tally)

    def with_change(self, group: Group, change: Entry) -> QuotaState:
        """This state with ``change`` added to ``group``'s entry (negative numbers take away)."""
        tally = dict(self.tally or {})
        after = tally.get(group, Entry()) + change
        if after.count <= 0 and after.storage <= 0:
            tally.pop(group, None)
        else:
            tally[group] = Entry(max(after.count, 0), max(after.storage, 0))
        return QuotaState(self.quotas, tally)
