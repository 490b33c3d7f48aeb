"""A namespace's quota state as its guard key holds it (pure): what it stores, what each quota
counts of the tally, and how a write changes it."""

from __future__ import annotations

from typing import Any

from ironpool.api.quota import (
    COUNT_MACHINES,
    COUNT_VOLUMES,
    MACHINE,
    REQUESTS_CPU,
    REQUESTS_MEMORY,
    REQUESTS_STORAGE,
    VOLUME,
)
from ironpool.apiserver.admission.quota_state import Entry, Quota, QuotaState

GI = 2**30 * 10**9  # 1Gi in nano-units
ONE = 10**9
CAPS = {"small": {"cpu": ONE, "memory": GI}, "large": {"cpu": 4 * ONE, "memory": 8 * GI}, "gone": None}


def req(scope: str, op: str, *values: str) -> dict[str, Any]:
    return {"scopeName": scope, "operator": op, "values": list(values)}


QUOTAS = {"all": Quota({REQUESTS_CPU: "8", REQUESTS_STORAGE: "100Gi", COUNT_VOLUMES: "9"}, ()),
          "large": Quota({REQUESTS_CPU: "4", COUNT_MACHINES: "1"}, (req("MachineClass", "In", "large"),)),
          "unclassed": Quota({COUNT_VOLUMES: "2"}, (req("VolumeClass", "DoesNotExist"),))}
TALLY = {(MACHINE, "small"): Entry(3), (MACHINE, "large"): Entry(1), (MACHINE, "gone"): Entry(2),
         (VOLUME, "fast"): Entry(2, 70 * GI), (VOLUME, None): Entry(1, 64 * GI)}


def test_the_state_round_trips_and_each_quota_counts_its_scope() -> None:
    state = QuotaState(QUOTAS, TALLY)
    again = QuotaState.decode(state.encode())
    assert again == state
    # Storage in nano-units overflows JSON's 64-bit integers: stored as a decimal string.
    assert state.encode()["tally"]["volumes"][""] == {"count": "1", "storage": str(64 * GI)}
    # Machines use their class's cpu as the class is; those of a class that is gone use none.
    assert again.used(QUOTAS["all"], CAPS) == {REQUESTS_CPU: 7 * ONE, REQUESTS_STORAGE: 134 * GI,
                                               COUNT_VOLUMES: 3 * ONE}
    assert again.used(QUOTAS["large"], CAPS) == {REQUESTS_CPU: 4 * ONE, COUNT_MACHINES: ONE}
    assert again.used(QUOTAS["unclassed"], CAPS) == {COUNT_VOLUMES: ONE}
    assert again.machine_classes() == ["gone", "large", "small"]
    # Not counted yet: no tally at all (not an empty namespace).
    pending = QuotaState.decode({"quotas": {"all": {"hard": {REQUESTS_CPU: "1"}}}})
    assert pending.tally is None and "tally" not in pending.encode()


def test_changes_add_and_take_away_and_leave_the_old_state_as_it_was() -> None:
    state = QuotaState(QUOTAS, TALLY)
    more = state.with_change((MACHINE, "small"), Entry(1)).with_change((VOLUME, "fast"), Entry(0, 2 * GI))
    assert more.used(QUOTAS["all"], CAPS)[REQUESTS_CPU] == 8 * ONE
    assert more.used(QUOTAS["all"], CAPS)[REQUESTS_STORAGE] == 136 * GI
    emptied = more.with_change((MACHINE, "large"), Entry(-1)).with_change((VOLUME, None), Entry(-1, -64 * GI))
    assert emptied.tally is not None
    assert (MACHINE, "large") not in emptied.tally and (VOLUME, None) not in emptied.tally
    assert emptied.used(QUOTAS["large"], CAPS) == {REQUESTS_CPU: 0, COUNT_MACHINES: 0}
    assert state.tally == TALLY  # a state is never changed in place
    assert QuotaState(QUOTAS, TALLY).used(QUOTAS["all"], {}) == {
        REQUESTS_CPU: 0, REQUESTS_STORAGE: 134 * GI, COUNT_VOLUMES: 3 * ONE}
    assert REQUESTS_MEMORY not in state.used(QUOTAS["all"], CAPS)  # only what the quota limits
