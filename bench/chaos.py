#!/usr/bin/env python3
"""A bounded chaos run on the rig: while an Ansible loop declares and deletes Machines, kill and restart
parts at random and partition a host; then check the invariants and print them as one JSON line.

    make chaos                       # 10 minutes
    .venv/bin/python bench/chaos.py [--minutes 10] [--seed N] [--live 8] [--keep]

The rig (``ironpool rig``: 3 etcd members, 2 HTTPS apiservers, 2 leader-elected schedulers, a
controller-manager) has three hosts joined with ``ironpool join``; the third reaches the apiservers
through proxies the run cuts. Every Machine boots the tiny image under QEMU.

- **Declarer**: ``ansible-playbook`` with ``ironpool.iaas.machine`` and ``ironpool.iaas.volume``, run
  after run: the first declares ``--steady`` Machines kept to the end (they live long enough for a
  partition to evict them); each run declares two new Machines (every third run one of them with a
  new Volume) and deletes the oldest of those beyond ``--live``. A task that succeeded is an
  acknowledged write; one that failed (its apiserver died under it) leaves that object's state
  uncertain, and the next run declares it again, as a user would run the playbook again.
- **Faults**, one at a time, every 10-30 s: SIGKILL of an apiserver, of the leading scheduler, of an
  etcd member, of the controller-manager or of a host's ``ironpool join`` (its poollets and
  runtimes), each started again after 2-8 s; or a partition of the third host (its proxies cut) for
  either less than its fence time or long enough for its Machines to be evicted.
- **Sampler**: every 0.2 s, libvirt's running domains: a Machine (by uid) running in two domains, or a
  disk file open read-write by two running domains, is a violation. Every 2 s, the API: a pool
  whose bound Machines need more cpu or memory than it has is a violation; a Machine seen bound to
  another pool than before counts as moved (evicted from a partitioned host and placed again).

At the end, with every part running again and the partition healed: every acknowledged write is
there (present Machines and Volumes exist, deleted ones are gone), the uncertain ones are declared once
more, every declared Machine is Running in exactly one domain; then the rig is removed and nothing of
the run may be left on libvirt. The exit status is 1 when any invariant was violated.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import xml.etree.ElementTree as ET
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import libvirt

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # for tests.helpers

from ironpool.api.errors import ApiError  # noqa: E402
from ironpool.api.quantity import parse_quantity  # noqa: E402
from ironpool.api.resources import resolve  # noqa: E402
from ironpool.client.transport_errors import TransportError  # noqa: E402
from ironpool.client.wire import ServerUnreachable  # noqa: E402
from ironpool.rig.rig import Rig  # noqa: E402
from ironpool.runtime.machine.domain_xml import parse_metadata  # noqa: E402
from ironpool.runtime.machine.model import METADATA_NS  # noqa: E402

from tests.helpers.cut_proxy import CutProxy  # noqa: E402
from tests.helpers.qemu_dirs import qemu_tmpdir  # noqa: E402
from tests.helpers.runtimes import LIBVIRT_URI, build_tiny_image  # noqa: E402

MACHINES, VOLUMES, POOLS, CLASSES = (resolve(r) for r in ("machines", "volumes", "machinepools",
                                                           "machineclasses"))
UID_LABEL = "machinepoollet.ironcore.dev/machine-uid"
# The hosts fence themselves after FENCE_AFTER s without their Lease; the controller-manager evicts a
# pool's Machines once GRACE has passed and the pool's published fence time plus MARGIN. A host whose
# own process was killed cannot fence itself (nothing runs that could stop its domains), so such a
# host is back, restarted, well within GRACE: longer, its guests would run in two places until it
# returns, which fencing cannot prevent without a watchdog outside the host's process.
FENCE_AFTER, GRACE, MARGIN = 5.0, 20.0, 4.0
BIN = Path(sys.executable).parent


class Sampler(threading.Thread):
    """libvirt every 0.2 s: Machines running in two domains, disks open read-write by two domains."""

    def __init__(self) -> None:
        super().__init__(daemon=True)
        self.stop = threading.Event()
        self.violations: list[str] = []
        self.samples = 0
        self.running: dict[str, list[str]] = {}  # the last sample: machine uid -> domains
        self._uids: dict[str, str] = {}

    def _uid(self, dom: libvirt.virDomain) -> str:
        name = dom.name()
        if name not in self._uids:
            rec = parse_metadata(dom.metadata(libvirt.VIR_DOMAIN_METADATA_ELEMENT, METADATA_NS, 0))
            self._uids[name] = rec.labels.get(UID_LABEL, "")
        return self._uids[name]

    def run(self) -> None:
        libvirt.registerErrorHandler(lambda _c, _e: None, None)
        conn = libvirt.open(LIBVIRT_URI)
        try:
            while not self.stop.wait(0.2):
                running: dict[str, list[str]] = {}
                writers: dict[str, list[str]] = {}
                for dom in conn.listAllDomains(libvirt.VIR_CONNECT_LIST_DOMAINS_ACTIVE):
                    try:
                        if not dom.name().startswith("ironpool-") or not (uid := self._uid(dom)):
                            continue
                        root = ET.fromstring(dom.XMLDesc(0))
                    except (libvirt.libvirtError, ValueError, KeyError, TypeError):
                        continue  # gone meanwhile, or not one of ours
                    running.setdefault(uid, []).append(dom.name())
                    for disk in root.iterfind("./devices/disk"):
                        source = disk.find("source")
                        path = source.get("file", "") if source is not None else ""
                        if path and disk.find("readonly") is None and disk.find("shareable") is None:
                            writers.setdefault(path, []).append(dom.name())
                self.violations += [f"machine {uid} running in {doms}" for uid, doms in running.items()
                                    if len(doms) > 1]
                self.violations += [f"{path} open read-write by {doms}" for path, doms in writers.items()
                                    if len(doms) > 1]
                self.running = running
                self.samples += 1
        finally:
            conn.close()


class Declarer(threading.Thread):
    """``ansible-playbook`` run after run: new Machines (some with a Volume), the oldest deleted."""

    def __init__(self, rig: Rig, workdir: Path, live: int, steady: int) -> None:
        super().__init__(daemon=True)
        self.stop = threading.Event()
        self.workdir, self.live, self.steady = workdir, live, steady
        self.env = {"PATH": f"{BIN}:/usr/bin:/bin", "HOME": str(workdir),
                    "IRONPOOL_CONFIG": str(rig.admin_config),
                    "ANSIBLE_COLLECTIONS_PATH": str(REPO / "ansible_collection"),
                    "ANSIBLE_LOCALHOST_WARNING": "false", "ANSIBLE_INVENTORY_UNPARSED_WARNING": "false"}
        self.desired: dict[tuple[str, str], bool] = {}  # (kind, name) -> should exist
        self.volume_of: dict[str, str] = {}  # machine -> its Volume
        self.acked: dict[tuple[str, str], bool] = {}  # the last acknowledged state
        self.uncertain: set[tuple[str, str]] = set()  # last write not acknowledged
        self.counts: Counter[str] = Counter()
        self.errors: list[str] = []

    def run(self) -> None:
        i = 0
        while not self.stop.is_set():
            try:
                self.step(i)
            except Exception as exc:  # recorded and reported; the loop goes on
                self.errors.append(f"run {i}: {exc!r}")
            i += 1

    def step(self, i: int) -> None:
        new = [f"c{i:03d}-{k}" for k in range(2)]
        if i == 0:
            new += [f"steady-{k}" for k in range(self.steady)]
        present = [name for (kind, name), want in self.desired.items()
                   if kind == "machine" and want and not name.startswith("steady-")]
        for name in new:
            self.desired["machine", name] = True
        if i % 3 == 0:
            self.volume_of[new[0]] = f"v{i:03d}"
            self.desired["volume", f"v{i:03d}"] = True
        for name in present[:max(0, len(present) + len(new) - self.live)]:
            self.desired["machine", name] = False
            if name in self.volume_of:
                self.desired["volume", self.volume_of[name]] = False
        keys = [*(("machine", n) for n in new), *(("volume", v) for n in new if (v := self.volume_of.get(n))),
                *sorted(k for k, want in self.desired.items() if not want and self.acked.get(k) is not False)]
        self.declare(sorted(set(keys) | self.uncertain))

    def declare(self, keys: list[tuple[str, str]]) -> None:
        """One playbook: Volumes to make, then Machines, then Volumes to delete."""
        volumes_up = [n for k, n in keys if k == "volume" and self.desired[k, n]]
        volumes_down = [n for k, n in keys if k == "volume" and not self.desired[k, n]]
        machine_names = [n for k, n in keys if k == "machine"]
        machines = [{"name": n, "state": "present" if self.desired["machine", n] else "absent",
                     "volumes": [{"name": "data", "volume": v}] if (v := self.volume_of.get(n)) else []}
                    for n in machine_names]
        out = self.workdir / "results.json"
        out.unlink(missing_ok=True)
        play = [{"hosts": "localhost", "connection": "local", "gather_facts": False,
                 "vars": {"vup": volumes_up, "vdown": volumes_down, "machines": machines}, "tasks": [
                     {"ironpool.iaas.volume": {"name": "{{ item }}", "state": "present",
                                               "volume_class": "fast", "size": "64Mi"},
                      "loop": "{{ vup }}", "register": "r_vup", "ignore_errors": True},
                     {"ironpool.iaas.machine": {"name": "{{ item.name }}", "state": "{{ item.state }}",
                                                "image": "tiny", "machine_class": "x-small",
                                                "volumes": "{{ item.volumes }}"},
                      "loop": "{{ machines }}", "register": "r_m", "ignore_errors": True},
                     {"ironpool.iaas.volume": {"name": "{{ item }}", "state": "absent"},
                      "loop": "{{ vdown }}", "register": "r_vdown", "ignore_errors": True},
                     {"ansible.builtin.copy": {"dest": str(out), "content": (
                         "{{ [r_vup, r_m, r_vdown] | map(attribute='results') | flatten"
                         " | list | to_json }}")}},
                 ]}]
        (self.workdir / "play.yml").write_text(json.dumps(play))
        proc = subprocess.run([str(BIN / "ansible-playbook"), str(self.workdir / "play.yml")], env=self.env,
                              capture_output=True, text=True, timeout=900, check=False)
        self.counts["playbook_runs"] += 1
        ordered = ([("volume", n) for n in volumes_up] + [("machine", n) for n in machine_names]
                   + [("volume", n) for n in volumes_down])
        try:
            results = [(bool(r.get("failed")), bool(r.get("changed"))) for r in json.loads(out.read_text())]
        except (OSError, ValueError):
            results = [(True, False)] * len(ordered)  # the play itself failed: nothing is acknowledged
            self.errors.append(proc.stdout[-600:] + proc.stderr[-600:])
        for key, (failed, changed) in zip(ordered, results, strict=True):
            if failed:
                self.uncertain.add(key)
                self.counts["unacknowledged"] += 1
            else:
                self.uncertain.discard(key)
                self.acked[key] = self.desired[key]
                self.counts["acknowledged_writes"] += changed


class Faults(threading.Thread):
    """One fault at a time, every 10-30 s: a SIGKILL and a restart, or a partition and its healing."""

    def __init__(self, rig: Rig, proxies: list[CutProxy], rng: random.Random) -> None:
        super().__init__(daemon=True)
        self.stop = threading.Event()
        self.rig, self.proxies, self.rng = rig, proxies, rng
        self.counts: Counter[str] = Counter()
        self.log: list[str] = []
        self.errors: list[str] = []

    def run(self) -> None:
        faults: list[Callable[[], None]] = [self.apiserver, self.scheduler, self.etcd,
                                            self.controller_manager, self.host, self.partition]
        while not self.stop.wait(self.rng.uniform(10, 30)):
            fault = self.rng.choice(faults)
            try:
                fault()
            except Exception as exc:  # a part that did not come back is reported
                self.errors.append(f"{fault.__name__}: {exc!r}")

    def _kill_and_restart(self, what: str, proc: Any, restart: Callable[[], None]) -> None:
        self.log.append(f"{time.strftime('%H:%M:%S')} kill {proc.name}")
        proc.kill()
        proc.wait_gone(10)
        self.counts[f"kill_{what}"] += 1
        time.sleep(self.rng.uniform(2, 8))  # how long the part stays down
        restart()

    def apiserver(self) -> None:
        a = self.rng.choice(self.rig.apiservers)
        self._kill_and_restart("apiserver", a.proc, lambda: self.rig.restart(a.proc))

    def scheduler(self) -> None:
        s = next((s for s in self.rig.schedulers if s.proc.alive and s.leading), self.rig.schedulers[0])
        self._kill_and_restart("scheduler", s.proc, lambda: self.rig.restart(s.proc))

    def etcd(self) -> None:
        m = self.rng.choice(self.rig.etcd)
        self._kill_and_restart("etcd", m.proc, lambda: self.rig.restart(m.proc))

    def controller_manager(self) -> None:
        cm = self.rig.controller_manager
        assert cm is not None
        self._kill_and_restart("controller_manager", cm, cm.start)

    def host(self) -> None:
        name = self.rng.choice(sorted(self.rig.hosts))
        h = self.rig.hosts[name]
        self._kill_and_restart("host", h.proc, lambda: self.rig.start_host(name))

    def partition(self) -> None:
        # Half the cuts end before the host fences itself; the others last until its Machines were
        # evicted and ran elsewhere.
        seconds = self.rng.choice([self.rng.uniform(1, FENCE_AFTER - 1), self.rng.uniform(30, 45)])
        started = time.strftime("%H:%M:%S")
        client = self.rig.client()
        there = {name for name, pool in _placements(client).items() if pool == "host3"}
        for p in self.proxies:
            p.cut()
        self.counts["partitions"] += 1
        time.sleep(seconds)
        now = _placements(client)  # a Machine the loop deleted meanwhile has not moved
        moved = {name for name in there if now.get(name) not in (None, "host3")}
        for p in self.proxies:
            p.heal()
        self.counts["partition_machines_moved"] += len(moved)
        self.log.append(f"{started} partition host3 for {seconds:.0f}s: {len(there)} Machines there, "
                        f"{len(moved)} moved before it healed")


def _placements(client: Any) -> dict[str, str | None]:
    """Each Machine's pool (None: not bound)."""
    return {m["metadata"]["name"]: (m["spec"].get("machinePoolRef") or {}).get("name")
            for m in client.list_raw(MACHINES, "default").items}


