"""A pool's usage, as its usage key holds it: what each bound object is charged, what each
Reservation holds there, and which bound Machines are placed within which Reservation.

What the pool has in use, per resource, is the charges of its bound objects plus, for every
Reservation held there, what of its hold no Machine placed within it uses yet::

    used = sum(charges) + sum over reservations R of max(0, holds[R] - sum(charges of Machines within R))

so a Machine bound within a Reservation uses the Reservation's share (no new room is needed while
the share lasts), and when it goes the share is the Reservation's again; a Reservation released
(expired, rejected, deleted) leaves its Machines charged as any other.

Amounts are exact integers in nano-units; in the stored value they are decimal strings (64Gi in
nano-units does not fit JSON's 64-bit integers).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ironpool.store.interface import Document

Amounts = dict[str, int]
"""resource -> amount in nano-units"""
Charges = dict[str, Amounts]
"""``namespace/name`` of a bound object -> what it takes from its pool"""


def add_into(total: Amounts, amounts: Amounts, sign: int = 1) -> None:
    for r, v in amounts.items():
        total[r] = total.get(r, 0) + sign * v


def total_of(charges: Charges) -> Amounts:
    used: Amounts = {}
    for amounts in charges.values():
        add_into(used, amounts)
    return used


def _amounts(raw: Any) -> Amounts:
    return {str(r): int(v) for r, v in (raw or {}).items()}


@dataclass(slots=True)
class Usage:
    """One pool's usage (see the module docstring)."""

    charges: Charges = field(default_factory=dict)
    #: ``namespace/name`` of a Reservation -> what it holds on the pool
    holds: Charges = field(default_factory=dict)
    #: ``namespace/name`` of a bound Machine -> the Reservation (``namespace/name``) it is placed within
    within: dict[str, str] = field(default_factory=dict)

    @classmethod
    def decode(cls, value: Document | None) -> Usage:
        raw = value or {}
        return cls({str(k): _amounts(a) for k, a in (raw.get("charges") or {}).items()},
                   {str(k): _amounts(a) for k, a in (raw.get("holds") or {}).items()},
                   {str(k): str(v) for k, v in (raw.get("within") or {}).items()})

    def encode(self) -> Document:
        out: Document = {"charges": {k: {r: str(v) for r, v in a.items()} for k, a in self.charges.items()}}
        if self.holds:
            out["holds"] = {k: {r: str(v) for r, v in a.items()} for k, a in self.holds.items()}
        if self.within:
            out["within"] = dict(self.within)
        return out

    def used(self) -> Amounts:
        """What the pool has in use, per resource."""
        used = total_of(self.charges)
        for reservation, hold in self.holds.items():
            placed: Amounts = {}
            for key, name in self.within.items():
                if name == reservation and key in self.charges:
                    add_into(placed, self.charges[key])
            for r, v in hold.items():
                unused = v - placed.get(r, 0)
                if unused > 0:
                    used[r] = used.get(r, 0) + unused
        return used

    def bind(self, key: str, charge: Amounts, reservation: str | None) -> None:
        """The object ``key`` is charged ``charge`` here, placed within ``reservation`` if given."""
        self.charges[key] = charge
        if reservation is None:
            self.within.pop(key, None)
        else:
            self.within[key] = reservation

    def unbind(self, key: str) -> None:
        self.charges.pop(key, None)
        self.within.pop(key, None)

    def hold(self, reservation: str, amounts: Amounts | None) -> None:
        """``reservation`` holds ``amounts`` here from now on (None: nothing any more)."""
        if amounts:
            self.holds[reservation] = amounts
        else:
            self.holds.pop(reservation, None)
