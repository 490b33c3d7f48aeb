"""End-to-end benchmark of ``ironpool up`` on real libvirtd/QEMU. Prints one JSON line.

* ``create_to_machine_id_ms``: an idle system, one Machine at a time: from the create call returning to
  ``status.machineID`` being set (the IRI ``CreateMachine`` call plus the status write), p50/max;
* ``twenty``: 20 machines applied at once (one ``ironpool apply``): seconds from the apply to each
  machine being scheduled, having a machineID, being ``Running``, and its guest printing its init
  line on the serial console (p50, p90, max).

    .venv/bin/python bench/e2e.py [--machines 20] [--latency-samples 5]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # for tests.helpers
sys.path.insert(0, str(ROOT / "tests" / "e2e"))

from ironpool.api.resources import resolve  # noqa: E402
from up_harness import UpInstance, machine_domain, wait_for  # noqa: E402

from tests.helpers.runtimes import build_tiny_image  # noqa: E402

MACHINES = resolve("machines")
CLASSES = """\
apiVersion: compute.ironcore.dev/v1alpha1
kind: MachineClass
metadata: {name: bench-nano}
capabilities: {cpu: "1", memory: 128Mi}
"""
INIT_LINE = "ironpool-tiny-image: init started"


def machine(name: str, label: str) -> dict[str, Any]:
    return {
        "apiVersion": "compute.ironcore.dev/v1alpha1", "kind": "Machine",
        "metadata": {"name": name, "namespace": "default", "labels": {"bench": label}},
        "spec": {"machineClassRef": {"name": "bench-nano"}, "power": "On",
                 "volumes": [{"name": "root", "localDisk": {"image": "tiny", "sizeLimit": "256Mi"}}]},
    }


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(q * len(ordered)))], 3)


def summary(values: list[float]) -> dict[str, float]:
    return {"p50": round(statistics.median(values), 3), "p90": pct(values, 0.9), "max": round(max(values), 3)}


def delete_all(up: UpInstance, client: Any, label: str) -> None:
    client_items = client.list_raw(MACHINES, "default", label_selector=f"bench={label}").items
    for m in client_items:
        client.delete_raw(MACHINES, m["metadata"]["name"], "default")
    wait_for(lambda: not client.list_raw(MACHINES, "default", label_selector=f"bench={label}").items, 120,
             f"bench={label} machines deleted", interval=0.2)


def create_latency(up: UpInstance, client: Any, samples: int) -> list[float]:
    """One machine at a time, each deleted (domain gone) before the next, so the host stays idle."""
    out = []
    for i in range(samples):
        name = f"lat-{i}"
        client.create_raw(MACHINES, machine(name, "latency"), "default")
        t1 = time.perf_counter()
        wait_for(lambda n=name: (client.get_raw(MACHINES, n, "default").get("status") or {}).get("machineID"),
                 30, f"{name} machineID", interval=0.01)
        out.append((time.perf_counter() - t1) * 1000)
        delete_all(up, client, "latency")
    return out


def twenty(up: UpInstance, client: Any, count: int) -> dict[str, Any]:
    names = [f"b-{i:02d}" for i in range(count)]
    manifest = up.workdir / "bench.yaml"
    manifest.write_text(yaml.safe_dump_all([machine(n, "twenty") for n in names]))
    seen: dict[str, dict[str, float]] = {n: {} for n in names}
    t0 = time.perf_counter()
    apply = subprocess.Popen([sys.executable, "-m", "ironpool.cli.main", "apply", "-f", str(manifest)],
                             env=up.env, stdout=subprocess.DEVNULL)
    applied = 0.0
    deadline = t0 + 600
    while time.perf_counter() < deadline:
        if not applied and apply.poll() is not None:
            applied = time.perf_counter() - t0
            if apply.returncode != 0:
                raise SystemExit(f"ironpool apply failed with {apply.returncode}")
        now = time.perf_counter() - t0
        for m in client.list_raw(MACHINES, "default", label_selector="bench=twenty").items:
            s, name = m.get("status") or {}, m["metadata"]["name"]
            marks = seen[name]
            if m["spec"].get("machinePoolRef"):
                marks.setdefault("scheduled", now)
            if s.get("machineID"):
                marks.setdefault("machine_id", now)
                if "booted" not in marks and INIT_LINE in up.console_log(machine_domain(s["machineID"])[0]):
                    marks["booted"] = now
            if s.get("state") == "Running":
                marks.setdefault("running", now)
        if all("booted" in v and "running" in v for v in seen.values()):
            break
        time.sleep(0.05)
    else:
        raise SystemExit(f"not all {count} machines booted within 600s: {seen}")
    result: dict[str, Any] = {"machines": count, "apply_s": round(applied, 3)}
    for key in ("scheduled", "machine_id", "running", "booted"):
        result[f"to_{key}_s"] = summary([v[key] for v in seen.values()])
    delete_all(up, client, "twenty")
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--machines", type=int, default=20)
    parser.add_argument("--latency-samples", type=int, default=5)
    args = parser.parse_args()
    up = UpInstance(images=build_tiny_image(),
                    extra_args=["--capacity-cpu", str(args.machines), "--capacity-memory", "32Gi"])
    classes = up.workdir / "classes.yaml"
    classes.write_text(CLASSES + "---\n" + (ROOT / "examples" / "classes" / "volumeclasses.yaml").read_text())
    up.classes = [classes]
    try:
        t0 = time.perf_counter()
        up.start()
        startup = time.perf_counter() - t0
        client = up.client()
        latency = create_latency(up, client, args.latency_samples)
        result = {
            "bench": "e2e",
            "up_start_s": round(startup, 3),
            "create_to_machine_id_ms": {"samples": len(latency), "p50": round(statistics.median(latency), 1),
                                        "max": round(max(latency), 1)},
            "twenty": twenty(up, client, args.machines),
        }
        up.stop()
    finally:
        up.cleanup()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
