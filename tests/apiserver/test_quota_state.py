"""A namespace's quota state as its guard key holds it (pure): what it stores, and what each quota
counts of the charges."""

from __future__ import annotations

from typing import Any

from ironpool.api.quota import COUNT_MACHINES, COUNT_VOLUMES, REQUESTS_CPU, REQUESTS_STORAGE
from ironpool.apiserver.admission.quota_state import Charge, Quota, QuotaState

GI = 2**30 * 10**9  # 1Gi in nano-units
ONE = 10**9


def req(scope: str, op: str, *values: str) -> dict[str, Any]:
    return {"scopeName": scope, "operator": op, "values": list(values)}


def test_the_guard_keys_state_round_trips_and_counts_per_quota() -> None:
    state = QuotaState(
        {"all": Quota({REQUESTS_CPU: "8", REQUESTS_STORAGE: "10Gi"}, ()),
         "big": Quota({REQUESTS_CPU: "4"}, (req("MachineClass", "In", "large"),))},
        {"machines/a": Charge("large", {COUNT_MACHINES: ONE, REQUESTS_CPU: 4 * ONE}),
         "machines/b": Charge("small", {COUNT_MACHINES: ONE, REQUESTS_CPU: ONE}),
         "volumes/v": Charge(None, {COUNT_VOLUMES: ONE, REQUESTS_STORAGE: 64 * GI})})
    again = QuotaState.decode(state.encode())
    assert again == state
    # 64Gi in nano-units overflows JSON's 64-bit integers: stored as a decimal string.
    assert state.encode()["charges"]["volumes/v"]["amounts"][REQUESTS_STORAGE] == str(64 * GI)
    assert again.used(again.quotas["all"]) == {REQUESTS_CPU: 5 * ONE, REQUESTS_STORAGE: 64 * GI}
    assert again.used(again.quotas["big"]) == {REQUESTS_CPU: 4 * ONE}
    # Not counted yet: no charges at all (not an empty namespace).
    pending = QuotaState.decode({"quotas": {"all": {"hard": {REQUESTS_CPU: "1"}}}})
    assert pending.charges is None and "charges" not in pending.encode()