def _amount(quantity: object) -> float:
    return parse_quantity(str(quantity)).milli_value() / 1000


def pool_overcommit(client: Any, machines: list[dict[str, Any]]) -> list[str]:
    """Pools whose bound ``machines`` need more cpu or memory than the pool has."""
    classes = {c["metadata"]["name"]: c.get("capabilities") or {} for c in client.list_raw(CLASSES).items}
    need: dict[str, list[float]] = {}
    for m in machines:
        pool = (m["spec"].get("machinePoolRef") or {}).get("name")
        caps = classes.get((m["spec"].get("machineClassRef") or {}).get("name", ""), {})
        if pool and caps:
            used = need.setdefault(pool, [0.0, 0.0])
            used[0] += _amount(caps.get("cpu", 0))
            used[1] += _amount(caps.get("memory", 0))
    out = []
    for p in client.list_raw(POOLS).items:
        capacity = (p.get("status") or {}).get("allocatable") or {}
        used = need.get(p["metadata"]["name"], [0.0, 0.0])
        for i, resource in enumerate(("cpu", "memory")):
            if resource in capacity and used[i] > _amount(capacity[resource]):
                out.append(f"pool {p['metadata']['name']}: {resource} {used[i]:g} bound, "
                           f"allocatable {capacity[resource]}")
    return out


