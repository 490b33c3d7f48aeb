"""Where a set of new Machines would go, all together, answered by the scheduler: what check mode and
``pulumi preview`` show for the Machines of one run.

The set is asked as one dry-run Reservation (``spec.dryRun``: the scheduler plans it whole, as it
would a real one, answers in its status, and holds nothing), so the answer comes from the component
that holds the fleet's state, whatever the fleet's size, and a set that fits only in part says which
of its Machines do not. The Machines are given their pools in the order given (each takes a place its
class has in the plan); those left over get the scheduler's account of the shortfall. Machines with
different pool selectors are asked per selector. The dry run is deleted after the answer; its time to
live makes the scheduler remove it should the asker die first.

A Machine pinned to a pool is not asked about. One placed within a Reservation (the label
``compute.ironcore.dev/reservation``) is answered from that Reservation: whether it holds room for
it, or that it does not exist yet (a reservation earlier in the run, not made in a check run).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ironpool.api import reservation as rsv
from ironpool.api.errors import NotFound
from ironpool.api.quantity import parse_quantity
from ironpool.client.readiness import condition, reservation_answered
from ironpool.client.wait import WaitTimeout, wait_for_one

if TYPE_CHECKING:
    from ironpool.api.resource_info import ResourceInfo
    from ironpool.client.rest import Client

Obj = dict[str, Any]

#: On a dry-run Reservation made for a prediction.
PREDICTION_LABEL = "iaas.ironpool.dev/prediction"
DRY_RUN_TTL = 300  # seconds after which the scheduler removes a prediction nobody removed


@dataclass(frozen=True)
class Prediction:
    """One Machine's answer: the pool it would go to (None: none, or not known yet) and why."""

    key: str  # namespace/name
    pool: str | None
    reason: str


class PredictionUnavailable(Exception):
    """No scheduler answered the dry run in time."""


def _reservations() -> ResourceInfo:
    from ironpool.api.resources import resolve

    return resolve("reservations")


def _meta(obj: Obj) -> Obj:
    return obj.get("metadata") or {}


def _key(obj: Obj, namespace: str) -> str:
    return f"{_meta(obj).get('namespace') or namespace}/{_meta(obj).get('name', '')}"


def _class(obj: Obj) -> str:
    return str(((obj.get("spec") or {}).get("machineClassRef") or {}).get("name") or "")


def predict_machines(client: Client, namespace: str, machines: Sequence[Obj],
                     timeout: float = 30.0) -> list[Prediction]:
    """The answer for each of ``machines`` (manifests of new Machines), in their order."""
    answers: dict[int, Prediction] = {}
    groups: dict[tuple[tuple[str, str], ...], list[int]] = {}
    used: dict[str, dict[tuple[str, str], int]] = {}  # reservation -> (pool, class) -> taken by the set
    for i, m in enumerate(machines):
        spec = m.get("spec") or {}
        pinned = (spec.get("machinePoolRef") or {}).get("name")
        within = rsv.reservation_of(m)
        if pinned:
            answers[i] = Prediction(_key(m, namespace), str(pinned), f"pinned to pool {pinned}")
        elif within:
            ns = _meta(m).get("namespace") or namespace
            taken = used.setdefault(within, {})
            answers[i] = _within(client, ns, within, _key(m, namespace), _class(m), taken)
        else:
            wanted = (spec.get("machinePoolSelector") or {}).items()
            groups.setdefault(tuple(sorted((str(k), str(v)) for k, v in wanted)), []).append(i)
    for selector, members in groups.items():
        asked = _ask(client, namespace, [machines[i] for i in members], dict(selector), timeout)
        for i, answer in zip(members, asked, strict=True):
            answers[i] = answer
    return [answers[i] for i in range(len(machines))]


@dataclass(frozen=True)
class SetAnswer:
    """The scheduler's answer for a whole set: whether it fits, its account, and the plan (pool ->
    resources, also of the part that fits when not all does)."""

    fits: bool
    message: str
    parts: dict[str, dict[str, str]]


