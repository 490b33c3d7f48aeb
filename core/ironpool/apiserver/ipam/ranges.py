"""The ranges allocated inside one prefix: who holds what, and where the next free block is.

Addresses are integers (``int(ipaddress)``), ranges half-open ``[start, end)``. :class:`Allocations`
keeps each holder's range (to find the child that contains an address, and to name users) and the
same ranges coalesced (so finding a free block skips a run of neighbours in one step: filling a /16
address by address stays O(log n) per allocation instead of scanning every taken address).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Generic, TypeVar

H = TypeVar("H")


def align_up(value: int, size: int) -> int:
    return -(-value // size) * size


@dataclass
class _Coalesced:
    """Disjoint, non-adjacent ranges in order."""

    starts: list[int] = field(default_factory=list)
    ends: list[int] = field(default_factory=list)

    def add(self, start: int, end: int) -> None:
        i = bisect.bisect_left(self.starts, start)
        if i > 0 and self.ends[i - 1] == start:  # joins the range before
            i -= 1
            start = self.starts[i]
            del self.starts[i], self.ends[i]
        if i < len(self.starts) and self.starts[i] == end:  # joins the range after
            end = self.ends[i]
            del self.starts[i], self.ends[i]
        self.starts.insert(i, start)
        self.ends.insert(i, end)

    def remove(self, start: int, end: int) -> None:
        i = bisect.bisect_right(self.starts, start) - 1
        s, e = self.starts[i], self.ends[i]
        del self.starts[i], self.ends[i]
        if end < e:
            self.starts.insert(i, end)
            self.ends.insert(i, e)
        if s < start:
            self.starts.insert(i, s)
            self.ends.insert(i, start)

    def overlapping(self, start: int, end: int) -> bool:
        i = bisect.bisect_right(self.starts, start) - 1
        if i >= 0 and self.ends[i] > start:
            return True
        return i + 1 < len(self.starts) and self.starts[i + 1] < end


class Allocations(Generic[H]):
    """The ranges taken inside one prefix, each by one holder."""

    def __init__(self) -> None:
        self._starts: list[int] = []
        self._held: dict[int, tuple[int, H]] = {}  # start -> (end, holder)
        self._free_search = _Coalesced()

    def __len__(self) -> int:
        return len(self._starts)

    def __iter__(self) -> Iterator[tuple[int, int, H]]:
        for start in self._starts:
            end, holder = self._held[start]
            yield start, end, holder

    def overlaps(self, start: int, end: int) -> list[H]:
        """The holders of ranges that overlap ``[start, end)``."""
        return [holder for _, _, holder in self.within(start, end)]

    def within(self, start: int, end: int) -> list[tuple[int, int, H]]:
        """The ranges that overlap ``[start, end)``, with their bounds."""
        i = max(bisect.bisect_right(self._starts, start) - 1, 0)
        out = []
        while i < len(self._starts) and self._starts[i] < end:
            s = self._starts[i]
            e, holder = self._held[s]
            if e > start:
                out.append((s, e, holder))
            i += 1
        return out

    def containing(self, address: int) -> tuple[int, int, H] | None:
        """The range that holds ``address``, if any."""
        i = bisect.bisect_right(self._starts, address) - 1
        if i < 0:
            return None
        s = self._starts[i]
        e, holder = self._held[s]
        return (s, e, holder) if address < e else None

    def take(self, start: int, end: int, holder: H) -> None:
        """Record ``[start, end)`` as ``holder``'s; the range must be free."""
        bisect.insort(self._starts, start)
        self._held[start] = (end, holder)
        self._free_search.add(start, end)

    def release(self, start: int, holder: H) -> bool:
        """Give back the range starting at ``start`` if ``holder`` has it."""
        held = self._held.get(start)
        if held is None or held[1] != holder:
            return False
        del self._held[start]
        self._starts.pop(bisect.bisect_left(self._starts, start))
        self._free_search.remove(start, held[0])
        return True

    def first_free(self, lo: int, hi: int, size: int,
                   taken_elsewhere: Callable[[int], bool] | None = None) -> int | None:
        """The lowest start of a free, ``size``-aligned block of ``size`` inside ``[lo, hi)``, skipping
        single addresses for which ``taken_elsewhere`` says yes (``size`` 1 only)."""
        free = self._free_search
        candidate = align_up(lo, size)
        while candidate + size <= hi:
            i = bisect.bisect_right(free.starts, candidate) - 1
            if i >= 0 and free.ends[i] > candidate:
                candidate = align_up(free.ends[i], size)
                continue
            if i + 1 < len(free.starts) and free.starts[i + 1] < candidate + size:
                candidate = align_up(free.ends[i + 1], size)
                continue
            if taken_elsewhere is not None and taken_elsewhere(candidate):
                candidate += size
                continue
            return candidate
        return None

    def free_count(self, lo: int, hi: int) -> int:
        """How many addresses of ``[lo, hi)`` no range holds."""
        taken = 0
        for s, e in zip(self._free_search.starts, self._free_search.ends, strict=True):
            taken += max(0, min(e, hi) - max(s, lo))
        return hi - lo - taken
