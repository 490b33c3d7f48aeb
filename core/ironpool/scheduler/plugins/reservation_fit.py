"""ReservationFit: a Machine that names a Reservation (its label ``compute.ironcore.dev/reservation``)
goes only to a pool where that Reservation is Accepted and still holds room for it: a whole machine
of its class not in use yet, or room left in its cpu/memory block. Such a Machine takes the
Reservation's share, so the pools' free room does not limit it (ResourcesFit steps aside).

A Machine waits, saying why, while the Reservation does not exist, is not accepted by its pools yet,
was rejected or expired, or is all in use; it is tried again when the Reservation changes or a
Machine within it leaves.
"""

from __future__ import annotations

from typing import Any

from ironpool.api.reservation import ACCEPTED
from ironpool.scheduler.framework.events import ActionType, ClusterEventWithHint, EventResource, on
from ironpool.scheduler.framework.interface import (
    SKIP,
    SUCCESS,
    CycleState,
    PreFilterPlugin,
    Status,
    unschedulable,
)
from ironpool.scheduler.model import SchedulingRequest

NAME = "ReservationFit"


def _its_reservation(req: SchedulingRequest, key: Any) -> bool:
    return bool(key == req.reservation)


def _left_within(req: SchedulingRequest, placement: Any) -> bool:
    return bool(placement.reservation == req.reservation)


_CHANGES = on(EventResource.RESERVATION, ActionType.ALL, _its_reservation)
_SHARE_FREED = on(EventResource.PLACEMENT, ActionType.DELETE, _left_within)


def room(state: CycleState, reservation: str, pool: str, class_name: str | None,
         demand: dict[str, int]) -> bool:
    """Whether ``reservation`` holds room on ``pool`` for one more object of this class and demand."""
    cache = state.cache
    hold = cache.holds.get(reservation, {}).get(pool)
    if hold is None:
        return False
    if class_name is not None and hold.classes.get(class_name, 0) > 0:
        in_use = cache.within_classes.get((pool, reservation), {}).get(class_name, 0)
        if in_use < hold.classes[class_name]:
            return True
    if not hold.block:
        return False
    # The block's room: what the Reservation holds there unused, less the whole machines still to come.
    spare = dict(cache.unused_hold(pool, reservation))
    for c, n in hold.classes.items():
        left = max(0, n - cache.within_classes.get((pool, reservation), {}).get(c, 0))
        info = cache.classes.get(("machine", c))
        for r, v in (info.demand if info is not None else {}).items():
            spare[r] = spare.get(r, 0) - v * left
    return all(spare.get(r, 0) >= v for r, v in demand.items())


class ReservationFit(PreFilterPlugin):
    name = NAME

    def events_to_register(self) -> tuple[ClusterEventWithHint, ...]:
        return (_CHANGES, _SHARE_FREED)

    def pre_filter(self, state: CycleState, req: SchedulingRequest) -> Status:
        key = req.reservation
        if key is None:
            return SKIP
        name = key.split("/", 1)[-1]
        word = state.cache.reservation_states.get(key)
        if word is None:
            return unschedulable(NAME, f"reservation {name} does not exist", _CHANGES)
        if word in ("Expired", "Rejected", "Fits", "DoesNotFit"):
            what = {"Fits": "is a dry run", "DoesNotFit": "is a dry run"}.get(word, word.lower())
            return unschedulable(NAME, f"reservation {name} {what}: it holds nothing", _CHANGES)
        holds = state.cache.holds.get(key, {})
        accepted = sorted(pool for pool, hold in holds.items() if hold.state == ACCEPTED)
        if not accepted:
            return unschedulable(NAME, f"reservation {name} is not accepted by its pools yet", _CHANGES)
        fits = {pool for pool in accepted if room(state, key, pool, req.class_name, state.demand)}
        if not fits:
            held = sum(h.classes.get(req.class_name or "", 0) for h in holds.values())
            in_use = sum(state.cache.within_classes.get((p, key), {}).get(req.class_name or "", 0)
                         for p in holds)
            what = f"{req.class_name}: {in_use} of {held} in use" if held else f"room for {req.class_name}"
            return unschedulable(NAME, f"reservation {name} holds no more {what}", _CHANGES, _SHARE_FREED)
        state.pool_names = fits if state.pool_names is None else state.pool_names & fits
        state.within_share = True
        return SUCCESS
