"""Boot admission: at most so many guests of one runtime boot at once; the others wait their turn.

A booting guest keeps a core busy. Emulated guests booting together on few cores can each need more
CPU than one alone (they preempt each other and evict each other's translated code from the
caches): one day, ten Debian guests started at once on two cores used 36-38 CPU-s each to answer
SSH against 28 s alone, and the last answered after 185-198 s. Admitted two at a time (on a quicker
night, when all at once took 157 and 165 s) each used 29-31 s, the last answered after 149-163 s
and half of them within 98 s, not 147. So, like Nova's ``max_concurrent_builds``, a runtime starts
at most ``limit`` domains (the host's CPUs unless told otherwise) that are still booting, and
queues the rest in the order they asked. Unlike Nova's, a slot is held until the guest's boot has
settled, not until the hypervisor has started it:

- its guest agent connected (libvirt's agent lifecycle event): its userspace is up;
- or it went idle: all its QEMU's threads together ran, or waited for a core, less than a quarter of
  a second in each of two seconds in a row (``/proc/PID/task/TID/schedstat``). Waiting for a core
  counts as busy, or a crowded guest would look idle; and every thread counts, not only the vCPUs,
  for a booting guest's vCPU often sits halted while an I/O worker of its QEMU waits for a core to
  read its disk. Two seconds, because a crowded booting guest was seen to pause for one. Only for a
  QEMU on this machine (a remote libvirt's is not in our ``/proc``);
- or it stopped, or its QEMU used :data:`SETTLE_LIMIT_S` of CPU (a guest with neither sign; where its
  QEMU cannot be read, when that long passed). A limit in CPU rather than time, so that on a host
  so crowded that a boot takes minutes, guests still settle by their own signs.

A freed slot passes straight to the first waiting machine, so a machine created meanwhile cannot
overtake; the driver is asked to start it (:attr:`BootAdmission.start_next`), no thread waits. A
restarted runtime counts the guests it finds running as booting until they show a sign
(:meth:`BootAdmission.adopt`).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from . import vcpu_slice

log = logging.getLogger(__name__)

WINDOW_S = 1.0  # how often booting guests' QEMUs are read
IDLE_SHARE = 0.25  # a guest whose QEMU needed less than a quarter of a core over a window is idle
IDLE_WINDOWS = 2  # ... for this many windows in a row (a crowded booting guest can pause for one)
# A guest showing neither sign gives its slot back after its QEMU used this much CPU (a Debian guest
# needs about 28 s to its agent), or where that cannot be read, after this long.
SETTLE_LIMIT_S = 120.0


@dataclass
class _Boot:
    domain: str
    since: float  # when it was given its slot (monotonic)
    pids: list[int] = field(default_factory=list)  # its QEMU, once started (one, or none to read)
    sample: tuple[float, dict[int, tuple[int, int]]] | None = None  # (when, each thread's schedstat)
    idle: int = 0  # windows in a row it was idle
    cpu_ns: int = 0  # CPU its QEMU used since it started
    adopted: bool = False  # found running by a restarted runtime: its boot began before


@dataclass(frozen=True)
class Queued:
    """A start that must wait: how many wait before it, and whether it was queued just now."""

    ahead: int
    new: bool


class BootAdmission:
    """Boot slots of one runtime; ``limit`` 0 admits every start at once.

    ``start_next(machine_id)`` is called (never under a lock) when a waiting machine is given a slot;
    ``settled(machine_id, seconds, why)`` when a boot settled by one of its signs.
    """

    def __init__(self, limit: int, start_next: Callable[[str], object],
                 settled: Callable[[str, float, str], None], proc: Path = Path("/proc")) -> None:
        if limit < 0:
            raise ValueError(f"max booting: must be 0 (no limit) or more, not {limit}")
        self.limit = limit
        self.start_next = start_next
        self.settled = settled
        self.proc = proc
        self._booting: dict[str, _Boot] = {}
        self._waiting: OrderedDict[str, str] = OrderedDict()  # machine id -> domain name
        self._cond = threading.Condition()
        self._closed = False
        self._thread: threading.Thread | None = None

    # -- the driver's side ----------------------------------------------------------------------
    def admit(self, machine_id: str, domain: str) -> Queued | None:
        """None: boot now (the slot is held until :meth:`release` or a settle); else it waits."""
        if not self.limit:
            return None
        with self._cond:
            if machine_id in self._booting:
                return None  # handed over by a settle, or asked again
            if len(self._booting) < self.limit and not self._waiting:
                self._booting[machine_id] = _Boot(domain, time.monotonic())
                self._watch()
                return None
            new = machine_id not in self._waiting
            self._waiting.setdefault(machine_id, domain)
            return Queued(list(self._waiting).index(machine_id), new)

    def started(self, machine_id: str) -> None:
        """The domain of an admitted machine is running: find its QEMU to watch."""
        with self._cond:
            boot = self._booting.get(machine_id)
        if boot is None:
            return
        try:
            pids = vcpu_slice.qemu_pids(boot.domain, self.proc)
            sample = (time.monotonic(), self._schedstats(pids)) if pids else None
        except OSError:  # no /proc, or exited at once (then the lifecycle event frees the slot)
            pids, sample = [], None
        with self._cond:
            boot.pids, boot.sample = pids, sample

    def adopt(self, running: dict[str, str]) -> None:
        """Count the guests a restarted runtime finds running (machine id: domain) as booting until
        they show a sign, so that a restart in the middle of many boots does not start every waiting
        machine at once. Their QEMUs' CPU so far counts towards the limit; an idle one settles within
        two windows. Only guests whose QEMU this process can read: others would hold a slot for
        :data:`SETTLE_LIMIT_S` with nothing to tell whether they boot."""
        if not self.limit or not running:
            return
        try:
            found = vcpu_slice.qemu_processes(self.proc)
        except OSError:  # no /proc here
            return
        now = time.monotonic()
        with self._cond:
            for machine_id, domain in running.items():
                pids = found.get(domain, [])
                try:
                    threads = self._schedstats(pids)
                except OSError:  # exited meanwhile
                    continue
                if not threads or machine_id in self._booting:
                    continue
                self._booting[machine_id] = _Boot(domain, now, pids, (now, threads), adopted=True,
                                                  cpu_ns=sum(on_cpu for on_cpu, _ in threads.values()))
            if self._booting:
                self._watch()

    def release(self, machine_id: str) -> None:
        """The machine no longer boots or waits (deleted, powered off, stopped, or its start failed)."""
        self._settle(machine_id, "")

    def agent_connected(self, machine_id: str) -> None:
        self._settle(machine_id, "its guest agent connected")

    def waiting(self) -> list[str]:
        with self._cond:
            return list(self._waiting)

    def booting(self) -> list[str]:
        with self._cond:
            return list(self._booting)

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()

    # -- settling -------------------------------------------------------------------------------
    def _settle(self, machine_id: str, why: str) -> None:
        """Free ``machine_id``'s slot (or its place in the queue) and hand the slot on."""
        with self._cond:
            if self._waiting.pop(machine_id, None) is not None:
                return
            boot = self._booting.pop(machine_id, None)
            if boot is None:
                return
            nxt = None
            if self._waiting and len(self._booting) < self.limit:
                nxt, domain = self._waiting.popitem(last=False)
                self._booting[nxt] = _Boot(domain, time.monotonic())
        if why and boot.adopted:  # no event: its boot began unseen, and may have ended long ago
            log.info("machine %s: running before the runtime started; %s", machine_id, why)
        elif why:
            took = time.monotonic() - boot.since
            log.info("machine %s: boot settled after %.1f s: %s", machine_id, took, why)
            self.settled(machine_id, took, why)
        if nxt is not None:
            self.start_next(nxt)

    def poll(self, now: float) -> None:
        """Settle each booting guest that shows a sign; called every :data:`WINDOW_S` by the watcher."""
        with self._cond:
            boots = list(self._booting.items())
        for machine_id, boot in boots:
            try:
                why = self._sign(boot, now)
            except (OSError, ValueError):  # its QEMU exited: no boot, and the lifecycle event says so
                self.release(machine_id)
                continue
            if why:
                self._settle(machine_id, why)

    def _sign(self, boot: _Boot, now: float) -> str:
        if not boot.pids:  # not started yet, or its QEMU is not ours to read
            return f"no sign of a finished boot within {SETTLE_LIMIT_S:.0f} s" if (
                now - boot.since >= SETTLE_LIMIT_S) else ""
        threads = self._schedstats(boot.pids)
        if not threads:
            raise OSError("its QEMU exited")
        last, boot.sample = boot.sample, (now, threads)
        if last is None or now - last[0] < WINDOW_S / 2:
            return ""
        # A thread new since the last reading (QEMU starts I/O workers as it needs them) counts whole:
        # all its time falls within the window. One that ended within it is lost: they are short.
        ran = waited = 0
        for tid, (on_cpu, waiting) in threads.items():
            before = last[1].get(tid, (0, 0))
            ran, waited = ran + on_cpu - before[0], waited + waiting - before[1]
        boot.cpu_ns += ran
        share = (ran + waited) / ((now - last[0]) * 1e9)
        log.debug("domain %s: %.2f cores busy over the last %.1f s", boot.domain, share, now - last[0])
        boot.idle = boot.idle + 1 if share < IDLE_SHARE else 0
        if boot.idle >= IDLE_WINDOWS:
            return "it went idle"
        if boot.cpu_ns >= SETTLE_LIMIT_S * 1e9:
            return f"no sign of a finished boot after {SETTLE_LIMIT_S:.0f} s of CPU"
        return ""

    def _schedstats(self, pids: list[int]) -> dict[int, tuple[int, int]]:
        """Each thread's time on a core and time waiting for one, so far (ns)."""
        threads = {}
        for pid in pids:
            for task in (self.proc / str(pid) / "task").iterdir():
                try:
                    on_cpu, waiting, _ = (task / "schedstat").read_text().split()
                except (OSError, ValueError):
                    continue  # gone meanwhile
                threads[int(task.name)] = (int(on_cpu), int(waiting))
        return threads

    def _watch(self) -> None:
        """Start the watcher thread on the first boot (call with the lock held)."""
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="boot-admission", daemon=True)
            self._thread.start()
        self._cond.notify_all()

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._booting and not self._closed:
                    self._cond.wait()
                if self._closed:
                    return
                # A periodic reading of their QEMUs, not a wait for another thread: close() cuts it short.
                self._cond.wait(WINDOW_S)
                if self._closed:
                    return
            try:
                self.poll(time.monotonic())
            except Exception:
                log.exception("reading booting guests failed")
