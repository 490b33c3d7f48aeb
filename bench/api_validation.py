"""Benchmark: validate_create throughput for a typical Machine (prints one JSON line).

Rates are wall-clock; ``validate_create_cpu_us`` is this thread's CPU time per create, which other
load on the machine disturbs far less.

Usage: python bench/api_validation.py [--seconds 3]
"""

from __future__ import annotations

import argparse
import json
import time

from ironpool.api import resolve, validate_create, validate_update

TYPICAL_MACHINE = {
    "apiVersion": "compute.ironcore.dev/v1alpha1",
    "kind": "Machine",
    "metadata": {
        "name": "web-1",
        "namespace": "default",
        "labels": {"app": "web", "app.kubernetes.io/part-of": "shop"},
        "annotations": {"example.com/owner": "team-a"},
    },
    "spec": {
        "machineClassRef": {"name": "t3-small"},
        "machinePoolSelector": {"topology.ironcore.dev/zone": "az1"},
        "power": "On",
        "volumes": [
            {"name": "root", "localDisk": {"sizeLimit": "10Gi", "image": "ghcr.io/ironcore-dev/os:latest"}},
            {"name": "data", "volumeRef": {"name": "web-1-data"}},
        ],
        "networkInterfaces": [{"name": "primary", "networkInterfaceRef": {"name": "web-1-nic"}}],
        "ignitionRef": {"name": "web-1-ignition"},
        "tolerations": [{"key": "example.com/dedicated", "operator": "Exists", "effect": "NoSchedule"}],
    },
}


def _distinct_machines(n: int) -> list[dict[str, object]]:
    """Machines differing in their names (and their volumes'), so caches of checked names miss as
    they would with real traffic."""
    out: list[dict[str, object]] = []
    for i in range(n):
        obj = json.loads(json.dumps(TYPICAL_MACHINE))
        obj["metadata"]["name"] = f"web-{i}"
        obj["spec"]["volumes"][1]["volumeRef"]["name"] = f"web-{i}-data"
        obj["spec"]["networkInterfaces"][0]["networkInterfaceRef"]["name"] = f"web-{i}-nic"
        obj["spec"]["ignitionRef"]["name"] = f"web-{i}-ignition"
        out.append(obj)
    return out


def _rate(fn: object, seconds: float) -> tuple[float, int, float]:
    """Calls per wall-clock second, the number of calls, and CPU seconds per call."""
    assert callable(fn)
    n = 0
    start, cpu_start = time.perf_counter(), time.thread_time()
    deadline = start + seconds
    while True:
        for _ in range(200):
            fn()
        n += 200
        now = time.perf_counter()
        if now >= deadline:
            return n / (now - start), n, (time.thread_time() - cpu_start) / n


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=3.0)
    args = parser.parse_args()
    info = resolve("machines")
    machines = _distinct_machines(20_000)
    stored = validate_create(info, TYPICAL_MACHINE)
    _rate(lambda: validate_create(info, TYPICAL_MACHINE), 0.3)  # warm-up
    same_rate, _, _ = _rate(lambda: validate_create(info, TYPICAL_MACHINE), args.seconds)
    it = iter(machines * 25)
    create_rate, n_create, create_cpu = _rate(lambda: validate_create(info, next(it)), args.seconds)
    update_rate, n_update, _ = _rate(lambda: validate_update(info, stored, stored), args.seconds)
    print(json.dumps({
        "bench": "api_validation",
        "object": "Machine (2 volumes, 1 NIC, ignitionRef, toleration)",
        "validate_create_per_s": round(create_rate),
        "validate_create_us": round(1e6 / create_rate, 1),
        "validate_create_cpu_us": round(create_cpu * 1e6, 1),
        "validate_create_same_object_per_s": round(same_rate),
        "validate_update_per_s": round(update_rate),
        "iterations": n_create + n_update,
    }))


if __name__ == "__main__":
    main()
