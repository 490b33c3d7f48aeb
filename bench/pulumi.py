"""Pulumi provider benchmark against ``ironpool up``, through the real plugin. Prints one JSON line.

* ``ops_ms``: per-operation latency of the real ``python -m pulumi.dynamic`` plugin over gRPC (Check of a
  new Machine, Diff, Create with ``wait_for="scheduled"``, Read, Delete), p50/p99, beside ``bare_ms``: the
  same API work done directly with ``ironpool.client`` in this process (Check: GET the class and the
  scheduler's preview; Create: POST and watch until bound; Read: GET; Delete: DELETE and watch until gone;
  Diff: no API work). ``overhead_p50_ms`` is plugin p50 minus bare p50 (target: at most 20 ms).
* ``fleet``: a program of 50 Machines (``wait_for="scheduled"``) deployed by ``pulumi up`` as the test
  harness plays it (program under ``set_mocks``, real plugin, fresh processes): wall time of the whole
  ``up`` including starting Python and the plugin (target: at most 15 s), and of the ``destroy``.

The Machines name an Ignition Secret that does not exist, so the poollet never boots them: the figures
are the provider's, the apiserver's and the scheduler's, not QEMU's.

    .venv/bin/python bench/pulumi.py [--samples 30] [--machines 50]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
# This file's folder comes first on sys.path and its name would shadow the pulumi package.
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != ROOT / "bench"]
sys.path.insert(0, str(ROOT))  # for tests.helpers
sys.path.insert(0, str(ROOT / "tests" / "pulumi"))

from ironpool.api.errors import NotFound  # noqa: E402
from ironpool.api.resources import resolve  # noqa: E402
from ironpool.client import Client  # noqa: E402
from ironpool.scheduler.preview import preview_with_client  # noqa: E402
from ironpool_pulumi.machine import MachineProvider  # noqa: E402
from pulumi_plugin import Plugin, provider_payload  # noqa: E402
from pulumi_stack import Stack  # noqa: E402

from tests.e2e.up_harness import UpInstance  # noqa: E402
from tests.helpers.runtimes import build_tiny_image  # noqa: E402

MACHINES, MACHINE_CLASSES = resolve("machines"), resolve("machineclasses")
URN = "urn:pulumi:bench::bench::pulumi-python:dynamic/ironpool:Machine::{}"
MISSING_IGNITION = "bench-missing-ignition"
FLEET = '''
import ironpool_pulumi as ironpool

for i in range({n}):
    ironpool.Machine(f"fleet-{{i:03d}}", machine_class="x-small", power="Off", wait_for="scheduled",
                     ignition_secret="{missing}")
'''


def summary(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    p99 = ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))]
    return {"p50": round(statistics.median(values), 2), "p99": round(p99, 2)}


def timed(fn: Callable[[], Any], into: list[float]) -> Any:
    t = time.perf_counter()
    result = fn()
    into.append((time.perf_counter() - t) * 1000)
    return result


def manifest(name: str) -> dict[str, Any]:
    return {"apiVersion": "compute.ironcore.dev/v1alpha1", "kind": "Machine",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"machineClassRef": {"name": "x-small"}, "power": "Off",
                     "ignitionRef": {"name": MISSING_IGNITION, "key": "ignition.yaml"}}}


def watch_until(client: Client, name: str, obj: dict[str, Any],
                done: Callable[[dict[str, Any]], bool]) -> None:
    """What a hand-written client does: watch the object from its revision until ``done``."""
    if done(obj):
        return
    rv = obj["metadata"]["resourceVersion"]
    for event in client.watch_raw(MACHINES, "default", rv, field_selector=f"metadata.name={name}",
                                  timeout_seconds=60):
        if event.type == "DELETED" or (event.type in ("ADDED", "MODIFIED") and done(event.object)):
            return
    raise SystemExit(f"{name}: no event within 60s")


def bare_delete(client: Client, name: str) -> None:
    obj = client.delete_raw(MACHINES, name, "default")
    if obj is None:
        return
    try:
        obj = client.get_raw(MACHINES, name, "default")
    except NotFound:
        return
    watch_until(client, name, obj, lambda _o: False)


def operations(up: UpInstance, samples: int) -> dict[str, Any]:
    client = up.client()
    plugin_ms: dict[str, list[float]] = {op: [] for op in ("check", "diff", "create", "read", "delete")}
    bare_ms: dict[str, list[float]] = {op: [] for op in ("check", "create", "read", "delete")}
    with Plugin(project="bench", env={"IRONPOOL_CONFIG": str(up.workdir / "none.yaml")}) as plugin:
        plugin.configure({"ironpool:server": up.url, "ironpool:token": up.token(),
                          "ironpool:caFile": str(up.ca_file)}, ("ironpool:token",))
        payload = provider_payload(MachineProvider())
        for i in range(samples + 2):  # the first two warm up caches and connections
            keep = i >= 2
            name, urn = f"op-{i:03d}", URN.format(f"op-{i:03d}")
            props = {"__provider": payload, "name": name, "machine_class": "x-small", "power": "Off",
                     "ignition_secret": MISSING_IGNITION, "wait_for": "scheduled"}
            p: dict[str, list[float]] = plugin_ms if keep else {k: [] for k in plugin_ms}
            b: dict[str, list[float]] = bare_ms if keep else {k: [] for k in bare_ms}
            inputs, failures = timed(lambda props=props, urn=urn: plugin.check(urn, {}, props), p["check"])
            assert not failures, failures
            rid, outs = timed(lambda urn=urn, inputs=inputs: plugin.create(urn, inputs), p["create"])
            news = {**inputs, "power": "On"}
            timed(lambda rid=rid, urn=urn, outs=outs, news=news, inputs=inputs:
                  plugin.diff(rid, urn, outs, news, inputs), p["diff"])
            timed(lambda rid=rid, urn=urn, outs=outs, inputs=inputs: plugin.read(rid, urn, outs, inputs),
                  p["read"])
            timed(lambda rid=rid, urn=urn, outs=outs, inputs=inputs: plugin.delete(rid, urn, outs, inputs),
                  p["delete"])

            bare = f"bare-{i:03d}"
            doc = manifest(bare)
            timed(lambda doc=doc: (client.get_raw(MACHINE_CLASSES, "x-small"),
                                   preview_with_client(client, [doc], namespace="default")), b["check"])

            def create(doc: dict[str, Any] = doc, bare: str = bare) -> None:
                obj = client.create_raw(MACHINES, doc, "default")
                watch_until(client, bare, obj, lambda o: bool(o["spec"].get("machinePoolRef")))

            timed(create, b["create"])
            timed(lambda bare=bare: client.get_raw(MACHINES, bare, "default"), b["read"])
            timed(lambda bare=bare: bare_delete(client, bare), b["delete"])
    out: dict[str, Any] = {"samples": samples, "ops_ms": {}, "bare_ms": {}, "overhead_p50_ms": {}}
    for op, values in plugin_ms.items():
        out["ops_ms"][op] = summary(values)
        base = statistics.median(bare_ms[op]) if op in bare_ms else 0.0
        if op in bare_ms:
            out["bare_ms"][op] = summary(bare_ms[op])
        out["overhead_p50_ms"][op] = round(statistics.median(values) - base, 2)
    return out


def fleet(up: UpInstance, machines: int) -> dict[str, Any]:
    program = up.workdir / "fleet"
    program.mkdir()
    (program / "Pulumi.yaml").write_text("name: fleet\nruntime: python\n")
    (program / "__main__.py").write_text(FLEET.format(n=machines, missing=MISSING_IGNITION))
    stack = Stack(program=program, workdir=up.workdir,
                  config={"ironpool:server": up.url, "ironpool:token": up.token(),
                          "ironpool:caFile": str(up.ca_file)},
                  env={"IRONPOOL_CONFIG": str(up.workdir / "none.yaml")})
    deployed = stack.up()
    if deployed.error or len(deployed.log) != machines:
        raise SystemExit(f"fleet up failed: {deployed.error} ({len(deployed.log)} steps)")
    client = up.client()
    bound = [m for m in client.list_raw(MACHINES, "default").items if m["spec"].get("machinePoolRef")]
    destroyed = stack.destroy()
    if destroyed.error:
        raise SystemExit(f"fleet destroy failed: {destroyed.error}")
    return {"machines": machines, "bound_after_up": len(bound), "up_wall_s": round(deployed.seconds, 2),
            "destroy_wall_s": round(destroyed.seconds, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--samples", type=int, default=30)
    parser.add_argument("--machines", type=int, default=50)
    args = parser.parse_args()
    # Room for every Machine at once: the pool's size is what the scheduler counts, nothing boots.
    up = UpInstance(images=build_tiny_image(),
                    extra_args=["--capacity-cpu", "512", "--capacity-memory", "256Gi"])
    try:
        up.start()
        result = {"bench": "pulumi", **operations(up, args.samples), "fleet": fleet(up, args.machines)}
    finally:
        up.cleanup()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
