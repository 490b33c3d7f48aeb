"""``ironpool:reserve: true``: a stack's Machines reserved together at the start of ``pulumi up``.

In the program's process, each Machine declared without a ``reservation`` or ``pool`` is counted in a
Reservation of the stack (one per namespace and pool selector), which the Machine then names, and so
depends on. The Reservation's ``machines`` become known once the program's body has declared every
Machine, so it asks for the whole set; when the set does not fit its create fails naming what is
short, and no Machine is created. ``pulumi preview`` shows whether it would fit (the Reservation's
``prediction``). Machines of the stack that exist already count first, where they are, when the set
grows and the Reservation is made again.

Machines declared after the program's body (inside an ``apply``) come too late to be counted: they
fail, saying so, rather than be placed outside the set.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
from collections import Counter
from typing import Any, cast

import pulumi

_groups: dict[tuple[str, tuple[tuple[str, str], ...]], _Group] = {}


class _Group:
    """One Reservation of the stack and the class of every Machine counted in it."""

    def __init__(self, namespace: Any, selector: dict[str, str]) -> None:
        from ironpool_pulumi.reservation import Reservation, ReservationArgs

        self.classes: list[Any] = []
        self.closed = False
        loop = asyncio.get_event_loop()
        self.done: asyncio.Future[list[Any]] = loop.create_future()
        loop.call_soon(self._close)  # runs once the program's body returned
        names: pulumi.Output[list[Any]] = pulumi.Output.from_input(cast(Any, self.done)).apply(_all)
        counts = names.apply(lambda found: dict(Counter(str(n) for n in found)))
        tag = hashlib.sha256(repr(sorted(selector.items())).encode()).hexdigest()[:6] if selector else ""
        name = _dns_label(f"{pulumi.get_project()}-{pulumi.get_stack()}{'-' + tag if tag else ''}")
        self.resource = Reservation(f"{name}-reservation", ReservationArgs(
            name=name, namespace=namespace, machines=counts, pool_selector=selector or None))

    def _close(self) -> None:
        self.closed = True
        self.done.set_result(list(self.classes))


def _all(classes: list[Any]) -> Any:
    return pulumi.Output.all(*classes)


def _dns_label(text: str) -> str:
    label = re.sub(r"[^a-z0-9-]+", "-", text.lower()).strip("-")[:63].rstrip("-")
    return label or "stack"


def stack_reservations() -> list[Any]:
    """The Reservations ``ironpool:reserve`` made for this program's Machines (to export their
    ``prediction`` or ``message``)."""
    return [g.resource for g in _groups.values()]


def stack_reservation(namespace: Any, selector: Any, machine_class: Any) -> Any:
    """With ``ironpool:reserve`` on: the name of the stack's Reservation a new Machine of
    ``machine_class`` goes within (counted in it); else None."""
    if not pulumi.Config("ironpool").get_bool("reserve"):
        return None
    if isinstance(selector, pulumi.Output) or isinstance(namespace, pulumi.Output):
        raise ValueError("ironpool:reserve needs the namespace and pool_selector of its Machines as plain "
                         "values (they pick the Reservation the Machine goes within)")
    chosen = {str(k): str(v) for k, v in (selector or {}).items()}
    key = (str(namespace or ""), tuple(sorted(chosen.items())))
    group = _groups.get(key)
    if group is None:
        group = _groups[key] = _Group(namespace, chosen)
    if group.closed:
        raise ValueError("with ironpool:reserve, declare Machines in the program's body: this one came after "
                         "the stack's Reservation asked for the set (inside an apply?)")
    group.classes.append(machine_class)
    return group.resource.name
