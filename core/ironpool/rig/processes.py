"""The rig's processes: each started in a session of its own with its output in a log file, found
again from the rig's state file by PID and command line, stopped cleanly or killed as a crash."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path


class RigError(Exception):
    """A part of the rig did not start or stop; the message names it and its log."""


def ironpool(*args: str) -> list[str]:
    """The command line of ``ironpool ARGS`` with this interpreter (this installation's ironpool)."""
    return [sys.executable, "-m", "ironpool.cli.main", *args]


def wait_until(probe: Callable[[], bool], timeout: float, what: str, proc: Proc | None = None) -> None:
    """Poll ``probe`` until true; a process of the part that exits first, or the deadline, is an error."""
    deadline = time.monotonic() + timeout
    while not probe():
        if proc is not None and not proc.alive:
            raise RigError(f"{what}: exited; last lines of {proc.log}:\n{proc.tail()}")
        if time.monotonic() > deadline:
            raise RigError(f"{what}: not ready within {timeout:.0f}s" + (f"; see {proc.log}" if proc else ""))
        time.sleep(0.1)


_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}  # started by this process: reaped through Popen


@dataclass
class Proc:
    """One process of the rig: how it was started and its PID."""

    name: str
    argv: list[str]
    log: str
    pid: int = 0
    env: dict[str, str] = field(default_factory=dict)

    def start(self) -> None:
        with open(self.log, "ab") as out:
            child = subprocess.Popen(self.argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                                     env={**os.environ, "PYTHONUNBUFFERED": "1", **self.env})
        self.pid = child.pid
        _CHILDREN[child.pid] = child

    @property
    def alive(self) -> bool:
        if not self.pid:
            return False
        child = _CHILDREN.get(self.pid)
        if child is not None:
            return child.poll() is None
        # Started by an earlier `ironpool rig up`: the PID is ours only while it runs the same command
        # line (a PID reused by another program is never signalled).
        try:
            state = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            cmdline = Path(f"/proc/{self.pid}/cmdline").read_bytes().decode(errors="replace")
        except (OSError, IndexError):
            return False
        return state != "Z" and cmdline.split("\0")[:-1] == self.argv

    @property
    def returncode(self) -> int | None:
        """The exit status of a process this one started and saw end; None otherwise."""
        child = _CHILDREN.get(self.pid)
        return child.poll() if child is not None else None

    def signal(self, sig: int) -> None:
        if self.alive:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)

    def wait_gone(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while self.alive:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)
        return True

    def stop(self, timeout: float = 20.0) -> None:
        """SIGTERM (a clean stop), SIGKILL after ``timeout``."""
        self.signal(signal.SIGTERM)
        if not self.wait_gone(timeout):
            self.kill()

    def kill(self) -> None:
        """SIGKILL, as a crash."""
        self.signal(signal.SIGKILL)
        self.wait_gone(10)

    def tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(Path(self.log).read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"


def stop_all(procs: list[Proc], timeout: float, say: Callable[[str], None]) -> None:
    """SIGTERM every process at once, then wait for each (SIGKILL past ``timeout``)."""
    for proc in procs:
        proc.signal(signal.SIGTERM)
    for proc in procs:
        proc.stop(timeout)
        say(f"stopped {proc.name}")