def wait(probe: Callable[[], Any], timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    while not (result := probe()) and time.monotonic() < deadline:
        time.sleep(1)
    return result


def libvirt_names() -> set[str]:
    conn = libvirt.open(LIBVIRT_URI)
    try:
        return ({f"domain {d.name()}" for d in conn.listAllDomains()}
                | {f"storage pool {p.name()}" for p in conn.listAllStoragePools()})
    finally:
        conn.close()


def check_end(rig: Rig, declarer: Declarer, sampler: Sampler) -> tuple[list[str], dict[str, Any]]:
    """The invariants once the faults stopped: acknowledged writes kept, every Machine Running once."""
    violations: list[str] = []
    client = rig.client()
    kinds = {"machine": MACHINES, "volume": VOLUMES}

    def stored(deleting: bool) -> set[tuple[str, str]]:
        """(kind, name) of what the API holds; with ``deleting``, also what is being deleted."""
        return {(kind, o["metadata"]["name"]) for kind, info in kinds.items()
                for o in client.list_raw(info, "default").items
                if deleting or not o["metadata"].get("deletionTimestamp")}

    acked = {k: v for k, v in declarer.acked.items() if k not in declarer.uncertain}
    held = stored(deleting=False)
    violations += [f"{k} {n}: acknowledged present, missing" for (k, n), v in acked.items()
                   if v and (k, n) not in held]

    def lingering() -> list[tuple[str, str]]:
        held = stored(deleting=True)
        return [key for key, v in acked.items() if not v and key in held]

    wait(lambda: not lingering(), 180)
    violations += [f"{k} {n}: acknowledged deleted, still there" for k, n in lingering()]
    uncertain = len(declarer.uncertain)
    for _ in range(3):  # declared again until acknowledged, as a user reruns a play that failed
        if declarer.uncertain:
            declarer.declare(sorted(declarer.uncertain))
    violations += [f"{k} {n}: not acknowledged after three more runs" for k, n in declarer.uncertain]
    want = {n for (k, n), v in declarer.desired.items() if k == "machine" and v}

    def running() -> dict[str, str]:
        items = {m["metadata"]["name"]: m for m in client.list_raw(MACHINES, "default").items}
        return {n: ((items.get(n) or {}).get("status") or {}).get("state", "missing") for n in want}

    wait(lambda: all(s == "Running" for s in running().values()), 300)
    violations += [f"machine {n}: {s} at the end" for n, s in running().items() if s != "Running"]
    uids = {m["metadata"]["uid"]: m["metadata"]["name"] for m in client.list_raw(MACHINES, "default").items}
    domains = dict(sampler.running)
    violations += [f"machine {uids[u]} in {len(d)} domains at the end" for u, d in domains.items()
                   if u in uids and len(d) != 1]
    violations += [f"machine {n}: no running domain at the end" for u, n in uids.items()
                   if n in want and u not in domains]
    violations += pool_overcommit(client, client.list_raw(MACHINES, "default").items)
    return violations, {"uncertain_then_declared_again": uncertain, "machines_at_end": len(want)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--live", type=int, default=8, help="short-lived Machines kept at once (default 8)")
    parser.add_argument("--steady", type=int, default=6,
                        help="Machines kept from the first run to the end (default 6)")
    parser.add_argument("--keep", action="store_true", help="keep the run's folder and its logs afterwards")
    args = parser.parse_args()
    seed = args.seed if args.seed is not None else random.randrange(1 << 30)
    rng = random.Random(seed)
    before = libvirt_names()
    images = build_tiny_image()
    folder = qemu_tmpdir("ironpool-chaos-")
    etcd_data = Path(tempfile.mkdtemp(prefix="ironpool-chaos-etcd-", dir="/dev/shm"))
    rig = Rig(folder / "r", images, host_count=2, host_cpu="8", host_memory="8Gi", fence_after=FENCE_AFTER,
              etcd_data=etcd_data, controller_manager_args=[
                  "--pool-monitor-grace-period", str(GRACE), "--fence-margin", str(MARGIN),
                  "--pool-monitor-period", "0.5", "--pool-eviction-rate", "10", "--pool-eviction-burst", "3"])
    print(f"chaos: seed {seed}; starting the rig in {folder}", file=sys.stderr)
    rig.up()
    proxies = [CutProxy(("127.0.0.1", a.port)) for a in rig.apiservers]
    result: dict[str, Any] = {"seed": seed, "minutes": args.minutes}
    violations: list[str] = []
    try:
        rig.add_host("host3", servers=",".join(f"https://127.0.0.1:{p.port}" for p in proxies))
        rig.save()
        sampler, faults = Sampler(), Faults(rig, proxies, rng)
        declarer = Declarer(rig, folder, args.live, args.steady)
        sampler.start()
        declarer.start()
        faults.start()
        client = rig.client()
        end = time.monotonic() + args.minutes * 60
        tick = 0
        placed: dict[str, str] = {}  # Machine -> the pool it was last seen bound to
        moved = 0  # Machines seen bound to another pool than before: evicted and placed again
        while time.monotonic() < end:
            time.sleep(2)
            # An apiserver killed under the check: the next check counts.
            with contextlib.suppress(ServerUnreachable, ApiError, TransportError):
                machines = client.list_raw(MACHINES, "default").items
                for m in machines:
                    name, pool = m["metadata"]["name"], (m["spec"].get("machinePoolRef") or {}).get("name")
                    if pool and placed.setdefault(name, pool) != pool:
                        placed[name] = pool
                        moved += 1
                violations += pool_overcommit(client, machines)
            tick += 1
            if tick % 15 == 0:
                print(f"chaos: {int(end - time.monotonic())}s left; {dict(faults.counts)}; "
                      f"{dict(declarer.counts)}", file=sys.stderr, flush=True)
        print("chaos: faults stopped; checking the invariants", file=sys.stderr, flush=True)
        faults.stop.set()
        faults.join()
        declarer.stop.set()
        declarer.join()
        for proc in [*(m.proc for m in rig.etcd), *(a.proc for a in rig.apiservers),
                     *(s.proc for s in rig.schedulers)]:
            if not proc.alive:
                rig.restart(proc)
        end_violations, end_counts = check_end(rig, declarer, sampler)
        sampler.stop.set()
        sampler.join()
        violations += sampler.violations + end_violations + faults.errors
        result.update(faults.counts, **declarer.counts, **end_counts,
                      machines_declared=sum(1 for k, _ in declarer.desired if k == "machine"),
                      machines_moved=moved,
                      volumes_declared=sum(1 for k, _ in declarer.desired if k == "volume"),
                      libvirt_samples=sampler.samples, fault_log=faults.log,
                      declarer_errors=declarer.errors[-5:])
    finally:
        for p in proxies:
            p.close()
        if args.keep:
            shutil.copytree(rig.logs, folder / "logs", dirs_exist_ok=True)
        problems = rig.down()
        shutil.rmtree(etcd_data, ignore_errors=True)
        if not args.keep and not problems:
            shutil.rmtree(folder, ignore_errors=True)
    violations = list(dict.fromkeys(violations + problems))  # each once, in the order first seen
    violations += [f"left on libvirt: {name}" for name in sorted(libvirt_names() - before)]
    result["violations"] = len(violations)
    result["violation_list"] = violations[:50]
    print(json.dumps(result))
    return 1 if violations else 0


if __name__ == "__main__":
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    sys.exit(main())
