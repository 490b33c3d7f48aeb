"""This process's resident memory, and giving the memory it has freed back to the system.

Freed Python objects go back to the C allocator, which keeps much of it for later (glibc's heap only
shrinks from its top, and each thread that allocated has an arena of its own): after a burst a
process stays at its high-water mark. :func:`malloc_trim` has glibc return every free page (a few
milliseconds; elsewhere it does nothing). The apiserver calls it after bursts
(``apiserver.serving.memory_settle``, the SQLite store's settle).
"""

from __future__ import annotations

import contextlib
import ctypes
import os

_PAGE = os.sysconf("SC_PAGE_SIZE")


def resident_bytes() -> int:
    """This process's resident set size, from ``/proc/self/statm``."""
    with open("/proc/self/statm", "rb") as f:
        return int(f.read().split()[1]) * _PAGE


def malloc_trim() -> None:
    """Give the C heap's free pages back to the system (glibc only; elsewhere nothing)."""
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6").malloc_trim(0)
