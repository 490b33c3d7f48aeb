"""Progress lines and the summary block ``ironpool up`` prints while it starts and stops."""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from typing import TextIO


class Progress:
    """Writes one line per component as it becomes ready (``✓ apiserver  http://...  0.3s``)."""

    def __init__(self, out: TextIO | None = None, width: int = 18) -> None:
        self.out = out or sys.stdout
        self.width = width
        self._t0 = time.monotonic()
        self._step = self._t0
        encoding = (getattr(self.out, "encoding", None) or "ascii").lower()
        unicode_ok = encoding.startswith("utf")
        self.ok_mark = "✓" if unicode_ok else "+"
        self.fail_mark = "✗" if unicode_ok else "!"

    def _emit(self, text: str) -> None:
        self.out.write(text + "\n")
        self.out.flush()

    def begin(self) -> None:
        """Start timing the next step."""
        self._step = time.monotonic()

    def ok(self, name: str, detail: str = "") -> None:
        took = time.monotonic() - self._step
        self._emit(f"{self.ok_mark} {name:<{self.width}} {detail}  ({took:.1f}s)".rstrip())
        self._step = time.monotonic()

    def fail(self, name: str, detail: str) -> None:
        self._emit(f"{self.fail_mark} {name:<{self.width}} {detail}")

    def note(self, text: str) -> None:
        self._emit(text)

    def elapsed(self) -> float:
        return time.monotonic() - self._t0

    def block(self, title: str, rows: Sequence[tuple[str, str]]) -> None:
        """A titled block of ``key: value`` rows, keys aligned."""
        width = max((len(k) for k, _ in rows), default=0)
        lines = [title, *(f"  {k + ':':<{width + 1}} {v}" for k, v in rows)]
        self._emit("\n".join(lines))
