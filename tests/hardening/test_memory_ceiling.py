"""The memory ceiling in process: refusals while resident memory is above it, and none once the
memory is freed again (the ceiling gives freed heap back to the system before it refuses)."""

from __future__ import annotations

import pytest
from ironpool.api import errors
from ironpool.apiserver.serving.inflight import InFlight, MemoryCeiling
from ironpool.memory import resident_bytes

from tests.helpers.wait import wait_for

MIB = 1024 * 1024


def passes(ceiling: MemoryCeiling) -> bool:
    try:
        ceiling.check()
    except errors.TooManyRequests:
        return False
    return True


def test_refuses_above_the_ceiling_and_recovers_once_memory_is_freed() -> None:
    ceiling = MemoryCeiling(resident_bytes() + 100 * MIB)
    assert passes(ceiling)
    # 200 MiB in 64 KiB blocks: below glibc's mmap threshold, from the heap a free may not shrink.
    blocks = [bytearray(64 * 1024) for _ in range(3_200)]
    ceiling._read_at = -1.0
    with pytest.raises(errors.TooManyRequests) as refused:
        ceiling.check()
    assert refused.value.code == 429 and refused.value.retry_after_seconds == 1
    assert "memory limit" in str(refused.value)
    del blocks
    wait_for(lambda: passes(ceiling), 10, "the ceiling to let requests through again")


def test_in_flight_holds_check_the_ceiling_first() -> None:
    inflight = InFlight(per_user=5, memory_limit=1)
    with pytest.raises(errors.TooManyRequests, match="memory limit"), inflight.hold("alice"):
        pass
    assert inflight.current("alice") == 0
    with pytest.raises(ValueError, match="memory limit must be positive"):
        MemoryCeiling(0)
