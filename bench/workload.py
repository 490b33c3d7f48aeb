#!/usr/bin/env python3
"""The scheduling workload every placement benchmark runs, and how a run is scored.

A workload is a fleet of hosts (three sizes in three zones) and a sequence of machine requests over
twelve classes (families c, g, m with 2, 4, 8 GiB per vCPU; 2 to 16 vCPUs). It is seeded: hosts and
requests come from two random streams derived from the seed, so the same seed always gives the same
workload, and asking for more requests (or hosts) extends the same sequence. The generator and the
scoring are the ones the figures in the README were measured with, and other schedulers' figures
(OpenStack Placement, for one) were measured on the same sequences, so results stay comparable.

    python bench/workload.py --hosts 1000 --requests 5000 --seed 1 --out w.json

Only the standard library: any scheduler's runner can read the file and score itself with
:func:`summarize`. ``bench/scheduler.py`` maps a host to a MachinePool (cpu = vcpu, memory =
memory_mib), a class to a MachineClass and a request to a Machine.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import uuid
from collections.abc import Sequence
from typing import Any

RESOURCES = ("vcpu", "memory_mib", "disk_gib")
GIB = 1024  # in MiB

HOST_TYPES: dict[str, dict[str, float | int]] = {
    "small": {"share": 0.50, "vcpu": 32, "memory_mib": 128 * GIB, "disk_gib": 1000},
    "medium": {"share": 0.35, "vcpu": 64, "memory_mib": 256 * GIB, "disk_gib": 2000},
    "large": {"share": 0.15, "vcpu": 128, "memory_mib": 1024 * GIB, "disk_gib": 4000},
}
ZONES = ("az1", "az2", "az3")
FAMILIES = {"c": (2, 0.25), "g": (4, 0.50), "m": (8, 0.25)}  # GiB per vCPU, share of requests
SIZES = {2: 0.40, 4: 0.30, 8: 0.20, 16: 0.10}  # vCPUs, share within a family
DISK_GIB_PER_VCPU = 10


def _uuid(rng: random.Random) -> str:
    return str(uuid.UUID(int=rng.getrandbits(128), version=4))


def make_classes() -> dict[str, dict[str, Any]]:
    """The twelve classes, ``<family>.<vcpus>``, with their resources and share of the requests."""
    return {
        f"{family}.{vcpu}": {"vcpu": vcpu, "memory_mib": vcpu * gib_per_vcpu * GIB,
                             "disk_gib": vcpu * DISK_GIB_PER_VCPU, "share": round(fshare * sshare, 6)}
        for family, (gib_per_vcpu, fshare) in FAMILIES.items()
        for vcpu, sshare in SIZES.items()
    }


def generate(n_hosts: int, n_requests: int, seed: int) -> dict[str, Any]:
    """The workload for ``seed`` (the draw order is part of the contract: do not reorder it)."""
    host_rng, request_rng = random.Random(f"{seed}/hosts"), random.Random(f"{seed}/requests")
    types = list(HOST_TYPES)
    type_weights = [HOST_TYPES[t]["share"] for t in types]
    hosts = []
    for i in range(n_hosts):
        kind = host_rng.choices(types, type_weights)[0]
        host: dict[str, Any] = {"name": f"host-{i:05d}", "uuid": _uuid(host_rng), "type": kind,
                                "zone": ZONES[host_rng.randrange(len(ZONES))]}
        host.update({r: HOST_TYPES[kind][r] for r in RESOURCES})
        hosts.append(host)
    classes = make_classes()
    names = sorted(classes)
    weights = [classes[n]["share"] for n in names]
    requests = [{"id": f"req-{i:06d}", "uuid": _uuid(request_rng),
                 "class": request_rng.choices(names, weights)[0]} for i in range(n_requests)]
    return {"format": 1, "seed": seed, "host_types": HOST_TYPES, "hosts": hosts, "classes": classes,
            "requests": requests}


def percentile(sorted_values: Sequence[float], q: float) -> float | None:
    if not sorted_values:
        return None
    return sorted_values[min(len(sorted_values) - 1, round(q * (len(sorted_values) - 1)))]


def summarize(workload: dict[str, Any], assignment: Sequence[str | None], seconds: float,
              latencies_s: Sequence[float], **extra: Any) -> dict[str, Any]:
    """The result record of one run on ``workload``.

    ``assignment``: per request handled, in workload order, the host it was placed on or None if it
    was unschedulable (a run cut short passes a shorter list); ``latencies_s``: seconds per placement.
    """
    hosts = {h["name"]: h for h in workload["hosts"]}
    classes = workload["classes"]
    used: dict[str, dict[str, int]] = {}
    demand = dict.fromkeys(RESOURCES, 0)
    for request, host in zip(workload["requests"], assignment, strict=False):
        if host is None:
            continue
        cls = classes[request["class"]]
        on_host = used.setdefault(host, dict.fromkeys(RESOURCES, 0))
        for r in RESOURCES:
            on_host[r] += cls[r]
            demand[r] += cls[r]
    overcommitted = [n for n, u in used.items() if any(u[r] > hosts[n][r] for r in RESOURCES)]
    utilization = {}
    for r in RESOURCES:
        capacity = sum(hosts[n][r] for n in used)
        utilization[r] = round(demand[r] / capacity, 4) if capacity else None
    biggest = {r: max(h[r] for h in workload["hosts"]) for r in RESOURCES}
    lower_bound = max([math.ceil(demand[r] / biggest[r]) for r in RESOURCES] or [0])
    placed = sum(1 for a in assignment if a is not None)
    lat = sorted(latencies_s)

    def ms(v: float | None) -> float | None:
        return None if v is None else round(v * 1000, 3)

    return {
        "hosts": len(workload["hosts"]),
        "requests": len(workload["requests"]),
        "handled": len(assignment),
        "placed": placed,
        "unschedulable": len(assignment) - placed,
        "seconds": round(seconds, 3),
        "placements_per_s": round(placed / seconds, 2) if seconds else None,
        "latency_ms": {"p50": ms(percentile(lat, 0.50)), "p99": ms(percentile(lat, 0.99)),
                       "mean": ms(sum(lat) / len(lat)) if lat else None},
        "hosts_used": len(used),
        "lower_bound_hosts": lower_bound,
        "utilization_of_used_hosts": utilization,
        "overcommitted_hosts": len(overcommitted),
        **extra,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--hosts", type=int, default=1000)
    ap.add_argument("--requests", type=int, default=5000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", default="-", help="output file ('-' = stdout)")
    args = ap.parse_args()
    text = json.dumps(generate(args.hosts, args.requests, args.seed), indent=1, sort_keys=True)
    if args.out == "-":
        print(text)
    else:
        with open(args.out, "w") as fh:
            fh.write(text + "\n")


if __name__ == "__main__":
    main()
