"""Boot admission without libvirt: slots and the queue, handing a freed slot on, and the signs of a
settled boot read from a /proc tree written here (each QEMU thread's schedstat)."""

from __future__ import annotations

import shutil
import threading
import time
from pathlib import Path

import pytest
from ironpool.runtime.machine.boot_admission import SETTLE_LIMIT_S, BootAdmission, Queued

from tests.helpers.wait import wait_for

QEMU = "/usr/bin/qemu-system-x86_64"
SECOND = 1_000_000_000


class Recorder:
    """The driver's side: which machines were handed a slot, and which boots settled why."""

    def __init__(self) -> None:
        self.started: list[str] = []
        self.settled: list[tuple[str, str]] = []
        self.lock = threading.Lock()

    def start_next(self, machine_id: str) -> None:
        with self.lock:
            self.started.append(machine_id)

    def on_settled(self, machine_id: str, _seconds: float, why: str) -> None:
        with self.lock:
            self.settled.append((machine_id, why))


def admission(limit: int, proc: Path = Path("/nonexistent")) -> tuple[BootAdmission, Recorder]:
    rec = Recorder()
    return BootAdmission(limit, rec.start_next, rec.on_settled, proc), rec


def fake_qemu(proc: Path, domain: str, pid: int, threads: int) -> list[Path]:
    """A QEMU process for ``domain`` with ``threads`` threads (its main thread first); their
    schedstat files, all at zero."""
    (proc / str(pid)).mkdir(parents=True)
    (proc / str(pid) / "cmdline").write_bytes(f"{QEMU}\0-name\0guest={domain},debug-threads=on\0".encode())
    stats = []
    for tid in range(pid, pid + threads):
        (proc / str(pid) / "task" / str(tid)).mkdir(parents=True)
        stats.append(proc / str(pid) / "task" / str(tid) / "schedstat")
        stats[-1].write_text("0 0 0\n")
    return stats


def spend(schedstat: Path, on_cpu_s: float, waiting_s: float) -> None:
    """The thread ran ``on_cpu_s`` more and waited for a core ``waiting_s`` more."""
    on_cpu, waiting, slices = (int(v) for v in schedstat.read_text().split())
    on_cpu, waiting = on_cpu + int(on_cpu_s * SECOND), waiting + int(waiting_s * SECOND)
    schedstat.write_text(f"{on_cpu} {waiting} {slices + 1}\n")


def test_slots_fill_then_starts_wait_in_order_and_a_freed_slot_goes_to_the_first() -> None:
    adm, rec = admission(2)
    assert adm.admit("a", "ironpool-a") is None and adm.admit("b", "ironpool-b") is None
    assert adm.admit("c", "ironpool-c") == Queued(ahead=0, new=True)
    assert adm.admit("d", "ironpool-d") == Queued(ahead=1, new=True)
    assert adm.admit("c", "ironpool-c") == Queued(ahead=0, new=False)  # asked again: still first, not news
    adm.agent_connected("a")
    assert rec.settled == [("a", "its guest agent connected")]
    assert rec.started == ["c"] and adm.booting() == ["b", "c"] and adm.waiting() == ["d"]
    assert adm.admit("c", "ironpool-c") is None  # the driver's start of c finds its slot held
    # A machine created now waits behind d, though nothing frees a slot for it yet.
    assert adm.admit("e", "ironpool-e") == Queued(ahead=1, new=True)


def test_a_waiting_machine_deleted_or_powered_off_leaves_the_queue_without_a_slot() -> None:
    adm, rec = admission(1)
    adm.admit("a", "ironpool-a")
    adm.admit("b", "ironpool-b")
    adm.admit("c", "ironpool-c")
    adm.release("b")
    assert adm.waiting() == ["c"] and adm.booting() == ["a"] and rec.started == []
    adm.release("a")  # a stopped or failed to start: its slot passes on, with no settled boot to tell
    assert rec.started == ["c"] and rec.settled == []
    adm.release("nobody")  # never admitted: nothing happens
    adm.agent_connected("a")  # an agent of a guest not booting (it rebooted itself): nothing happens
    assert adm.booting() == ["c"] and rec.settled == []


def test_no_limit_admits_every_start_and_tracks_nothing() -> None:
    adm, _ = admission(0)
    assert all(adm.admit(m, f"ironpool-{m}") is None for m in "abcdefghij")
    assert adm.booting() == [] and adm.waiting() == []


def test_a_negative_limit_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match=r"max booting.*-1"):
        admission(-1)


def test_a_guest_whose_qemu_stays_idle_settles_and_waiting_for_a_core_is_busy(tmp_path: Path) -> None:
    adm, rec = admission(1, tmp_path)
    main, vcpu, worker = fake_qemu(tmp_path, "ironpool-a", 100, threads=3)
    adm.admit("a", "ironpool-a")
    adm.admit("b", "ironpool-b")
    adm.started("a")
    t = time.monotonic()
    spend(vcpu, 0.05, 0.25)  # crowded: on a core a twentieth of the second, waiting for one more
    adm.poll(t + 1.0)
    spend(main, 0.05, 0.25)  # the vCPU halted, waiting for a disk read the main loop waits to do
    adm.poll(t + 2.0)
    # The read went to an I/O worker QEMU started meanwhile, which waited for a core most of the
    # second: all its time is new. (The one before it exited.)
    worker.parent.rename(worker.parent.with_name("999"))
    worker = worker.parent.with_name("999") / "schedstat"
    worker.write_text("0 0 0\n")
    spend(worker, 0.05, 0.25)
    adm.poll(t + 3.0)
    adm.poll(t + 4.0)  # a second without a thing to do: a pause, not yet idle
    spend(vcpu, 0.3, 0.0)
    adm.poll(t + 5.0)
    spend(vcpu, 0.1, 0.1)  # idle two seconds in a row: a fifth of a core, then nothing
    adm.poll(t + 6.0)
    assert rec.settled == [] and adm.booting() == ["a"]
    adm.poll(t + 7.0)
    assert rec.settled == [("a", "it went idle")] and rec.started == ["b"]


