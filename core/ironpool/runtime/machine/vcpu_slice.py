"""Longer scheduler slices for emulated vCPUs, so guests sharing a host's cores thrash its caches less.

An emulated (TCG) vCPU thread runs translated guest code for as long as it is let; it never waits.
Linux's fair scheduler (EEVDF, 6.6 and later) runs it for a base slice of a millisecond or so (0.75 ms,
scaled up with the number of CPUs) before the next runnable thread. With more emulated guests than
cores, each switch starts another QEMU on caches full of the last one's translated code and guest
memory. Ten Debian guests booting at once on two cores needed 44 s of CPU each to answer SSH with
the kernel's slice, 30-36 s with 100 ms; all ten answered after 214-241 s, and after 153-184 s.
Since Linux 6.12 a fair task may ask for its own slice (``sched_attr``'s ``sched_runtime``, 0.1-100
ms); a waking task with a shorter slice still preempts it, so the host's own services keep their
latency. On older kernels nothing is asked.

The runtime asks for :data:`DEFAULT_MS` unless told otherwise (``--vcpu-slice-ms``; 0 leaves the
kernel's). Of the first guests booted with it, ten at a time, one in about fifty stopped in its
initramfs (never seen again) and one in 65 panicked in the kernel's boot-time timer check, which the
Debian image now skips (``no_timer_check``); after that, 231 booted so and every one came up.

Only threads QEMU names ``CPU N/TCG`` (libvirt starts QEMU with ``debug-threads=on``) are touched:
KVM vCPUs spend their time in the guest and are left to the default. The request is best effort: a
QEMU this process cannot see (a remote libvirt) or may not change is left as it was.
"""

from __future__ import annotations

import ctypes
import logging
import os
import platform
import re
import struct
from pathlib import Path

log = logging.getLogger(__name__)

_TCG_THREAD = re.compile(r"CPU \d+/TCG")
# struct sched_attr (SCHED_ATTR_SIZE_VER1): size, policy, flags, nice, priority, runtime, deadline,
# period, util_min, util_max.
_ATTR = struct.Struct("=IIQiIQQQII")
_KEEP_POLICY = 0x08  # SCHED_FLAG_KEEP_POLICY: only the parameters change
_SYSCALLS = {"x86_64": (314, 315), "aarch64": (274, 275)}  # sched_setattr, sched_getattr
DEFAULT_MS = 100  # the longest slice Linux grants a fair task


def ms_to_ns(ms: float) -> int:
    """A slice in milliseconds (``--vcpu-slice-ms``) as the nanoseconds the runtime asks for."""
    return int(ms * 1_000_000)


DEFAULT_NS = ms_to_ns(DEFAULT_MS)


def kernel_keeps_slices(release: str | None = None) -> bool:
    """Whether the running kernel (or ``release``) keeps a fair task's own slice: Linux 6.12 and later."""
    found = re.match(r"(\d+)\.(\d+)", release or platform.release())
    return found is not None and (int(found[1]), int(found[2])) >= (6, 12)


def qemu_processes(proc: Path = Path("/proc")) -> dict[str, list[int]]:
    """The local QEMU processes libvirt started (``-name guest=NAME,...``), by domain name."""
    found: dict[str, list[int]] = {}
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:  # gone meanwhile, or not ours to read
            continue
        argv = cmdline.split(b"\0")
        if b"qemu" not in argv[0]:
            continue
        for arg in argv:
            if arg.startswith(b"guest=") and b"," in arg:
                name = arg[6:].split(b",", 1)[0].decode(errors="replace")
                found.setdefault(name, []).append(int(entry.name))
                break
    return found


def qemu_pids(domain_name: str, proc: Path = Path("/proc")) -> list[int]:
    """The local QEMU processes libvirt started for ``domain_name``."""
    return qemu_processes(proc).get(domain_name, [])


def tcg_threads(pid: int, proc: Path = Path("/proc")) -> list[int]:
    """The thread ids of ``pid``'s emulated vCPUs."""
    tids = []
    for task in (proc / str(pid) / "task").iterdir():
        try:
            if _TCG_THREAD.fullmatch((task / "comm").read_text().strip()):
                tids.append(int(task.name))
        except OSError:
            continue
    return tids


def _syscall(nr: int, *args: object) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.syscall(nr, *args) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, os.strerror(errno))


def sched_attr(tid: int) -> list[int]:
    """Thread ``tid``'s ``struct sched_attr``, field by field (``[5]`` is its slice on a fair task)."""
    numbers = _SYSCALLS.get(platform.machine())
    if numbers is None:
        raise OSError(f"sched_getattr: no syscall number known for {platform.machine()}")
    buf = ctypes.create_string_buffer(_ATTR.size)
    _syscall(numbers[1], tid, buf, _ATTR.size, 0)
    return list(_ATTR.unpack(buf.raw))


def _set_slice(tid: int, slice_ns: int) -> None:
    fields = sched_attr(tid)
    # Everything else goes back as it was (sched_setattr sets a fair task's nice with its slice).
    fields[0], fields[2], fields[5] = _ATTR.size, _KEEP_POLICY, slice_ns  # size, flags, runtime
    _syscall(_SYSCALLS[platform.machine()][0], tid, ctypes.create_string_buffer(_ATTR.pack(*fields)), 0)


def lengthen(domain_name: str, slice_ns: int) -> int:
    """Ask for ``slice_ns`` on the emulated vCPUs of ``domain_name``'s QEMU; how many were set."""
    if platform.machine() not in _SYSCALLS or not kernel_keeps_slices():
        return 0
    done = 0
    try:
        for pid in qemu_pids(domain_name):
            for tid in tcg_threads(pid):
                _set_slice(tid, slice_ns)
                done += 1
    except OSError as exc:
        log.warning("domain %s: its emulated vCPUs keep the kernel's slice: %s", domain_name, exc)
    return done
