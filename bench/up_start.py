"""Start-up time of ``ironpool up`` on real libvirtd/QEMU. Prints one JSON line.

* ``first_s``: a fresh data dir (token, CA and certificate made, database created, storage pool
  defined), from the process's start to the summary ``ironpool up`` prints once everything serves;
* ``restart_s``: the same data dir again after a clean stop (what a user waits for on a reboot);
* ``reported_s``: what ``ironpool up`` itself reports in that summary (from its first line of work),
  for the restarts;
* ``cpu_s``: the CPU time (user and system) the process spent until its summary, for the restarts:
  the figure least moved by other work on a shared machine.

Each figure is the median (and max) of ``--runs`` instances, run one after another; the tiny image
comes from the test catalog, so no image is built.

    .venv/bin/python bench/up_start.py [--runs 5]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # for tests.helpers
sys.path.insert(0, str(ROOT / "tests" / "e2e"))

from up_harness import UpInstance  # noqa: E402

from tests.helpers.runtimes import build_tiny_image  # noqa: E402

REPORTED = re.compile(r"ironpool is up \((\d+(?:\.\d+)?)s\)")


def cpu_seconds(pid: int) -> float:
    """User and system CPU seconds of process ``pid`` so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def timed_start(up: UpInstance) -> tuple[float, float, float]:
    """(wall seconds to the summary, seconds ``ironpool up`` reports, CPU seconds) of one start."""
    t0 = time.perf_counter()
    up.start(timeout=120)
    wall = time.perf_counter() - t0
    assert up.process is not None
    cpu = cpu_seconds(up.process.pid)
    found = REPORTED.findall(up.output())
    return wall, float(found[-1]) if found else float("nan"), cpu


def figures(values: list[float]) -> dict[str, float]:
    return {"p50": round(statistics.median(values), 3), "max": round(max(values), 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    images = build_tiny_image()
    first: list[float] = []
    restart: list[float] = []
    reported: list[float] = []
    cpu: list[float] = []
    for _ in range(args.runs):
        up = UpInstance(images=images)
        try:
            first.append(timed_start(up)[0])
            up.stop()
            wall, said, used = timed_start(up)
            restart.append(wall)
            reported.append(said)
            cpu.append(used)
            up.stop()
        finally:
            up.cleanup()
    print(json.dumps({"bench": "up_start", "runs": args.runs, "first_s": figures(first),
                      "restart_s": figures(restart), "reported_s": figures(reported),
                      "cpu_s": figures(cpu)}))


if __name__ == "__main__":
    main()