def test_a_guest_showing_no_sign_gives_its_slot_back_after_the_limit_in_cpu(tmp_path: Path) -> None:
    adm, rec = admission(1, tmp_path)
    (vcpu,) = fake_qemu(tmp_path, "ironpool-a", 100, threads=1)
    adm.admit("a", "ironpool-a")
    adm.admit("b", "ironpool-b")
    adm.started("a")
    t = time.monotonic()
    # A crowded host: minutes pass, the guest gets a fraction of a core and stays busy.
    for second in range(1, int(SETTLE_LIMIT_S * 2)):
        spend(vcpu, 0.4, 0.6)
        adm.poll(t + second)
    assert rec.settled == [] and adm.booting() == ["a"]
    for second in range(int(SETTLE_LIMIT_S * 2), int(SETTLE_LIMIT_S * 2) + 100):
        spend(vcpu, 0.9, 0.1)
        adm.poll(t + second)
        if rec.settled:
            break
    assert rec.settled == [("a", f"no sign of a finished boot after {SETTLE_LIMIT_S:.0f} s of CPU")]
    assert rec.started == ["b"]


def test_a_guest_not_started_or_not_readable_gives_its_slot_back_after_the_limit_in_time() -> None:
    adm, rec = admission(1)  # a remote libvirt's QEMU, not in this /proc
    adm.admit("a", "ironpool-a")
    adm.admit("b", "ironpool-b")
    adm.started("a")
    t = time.monotonic()
    adm.poll(t + SETTLE_LIMIT_S - 1)
    assert rec.settled == []
    adm.poll(t + SETTLE_LIMIT_S + 1)
    assert rec.settled == [("a", f"no sign of a finished boot within {SETTLE_LIMIT_S:.0f} s")]
    assert rec.started == ["b"]


def test_a_guest_whose_qemu_exited_frees_its_slot_without_a_settled_boot(tmp_path: Path) -> None:
    adm, rec = admission(1, tmp_path)
    fake_qemu(tmp_path, "ironpool-a", 100, threads=1)
    adm.admit("a", "ironpool-a")
    adm.admit("b", "ironpool-b")
    adm.started("a")
    shutil.rmtree(tmp_path / "100")
    adm.poll(time.monotonic() + 1.0)
    assert rec.settled == [] and rec.started == ["b"]


def test_a_guest_without_a_local_qemu_settles_only_by_its_agent_or_the_limit(tmp_path: Path) -> None:
    adm, rec = admission(1, tmp_path)  # a remote libvirt's QEMU: not in this /proc
    adm.admit("a", "ironpool-a")
    adm.started("a")
    adm.poll(time.monotonic() + 5.0)
    assert adm.booting() == ["a"]
    adm.agent_connected("a")
    assert rec.settled == [("a", "its guest agent connected")]


def test_the_watcher_settles_an_idle_guest_by_itself(tmp_path: Path) -> None:
    adm, rec = admission(1, tmp_path)
    fake_qemu(tmp_path, "ironpool-a", 100, threads=2)  # its threads never run
    try:
        adm.admit("a", "ironpool-a")
        adm.admit("b", "ironpool-b")
        adm.started("a")
        wait_for(lambda: rec.started == ["b"], 10, "the watcher to hand the idle guest's slot on")
        assert rec.settled == [("a", "it went idle")]
    finally:
        adm.close()


def test_guests_running_when_the_runtime_starts_hold_slots_until_they_show_a_sign(tmp_path: Path) -> None:
    """A runtime restarted while guests boot counts them, so its queue does not start more at once."""
    busy = fake_qemu(tmp_path, "ironpool-a", 100, threads=2)
    fake_qemu(tmp_path, "ironpool-b", 200, threads=2)  # idle
    (old,) = fake_qemu(tmp_path, "ironpool-c", 300, threads=1)
    spend(old, SETTLE_LIMIT_S + 1, 0)  # its QEMU used more CPU than any boot: booted long ago
    adm, rec = admission(2, tmp_path)
    adm.close()  # the test reads the guests itself, at the times it says
    adm.adopt({"a": "ironpool-a", "b": "ironpool-b", "c": "ironpool-c", "r": "ironpool-remote"})
    assert sorted(adm.booting()) == ["a", "b", "c"]  # r's QEMU is not in this /proc: nothing to read
    assert adm.admit("d", "ironpool-d") == Queued(ahead=0, new=True)
    t = time.monotonic()
    spend(busy[1], 0.9, 0.1)
    adm.poll(t + 1.0)
    assert sorted(adm.booting()) == ["a", "b"] and rec.started == []  # c settled; a and b fill the slots
    spend(busy[1], 0.9, 0.1)
    adm.poll(t + 2.0)
    assert adm.booting() == ["a", "d"] and rec.started == ["d"]  # b went idle, its slot went to d
    assert rec.settled == []  # boots begun before the runtime started get no Booted event
