"""The worker groups of scripts/test.sh hold with the pytest and pytest-xdist of the lock.

pytest 9.2 changed node ids in a way that made pytest-xdist ignore every group without a word:
modules were split across workers, and a module's tests met a fresh ``ironpool up`` that lacked
what its earlier tests had made. This runs a small suite the way scripts/test.sh runs ours.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

MODULE = '''
import os
import pytest
{mark}

@pytest.mark.parametrize("n", range(6))
def test_worker(n):
    with open(os.environ["WORKERS_FILE"], "a") as f:
        f.write(f"{{__name__}} {{os.environ['PYTEST_XDIST_WORKER']}}\\n")
'''


def test_modules_and_the_guests_group_stay_on_one_worker_and_the_guests_start_first(tmp_path: Path) -> None:
    suite = tmp_path / "suite"
    suite.mkdir()
    for name in ("test_one", "test_two"):
        (suite / f"{name}.py").write_text(MODULE.format(mark=""))
    for name in ("test_zz_guests_a", "test_zz_guests_b"):
        (suite / f"{name}.py").write_text(MODULE.format(mark="pytestmark = pytest.mark.guests"))
    workers = tmp_path / "workers"
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup",
         "--no-loadscope-reorder", "-p", "tests.helpers.worker_groups", "-p", "no:cacheprovider",
         "-o", "markers=guests", "--rootdir", str(suite), str(suite)],
        cwd=ROOT, env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(ROOT), "WORKERS_FILE": str(workers)},
        capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    seen: dict[str, set[str]] = {}
    order: dict[str, list[str]] = {}
    for line in workers.read_text().splitlines():
        module, worker = line.split()
        seen.setdefault(module, set()).add(worker)
        order.setdefault(worker, []).append(module)
    assert set(seen) == {"test_one", "test_two", "test_zz_guests_a", "test_zz_guests_b"}
    assert all(len(w) == 1 for w in seen.values()), seen
    assert seen["test_zz_guests_a"] == seen["test_zz_guests_b"], seen
    # The guests group, collected last here, starts first: its worker runs it before anything else.
    (guests_worker,) = seen["test_zz_guests_a"]
    assert order[guests_worker][:12] == ["test_zz_guests_a"] * 6 + ["test_zz_guests_b"] * 6, order
