"""What a machine runtime hands out of its host: Nova's ``cpu_allocation_ratio`` and reserved host
memory, or figures given outright (a host shared with other work, a test).

The runtime books machines and reservations against this capacity by what they were allocated
(each machine its class's cpu and memory), not by what the host's domains happen to use, so an
answer to ``CreateReservation`` depends only on what this runtime promised before.
"""

from __future__ import annotations

import math
from dataclasses import dataclass


@dataclass(frozen=True)
class CapacityPolicy:
    """``cpu`` and ``memory`` override the host's figures; the ratio and the reserved memory apply
    to either."""

    cpu_allocation_ratio: float = 1.0
    reserved_memory: int = 0
    cpu: int | None = None
    memory: int | None = None
    reserved_cpu: int = 0

    def __post_init__(self) -> None:
        if not self.cpu_allocation_ratio > 0 or not math.isfinite(self.cpu_allocation_ratio):
            raise ValueError(f"cpu allocation ratio: must be a number greater than 0, not "
                             f"{self.cpu_allocation_ratio}")
        if self.reserved_memory < 0 or self.reserved_cpu < 0:
            raise ValueError("reserved cpu and memory: must not be negative")
        for name, value in (("cpu", self.cpu), ("memory", self.memory)):
            if value is not None and value <= 0:
                raise ValueError(f"capacity {name}: must be greater than 0, not {value}")

    def total(self, host_cpus: int, host_memory: int) -> tuple[int, int]:
        """Whole cores and bytes of memory the runtime may hand out on a host with these figures."""
        cpu = self.cpu if self.cpu is not None else host_cpus
        memory = self.memory if self.memory is not None else host_memory
        return (max(0, math.floor(cpu * self.cpu_allocation_ratio + 1e-9) - self.reserved_cpu),
                max(0, memory - self.reserved_memory))