def predict_reservation(client: Client, namespace: str, spec: Obj, timeout: float = 30.0) -> SetAnswer:
    """Ask whether a Reservation of ``spec`` would be held now: a dry run of it, answered by the
    scheduler and then removed. Raises :class:`PredictionUnavailable` when no scheduler answers."""
    body = {"apiVersion": "compute.ironcore.dev/v1alpha1", "kind": "Reservation",
            "metadata": {"generateName": "prediction-", "labels": {PREDICTION_LABEL: "true"}},
            "spec": {**spec, "dryRun": True, "ttlSecondsAfterCreation": DRY_RUN_TTL}}
    info = _reservations()
    made = client.create_raw(info, body, namespace)
    name = str(_meta(made)["name"])
    try:
        answered = wait_for_one(client, info, namespace, name, reservation_answered,
                                time.monotonic() + timeout, known=made)
    except WaitTimeout:
        raise PredictionUnavailable(f"no scheduler answered whether it fits within {timeout:g}s (is "
                                    f"`ironpool scheduler` running?)") from None
    finally:
        with contextlib.suppress(NotFound):
            client.delete_raw(info, name, namespace)
    assert answered is not None
    verdict = condition(answered, rsv.SCHEDULED) or {}
    parts = {str(e["ref"]): {str(k): str(v) for k, v in (e.get("resources") or {}).items()}
             for e in rsv.pool_entries(answered)}
    return SetAnswer(verdict.get("status") == "True", str(verdict.get("message") or ""), parts)


def _ask(client: Client, namespace: str, machines: list[Obj], selector: dict[str, str],
         timeout: float) -> list[Prediction]:
    """One dry run for ``machines`` (one pool selector), its answer handed out in order."""
    counts: dict[str, int] = {}
    for m in machines:
        counts[_class(m)] = counts.get(_class(m), 0) + 1
    spec: Obj = {"resources": {rsv.class_key(c): str(n) for c, n in sorted(counts.items())}}
    if selector:
        spec["poolSelector"] = selector
    answer = predict_reservation(client, namespace, spec, timeout)
    message = answer.message
    places: list[tuple[str, str]] = []  # (pool, class) a machine may take
    for pool, resources in answer.parts.items():
        for key, raw in resources.items():
            cls = rsv.class_of_key(key)
            if cls is not None:
                places += [(pool, cls)] * parse_quantity(raw).value()
    together = f" (with {len(machines) - 1} more of this run)" if len(machines) > 1 else ""
    out = []
    for m in machines:
        spot = next((p for p in places if p[1] == _class(m)), None)
        if spot is not None:
            places.remove(spot)
            out.append(Prediction(_key(m, namespace), spot[0], f"fits{together}"))
        else:
            out.append(Prediction(_key(m, namespace), None, f"does not fit{together}: {message}"))
    return out


def _within(client: Client, namespace: str, name: str, key: str, cls: str,
            taken: dict[tuple[str, str], int]) -> Prediction:
    """A Machine placed within the Reservation ``name``: a pool of it with room, or why none."""
    try:
        reservation = client.get_raw(_reservations(), name, namespace)
    except NotFound:
        return Prediction(key, None, f"within reservation {name}, which does not exist yet")
    word = rsv.summary(reservation)
    if word not in (rsv.ACCEPTED, rsv.PENDING):
        return Prediction(key, None, f"reservation {name} is {word.lower()}: it holds nothing")
    for entry in rsv.pool_entries(reservation):
        pool = str(entry["ref"])
        held = parse_quantity((entry.get("resources") or {}).get(rsv.class_key(cls), "0")).value()
        consumed = parse_quantity((entry.get("consumed") or {}).get(rsv.class_key(cls), "0")).value()
        if consumed + taken.get((pool, cls), 0) < held:
            taken[(pool, cls)] = taken.get((pool, cls), 0) + 1
            return Prediction(key, pool, f"within reservation {name}")
    return Prediction(key, None, f"reservation {name} holds no more {cls}")
