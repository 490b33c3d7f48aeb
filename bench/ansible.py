"""Ansible collection benchmark against ``ironpool up``, through real ``ansible-playbook`` and
``ansible-inventory`` runs. Prints one JSON line.

* ``module_overhead_s``: per task, a playbook of N ``ironpool.iaas`` tasks minus a playbook of N
  ``ansible.builtin.ping`` tasks, divided by N (Ansible's own start-up and per-task cost cancel out),
  for ``machine`` (an existing Machine, unchanged: GET and a server-side dry-run PATCH),
  ``machine_class`` (unchanged) and ``machine_info`` (one list). Target: at most 0.3 s.
  ``module_cpu_s``: the same difference in CPU seconds of the playbook's processes (Ansible's and
  the modules', not the apiserver's): steadier than wall time on a busy machine.
* ``manifest_50``: one ``ironpool.iaas.manifest`` task creating 50 Machines and waiting until the
  scheduler bound them all (``wait_for: scheduled``): the playbook's wall time, and that minus a
  one-ping playbook (``task_s``, target: at most 5 s); then the same with ``state: absent``.
* ``inventory_1000``: ``ansible-inventory --list`` with the ``ironpool.iaas.machines`` plugin over
  1,000 Machines (keyed groups by pool and class, one ``groups`` expression): wall time (target: at
  most 2 s) and that minus ``ansible-inventory`` on an empty inventory.

The Machines name an Ignition Secret that does not exist, so the poollet never boots them: the figures
are the collection's, the apiserver's and the scheduler's, not QEMU's. The inventory's Machines select
a pool label no pool has, so they stay unscheduled and the poollet never sees them.

    .venv/bin/python bench/ansible.py [--tasks 20] [--repeat 3] [--machines 50] [--inventory 1000]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, NamedTuple

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # for tests.*

from ironpool.api.resources import resolve  # noqa: E402

from tests.e2e.up_harness import UpInstance  # noqa: E402
from tests.helpers.runtimes import build_tiny_image  # noqa: E402

BIN = Path(sys.executable).parent
MACHINES = resolve("machines")
MISSING_IGNITION = "bench-missing-ignition"
PLAY = "- hosts: localhost\n  connection: local\n  gather_facts: false\n  tasks:\n"


class Timing(NamedTuple):
    """One run: wall seconds, and CPU seconds (user + system) of the command and its children."""

    wall: float
    cpu: float


class Runner:
    """Runs ``ansible-playbook`` / ``ansible-inventory`` configured for one ``ironpool up``."""

    def __init__(self, up: UpInstance, workdir: Path) -> None:
        self.workdir = workdir
        self.env = {k: v for k, v in up.env.items() if k not in ("IRONPOOL_SERVER", "IRONPOOL_TOKEN")}
        self.env.update(ANSIBLE_COLLECTIONS_PATH=str(ROOT / "ansible_collection"),
                        ANSIBLE_LOCALHOST_WARNING="false", ANSIBLE_INVENTORY_UNPARSED_WARNING="false")

    def play(self, name: str, tasks: str) -> Timing:
        path = self.workdir / f"{name}.yml"
        path.write_text(PLAY + tasks)
        return self._timed([str(BIN / "ansible-playbook"), str(path)])

    def inventory(self, source: str) -> Timing:
        return self._timed([str(BIN / "ansible-inventory"), "-i", source, "--list"])

    def _timed(self, cmd: list[str]) -> Timing:
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        proc = subprocess.run(cmd, env=self.env, capture_output=True, text=True, check=False, timeout=600)
        elapsed = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if proc.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} failed:\n{proc.stdout[-3000:]}\n{proc.stderr[-2000:]}")
        cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
        return Timing(elapsed, cpu)


def best(runner: Runner, name: str, tasks: str, repeat: int) -> Timing:
    """The fastest of ``repeat`` runs (wall and CPU each): the least disturbed by whatever else the
    machine does."""
    runs = [runner.play(name, tasks) for _ in range(repeat)]
    return Timing(min(r.wall for r in runs), min(r.cpu for r in runs))


def module_overhead(runner: Runner, n: int, repeat: int) -> dict[str, Any]:
    ping = best(runner, "ping", "    - ansible.builtin.ping:\n" * n, repeat)
    runner.play("setup", f"""    - ironpool.iaas.machine:
        name: bench-one
        machine_class: x-small
        power: 'off'
        ignition_secret: {MISSING_IGNITION}
