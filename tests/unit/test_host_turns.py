"""Two test runs on one host take turns with their guests modules (tests/helpers/host_turns.py)."""

from __future__ import annotations

import fcntl
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

# A guests module holds the host's lock through each of its tests (a second handle cannot take it);
# a module without the marker does not.
SUITE = {
    "test_guests.py": '''
import fcntl, os, pytest
pytestmark = [pytest.mark.guests, pytest.mark.timeout(1)]

@pytest.mark.parametrize("n", range(3))
def test_holds_the_lock(n):
    with open(os.environ["IRONPOOL_TEST_HOST_LOCK"], "ab") as f:
        with pytest.raises(BlockingIOError):
            fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
''',
    "test_plain.py": '''
import fcntl, os

def test_lock_is_free():
    with open(os.environ["IRONPOOL_TEST_HOST_LOCK"], "ab") as f:
        fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
''',
}


def run_suite(tmp_path: Path, lock: Path) -> subprocess.Popen[str]:
    suite = tmp_path / "suite"
    suite.mkdir()
    for name, text in SUITE.items():
        (suite / name).write_text(text)
    return subprocess.Popen(
        [sys.executable, "-m", "pytest", "-p", "tests.helpers.host_turns", "-p", "no:cacheprovider",
         "-o", "markers=guests", "--rootdir", str(suite), str(suite / "test_guests.py"),
         str(suite / "test_plain.py")],
        cwd=ROOT, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "PYTHONUNBUFFERED": "1",
             "IRONPOOL_TEST_HOST_LOCK": str(lock)},
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


def test_a_guests_module_holds_the_host_lock_and_releases_it_after_its_last_test(tmp_path: Path) -> None:
    proc = run_suite(tmp_path, tmp_path / "lock")
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0, out
    assert "4 passed" in out, out


def test_a_second_run_waits_for_the_turn_without_its_timeout_running(tmp_path: Path) -> None:
    lock = tmp_path / "lock"
    with lock.open("ab") as other_run:
        fcntl.flock(other_run, fcntl.LOCK_EX)
        proc = run_suite(tmp_path, lock)
        assert proc.stdout is not None
        for line in proc.stdout:  # ends when the run does: then the assertion below fails
            if "waiting for another test run's guests" in line:
                break
        # Past the guests tests' 1 s timeout, the run still waits for its turn.
        with pytest.raises(subprocess.TimeoutExpired):
            proc.wait(timeout=2)
    out = proc.stdout.read()
    proc.wait(timeout=120)
    assert proc.returncode == 0, out
    assert "4 passed" in out, out
