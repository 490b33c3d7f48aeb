#!/usr/bin/env python3
"""Multi-host rig benchmark: how long the rig takes to start and each host to join, and how long each
fault interrupts service; one JSON line.

    python bench/rig.py [--rounds 3] [--images DIR]

Starts the rig of ``scripts/rig.sh`` (3 etcd members, 2 HTTPS apiservers, 2 schedulers, 3 hosts
joined with ``ironpool join``) in a temporary folder, then, ``--rounds`` times each:

- ``scheduler_takeover_s``: SIGKILL the leading scheduler; seconds until the standby's /metrics says
  it leads (the default 10 s lease bounds it; the target is 15 s);
- ``apiserver_failover_gap_ms``: a client given both apiservers reads in a loop; SIGKILL the one it
  uses; the longest time between two answers across the kill;
- ``etcd_leader_gap_ms``: writes in a loop through one apiserver; SIGKILL the etcd leader; the longest
  time between two acknowledged writes. The raft election takes under a second here (500 ms election
  timeout); gaps of about 1.5 s match the store's call timeout (``CALL_TIMEOUT`` in
  ``store/etcd_client.py``): a write in flight when the leader dies is retried only after it.

Each killed part is started again before the next round. The rig is removed at the end.
"""

from __future__ import annotations

import argparse
import itertools
import json
import re
import shutil
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path
from statistics import median
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from ironpool.rig.rig import Proc, Rig  # noqa: E402


def scheduler_takeover(rig: Rig) -> float:
    deadline = time.monotonic() + 60
    while not (leaders := [s for s in rig.schedulers if s.leading]):
        if time.monotonic() > deadline:
            raise SystemExit("no scheduler leads")
        time.sleep(0.1)
    leader = leaders[0]
    standby = next(s for s in rig.schedulers if s is not leader)
    leader.proc.signal(signal.SIGKILL)
    died = time.monotonic()
    while not standby.leading:
        time.sleep(0.05)
    took = time.monotonic() - died
    leader.proc.wait_gone(10)
    rig.restart(leader.proc)
    return took


def longest_gap(rig: Rig, victim: Proc, op: Any, settle: float = 1.0) -> float:
    """Run ``op()`` in a loop on a thread; SIGKILL ``victim`` once it runs; the longest time between
    two successful calls from just before the kill to ``settle`` seconds after service came back."""
    stamps: list[float] = []
    stop = threading.Event()

    def loop() -> None:
        while not stop.is_set():
            try:
                op()
                stamps.append(time.monotonic())
            except Exception:
                time.sleep(0.01)

    worker = threading.Thread(target=loop)
    worker.start()
    while len(stamps) < 20:
        time.sleep(0.01)
    killed = time.monotonic()
    victim.kill()
    while not stamps or stamps[-1] <= killed:
        time.sleep(0.05)
    time.sleep(settle)
    stop.set()
    worker.join()
    around = [t for t in stamps if t >= killed - 1.0]
    gap = max(b - a for a, b in itertools.pairwise(around))
    rig.restart(victim)
    return gap * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--images", type=Path, default=Path("/var/cache/ironpool/test-images"),
                        help="an image catalog with the tiny image [default: the tests' catalog]")
    args = parser.parse_args()

    from ironpool.api import MachineClass
    from ironpool.client.config import ClientConfig
    from ironpool.client.rest import Client
    from ironpool.client.wire import resource_for_model

    classes = resource_for_model(MachineClass)
    root = Path(tempfile.mkdtemp(prefix="ironpool-bench-rig-"))
    root.chmod(0o711)  # QEMU's own user passes through to the hosts' disks below it
    etcd_data = Path(tempfile.mkdtemp(prefix="ironpool-bench-rig-etcd-"))
    rig = Rig(root / "r", args.images.absolute(), etcd_data=etcd_data)
    started = time.monotonic()
    rig.up()
    up_s = time.monotonic() - started
    result: dict[str, Any] = {"bench": "rig", "rounds": args.rounds, "up_s": round(up_s, 2), "join_s": {}}
    try:
        for name, host in rig.hosts.items():
            found = re.search(rf"pool {name} joined \(([0-9.]+)s\)", host.proc.tail(200))
            result["join_s"][name] = float(found.group(1)) if found else None

        takeovers = [scheduler_takeover(rig) for _ in range(args.rounds)]

        api_gaps = []
        for _ in range(args.rounds):
            client = rig.client()  # both apiservers, the first one first: the one killed
            try:
                api_gaps.append(longest_gap(rig, rig.apiservers[0].proc,
                                            lambda c=client: c.list_raw(classes)))
            finally:
                client.close()

        etcd_gaps = []
        names = iter(range(10**9))
        for _ in range(args.rounds):
            config = ClientConfig(server=rig.apiservers[1].url, token=rig.admin_token,
                                  ca_file=str(rig.ca_file))
            with Client(config) as client:
                def write(c: Client = client) -> None:
                    c.create_raw(classes, {"apiVersion": "compute.ironcore.dev/v1alpha1",
                                           "kind": "MachineClass",
                                           "metadata": {"name": f"bench-{next(names)}"},
                                           "capabilities": {"cpu": "1", "memory": "1Gi"}})

                etcd_gaps.append(longest_gap(rig, rig.etcd_leader().proc, write))
        result.update({
            "scheduler_takeover_s": [round(t, 2) for t in takeovers],
            "scheduler_takeover_s_max": round(max(takeovers), 2),
            "apiserver_failover_gap_ms": [round(g) for g in api_gaps],
            "apiserver_failover_gap_ms_median": round(median(api_gaps)),
            "etcd_leader_gap_ms": [round(g) for g in etcd_gaps],
            "etcd_leader_gap_ms_median": round(median(etcd_gaps)),
        })
    finally:
        rig.down()
        shutil.rmtree(etcd_data, ignore_errors=True)
        shutil.rmtree(root, ignore_errors=True)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