""")
    tasks = {
        "machine": f"""    - ironpool.iaas.machine:
        name: bench-one
        machine_class: x-small
        power: 'off'
        ignition_secret: {MISSING_IGNITION}
""",
        "machine_class": "    - ironpool.iaas.machine_class: {name: x-small, cpu: 1, memory: 256Mi}\n",
        "machine_info": "    - ironpool.iaas.machine_info: {name: bench-one}\n",
    }
    out: dict[str, Any] = {"tasks": n, "ping_playbook_s": round(ping.wall, 2)}
    cpu: dict[str, Any] = {"ping_playbook_s": round(ping.cpu, 2)}
    for module, task in tasks.items():
        total = best(runner, module, task * n, repeat)
        out[module] = round((total.wall - ping.wall) / n, 3)
        cpu[module] = round((total.cpu - ping.cpu) / n, 3)
    return {"module_overhead_s": out, "module_cpu_s": cpu}


def manifest_fleet(runner: Runner, up: UpInstance, machines: int) -> dict[str, Any]:
    one_ping = min(runner.play("one-ping", "    - ansible.builtin.ping:\n").wall for _ in range(3))
    definition = "\n".join(
        f"""          - apiVersion: compute.ironcore.dev/v1alpha1
            kind: Machine
            metadata: {{name: fleet-{i:03d}}}
            spec:
              machineClassRef: {{name: x-small}}
              power: "Off"
              ignitionRef: {{name: {MISSING_IGNITION}}}"""
        for i in range(machines))
    apply = runner.play("fleet", f"""    - ironpool.iaas.manifest:
        wait: true
        wait_for: scheduled
        definition:
{definition}
""").wall
    with up.client() as client:
        bound = [m for m in client.list_raw(MACHINES, "default").items
                 if m["metadata"]["name"].startswith("fleet-") and (m["spec"].get("machinePoolRef") or {})]
    delete = runner.play("fleet-absent", f"""    - ironpool.iaas.manifest:
        state: absent
        wait: true
        definition:
{definition}
""").wall
    return {"machines": machines, "bound": len(bound), "playbook_s": round(apply, 2),
            "task_s": round(apply - one_ping, 2), "absent_playbook_s": round(delete, 2),
            "absent_task_s": round(delete - one_ping, 2)}


def inventory(runner: Runner, up: UpInstance, count: int, repeat: int) -> dict[str, Any]:
    with up.client() as client:
        for i in range(count):
            client.create_raw(MACHINES, {
                "metadata": {"name": f"inv-{i:04d}", "labels": {"bench": "inventory", "tier": f"t{i % 4}"}},
                "spec": {"machineClassRef": {"name": "x-small"}, "power": "Off",
                         "machinePoolSelector": {"bench.ironpool.dev/no-such-pool": "true"}},
            }, "default")
    source = runner.workdir / "bench.ironpool.yml"
    source.write_text("""plugin: ironpool.iaas.machines
label_selector: bench=inventory
keyed_groups:
  - key: ironpool_pool | default('none', true)
    prefix: pool
  - key: ironpool_class
    prefix: class
  - key: ironpool_labels.tier
    prefix: tier
groups:
  powered_off: ironpool_power == 'Off'
""")
    empty = min(runner.inventory("localhost,").wall for _ in range(repeat))
    total = min(runner.inventory(str(source)).wall for _ in range(repeat))
    return {"machines": count, "wall_s": round(total, 2), "empty_inventory_s": round(empty, 2),
            "plugin_s": round(total - empty, 2)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tasks", type=int, default=20)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--machines", type=int, default=50)
    parser.add_argument("--inventory", type=int, default=1000)
    args = parser.parse_args()
    # Room for every Machine at once: the pool's size is what the scheduler counts, nothing boots.
    up = UpInstance(images=build_tiny_image(),
                    extra_args=["--capacity-cpu", "512", "--capacity-memory", "256Gi"])
    with tempfile.TemporaryDirectory(prefix="ipbench-ansible-") as tmp:
        try:
            up.start()
            runner = Runner(up, Path(tmp))
            result = {
                "bench": "ansible",
                "cpus": os.cpu_count(),
                **module_overhead(runner, args.tasks, args.repeat),
                "manifest_50": manifest_fleet(runner, up, args.machines),
                "inventory_1000": inventory(runner, up, args.inventory, args.repeat),
            }
        finally:
            up.cleanup()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
