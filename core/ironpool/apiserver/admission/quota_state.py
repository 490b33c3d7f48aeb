"""A namespace's quota state, as its guard key ``quota/<namespace>`` holds it: the namespace's
ResourceQuotas (their limits and scopes) and what each of its Machines and Volumes is charged.

The key exists exactly while the namespace has a ResourceQuota: a quota's create, change and
removal write it, and the removal of the last one removes it. ``charges`` is absent until the first
write of a Machine or Volume after the key was made counts the namespace's objects once (see
:mod:`.resource_quota`); from then on every write that changes a charge carries the key.

Each charge names its object as ``<plural>/<name>`` (``machines/web``) with the object's class
(scopes match on it) and its amounts in nano-units, as decimal strings (64Gi in nano-units does not
fit JSON's 64-bit integers).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from ironpool.api.quota import MACHINE, VOLUME, Amounts, amounts_of, in_scope, requirements_of

Obj = dict[str, Any]
_KIND_OF_PLURAL = {"machines": MACHINE, "volumes": VOLUME}


def quota_key(namespace: str) -> str:
    """The guard key of a namespace's quota state."""
    return f"quota/{namespace}"


def charge_key(plural: str, name: str) -> str:
    return f"{plural}/{name}"


@dataclass(frozen=True, slots=True)
class Charge:
    """What one object counts: its class (None: a Volume without class) and its amounts."""

    cls: str | None
    amounts: Amounts


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


@dataclass(slots=True)
class QuotaState:
    """A namespace's quotas and charges (see the module docstring)."""

    quotas: dict[str, Quota] = field(default_factory=dict)
    #: ``<plural>/<name>`` -> charge; None until the namespace's objects were counted
    charges: dict[str, Charge] | None = None

    @classmethod
    def decode(cls, value: Mapping[str, Any] | None) -> QuotaState:
        raw = value or {}
        quotas = {str(name): Quota({str(k): str(v) for k, v in (q.get("hard") or {}).items()},
                                   tuple(q.get("scopes") or ()))
                  for name, q in (raw.get("quotas") or {}).items()}
        charges = raw.get("charges")
        if charges is None:
            return cls(quotas, None)
        return cls(quotas, {str(k): _charge(c) for k, c in charges.items()})

    def encode(self) -> Obj:
        out: Obj = {"quotas": {name: q.encode() for name, q in sorted(self.quotas.items())}}
        if self.charges is not None:
            out["charges"] = {k: {"class": c.cls, "amounts": {r: str(v) for r, v in c.amounts.items()}}
                              for k, c in self.charges.items()}
        return out

    def charged(self) -> Iterable[tuple[str, Charge]]:
        """(kind, charge) of every charged object."""
        for key, charge in (self.charges or {}).items():
            kind = _KIND_OF_PLURAL.get(key.partition("/")[0])
            if kind is not None:
                yield kind, charge

    def used(self, quota: Quota) -> Amounts:
        """What the objects ``quota`` counts use of each resource it limits."""
        used: Amounts = dict.fromkeys(quota.hard, 0)
        for kind, charge in self.charged():
            if quota.counts(kind, charge.cls):
                for r, v in charge.amounts.items():
                    if r in used:
                        used[r] += v
        return used


def _charge(raw: Mapping[str, Any]) -> Charge:
    cls = raw.get("class")
    return Charge(str(cls) if cls else None, {str(r): int(v) for r, v in (raw.get("amounts") or {}).items()})


def limits_of(quota: Quota) -> Amounts:
    """A quota's limits in nano-units."""
    return amounts_of(quota.hard)
