#!/usr/bin/env python3
"""Scheduler benchmark on the seeded placement workload (bench/workload.py): prints one JSON line.

    python bench/workload.py --hosts 5000 --requests 2000 --seed 1 --out w.json
    python bench/scheduler.py --workload w.json --mode inprocess --strategy binpack --until-first-rejection
    python bench/scheduler.py --workload w.json --mode inprocess --preplace 50000
    python bench/scheduler.py --workload w.json --mode api

Mapping: host -> MachinePool (cpu = vcpu, memory = memory_mib MiB, zone label), class -> MachineClass
(named "g-4" for "g.4": object names are DNS labels), request -> Machine of that class.

``inprocess`` drives SchedulerCore against its cache: what is timed per request is building the
request from its JSON, the decision, the assume and the confirmation the watch would bring. With
``--preplace N`` the first N requests are placed untimed first; ``--measure M`` times only the next M.

``api`` starts an apiserver on SQLite (``--store etcd``: on a 3-member etcd cluster of real
``etcd`` processes on loopback ports, data on disk unless ``--etcd-data tmpfs``), creates the
classes and pools over HTTP, then the Machines, then starts ``ironpool scheduler`` as a process and
watches until every Machine is bound: the time runs from the scheduler's start (its list/watch sync
and its leader election included) to the last binding. Beside the rates it prints the CPU time
each placement cost the scheduler, the apiserver and (on etcd) the three members together, which
other load on a shared machine disturbs far less than the rates, and the scheduler's peak memory.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import importlib.util
import json
import os
import shutil
import signal
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

STRATEGY = {"spread": "LeastAllocated", "binpack": "MostAllocated"}


def load_workload_module() -> ModuleType:
    """``bench/workload.py`` (generator and scoring), beside this script."""
    path = Path(__file__).resolve().parent / "workload.py"
    spec = importlib.util.spec_from_file_location("bench_workload", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot load the workload module at {path}")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def class_name(workload_class: str) -> str:
    """Workload class names ("g.4") as valid object names ("g-4")."""
    return workload_class.replace(".", "-")


def pool_doc(host: dict[str, Any], class_names: list[str]) -> dict[str, Any]:
    return {
        "apiVersion": "compute.ironcore.dev/v1alpha1", "kind": "MachinePool",
        "metadata": {"name": host["name"], "labels": {"topology.ironcore.dev/zone": host["zone"]}},
        "spec": {"providerID": f"bench://{host['name']}"},
        "status": {
            "state": "Ready",
            "conditions": [{"type": "Ready", "status": "True", "reason": "Bench"}],
            "availableMachineClasses": [{"name": class_name(c)} for c in class_names],
            "capacity": {"cpu": str(host["vcpu"]), "memory": f"{host['memory_mib']}Mi"},
            "allocatable": {"cpu": str(host["vcpu"]), "memory": f"{host['memory_mib']}Mi"},
        },
    }


def class_doc(name: str, c: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "compute.ironcore.dev/v1alpha1", "kind": "MachineClass",
            "metadata": {"name": class_name(name)},
            "capabilities": {"cpu": str(c["vcpu"]), "memory": f"{c['memory_mib']}Mi"}}


def machine_doc(req: dict[str, Any], namespace: str = "default") -> dict[str, Any]:
    return {"apiVersion": "compute.ironcore.dev/v1alpha1", "kind": "Machine",
            "metadata": {"name": req["id"], "namespace": namespace, "uid": req["uuid"]},
            "spec": {"machineClassRef": {"name": class_name(req["class"])}}}


def utilization_at(workload: dict[str, Any], assignment: list[str | None]) -> dict[str, float]:
    """Share of the whole fleet's vcpu/memory taken by what was placed."""
    totals = {r: sum(h[r] for h in workload["hosts"]) for r in ("vcpu", "memory_mib")}
    used = dict.fromkeys(totals, 0)
    for req, host in zip(workload["requests"], assignment, strict=False):
        if host is not None:
            for r in used:
                used[r] += workload["classes"][req["class"]][r]
    return {r: round(used[r] / totals[r], 4) for r in totals}


def run_inprocess(wl: ModuleType, workload: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    from ironpool.scheduler.config import parse_config
    from ironpool.scheduler.core import SchedulerCore
    from ironpool.scheduler.model import request_from_json

    config = parse_config({"profiles": [{"name": "bench", "strategy": STRATEGY[args.strategy]}]})
    core = SchedulerCore(config, use_index=not args.no_index)
    names = sorted(workload["classes"])
    for name in names:
        core.set_class("machine", class_doc(name, workload["classes"][name]))
    for host in workload["hosts"]:
        core.set_pool("machine", pool_doc(host, names))
    requests = workload["requests"]
    assignment: list[str | None] = []
    latencies: list[float] = []
    first_rejection: int | None = None
    cache = core.cache
    pre = min(args.preplace, len(requests))
    t_pre = time.perf_counter()
    for req in requests[:pre]:
        d = core.schedule(request_from_json("machine", machine_doc(req)))
        if d.pool is not None:
            cache.observe_bound("machine", d.request.key, d.pool, d.request.class_name)
        assignment.append(d.pool)
    preplace_s = time.perf_counter() - t_pre
    # Like a long-running scheduler after its initial sync: move the steady heap out of the cyclic
    # collector's way, so full collections do not stall single decisions (the runner does the same).
    gc.collect()
    gc.freeze()
    measured = requests[pre:pre + args.measure] if args.measure else requests[pre:]
    docs = [machine_doc(r) for r in measured]
    clock = time.perf_counter
    start = clock()
    for doc in docs:
        t0 = clock()
        d = core.schedule(request_from_json("machine", doc))
        if d.pool is not None:
            # the binding shows up in the watch: confirm the assumption
            cache.observe_bound("machine", d.request.key, d.pool, d.request.class_name)
            latencies.append(clock() - t0)
        assignment.append(d.pool)
        if d.pool is None and first_rejection is None:
            first_rejection = len(assignment) - 1
            if args.until_first_rejection:
                break
    seconds = clock() - start
    placed_measured = sum(1 for a in assignment[pre:] if a is not None)
    extra: dict[str, Any] = {
        "mode": "inprocess", "strategy": args.strategy, "preplaced": sum(1 for a in assignment[:pre] if a),
        "preplace_seconds": round(preplace_s, 3), "measured_requests": len(assignment) - pre,
        "placements_per_s": round(placed_measured / seconds, 2) if seconds else None,
        "index": not args.no_index,
    }
    if args.until_first_rejection:
        extra["utilization_at_first_rejection"] = utilization_at(workload, assignment)
        extra["first_rejection_at"] = first_rejection
    out: dict[str, Any] = wl.summarize(workload, assignment, seconds, latencies, **extra)
    return out


def _cpu_seconds(pid: int) -> float:
    """User plus system CPU time a process has used so far."""
    import os

    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _peak_rss_mib(pid: int) -> float:
    """The most resident memory a process has had (VmHWM), in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def _start_apiserver(tmp: Path, profile: str | None = None,
                     store: str | None = None) -> tuple[Any, str, Path]:
    """``ironpool apiserver`` on a fresh SQLite file (or on ``store``); returns (process, url, token
    file)."""
    import secrets
    import subprocess

    import httpx
    from ironpool.ports import free_port

    token = secrets.token_hex(16)
    token_file = tmp / "tokens.csv"
    token_file.write_text(f'{token},admin,1,"system:masters"\n')
    port = free_port()
    log = open(tmp / "apiserver.log", "wb")  # noqa: SIM115 - handed to the child
    prof = ["-m", "cProfile", "-o", profile] if profile else []
    proc = subprocess.Popen([sys.executable, *prof, "-m", "ironpool.cli.main", "apiserver", "--store",
                             store or f"sqlite:///{tmp / 'bench.db'}", "--listen", f"127.0.0.1:{port}",
                             "--token-file", str(token_file)], stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"apiserver exited: {(tmp / 'apiserver.log').read_text()[-2000:]}")
        try:
            if httpx.get(f"{url}/readyz", timeout=0.5).status_code == 200:
                return proc, url, token_file
        except httpx.HTTPError:
            pass
        time.sleep(0.05)
    proc.kill()
    raise SystemExit("apiserver did not become ready in 30 s")


def watch_bindings(client: Any, resource: Any, rv: str, total: int,
                   bound: dict[str, tuple[float, str]]) -> tuple[asyncio.Task[None], asyncio.Event]:
    """Watch Machines from ``rv`` on and record when each got its pool in ``bound`` (name -> (time,
    pool)); the event is set once ``total`` have one."""
    done = asyncio.Event()

    async def watch() -> None:
        async for ev in client.watch_raw(resource, None, rv):
            if ev.type == "BOOKMARK":
                continue
            ref = (ev.object.get("spec") or {}).get("machinePoolRef")
            name = ev.object["metadata"]["name"]
            if ref and name not in bound:
                bound[name] = (time.perf_counter(), ref["name"])
                if len(bound) == total:
                    done.set()
                    return

    return asyncio.create_task(watch()), done


async def run_api(wl: ModuleType, workload: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    """Pools and classes over HTTP, then a scheduler process, then the Machines; time until all bound."""
    import subprocess
    import tempfile

    from ironpool.api import Machine, MachineClass, MachinePool
    from ironpool.client.config import ClientConfig
    from ironpool.client.rest import AsyncClient
    from ironpool.client.wire import resource_for_model

    tmp = Path(tempfile.mkdtemp(prefix="ironpool-bench-"))
    stack = contextlib.ExitStack()
    store = None
    etcd_pids: list[int] = []
    if args.store == "etcd":
        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
        from tests.helpers.etcd import etcd_cluster

        cluster = stack.enter_context(etcd_cluster(3, fast=args.etcd_data == "tmpfs", base=tmp))
        store = cluster.url("/bench")
        etcd_pids = [m.process.pid for m in cluster.members if m.process is not None]
    try:
        proc, url, token_file = _start_apiserver(tmp, args.profile_apiserver, store)
    except BaseException:
        stack.close()
        raise
    token = token_file.read_text().split(",")[0]
    sched: Any = None
    try:
        client = AsyncClient(ClientConfig(server=url, token=token))
        mc, mp, m = (resource_for_model(x) for x in (MachineClass, MachinePool, Machine))
        sem = asyncio.Semaphore(args.concurrency)

        async def limited(coro: Any) -> Any:
            async with sem:
                return await coro

        names = sorted(workload["classes"])
        await asyncio.gather(*(limited(client.create_raw(mc, class_doc(n, workload["classes"][n])))
                               for n in names))

        async def make_pool(host: dict[str, Any]) -> None:
            doc = pool_doc(host, names)
            status = doc.pop("status")
            await client.create_raw(mp, doc)
            await client.patch_raw(mp, host["name"], {"status": status}, subresource="status")

        t_pools = time.perf_counter()
        await asyncio.gather(*(limited(make_pool(h)) for h in workload["hosts"]))
        pools_s = time.perf_counter() - t_pools
        requests = workload["requests"]
        created: dict[str, float] = {}
        bound: dict[str, tuple[float, str]] = {}
        rv = (await client.list_raw(m, None, limit=1)).resource_version
        watcher, done = watch_bindings(client, m, rv, len(requests), bound)

        async def make_machine(req: dict[str, Any]) -> None:
            created[req["id"]] = time.perf_counter()
            await client.create_raw(m, machine_doc(req), "default")

        # The Machines exist before the scheduler starts: what is timed is the scheduler's work
        # (list/watch sync, decisions, binds over HTTP), not the apiserver's create rate.
        t_create = time.perf_counter()
        await asyncio.gather(*(limited(make_machine(r)) for r in requests))
        created_s = time.perf_counter() - t_create
        strategy_cfg = tmp / "scheduler.yaml"
        strategy_cfg.write_text(f"profiles:\n  - name: bench\n    strategy: {STRATEGY[args.strategy]}\n")
        start = time.perf_counter()
        profile = ["-m", "cProfile", "-o", args.profile_scheduler] if args.profile_scheduler else []
        sched = subprocess.Popen(
            [sys.executable, *profile, "-m", "ironpool.cli.main", "scheduler", "--server", url,
             "--token-file", str(token_file), "--config", str(strategy_cfg), "--log-level", "WARNING",
             *(["--bind-concurrency", str(args.bind_concurrency)] if args.bind_concurrency else [])],
            stdout=open(tmp / "scheduler.log", "wb"), stderr=subprocess.STDOUT,  # noqa: SIM115
            env={**os.environ, "IRONPOOL_CONFIG": str(tmp / "client.yaml")})  # not the user's config
        created = dict.fromkeys(created, start)
        api_cpu = _cpu_seconds(proc.pid)
        etcd_cpu = sum(_cpu_seconds(pid) for pid in etcd_pids)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(done.wait(), timeout=args.api_timeout)
        end = max((t for t, _ in bound.values()), default=time.perf_counter())
        # CPU time per placement: what other load on a shared machine disturbs far less than rates.
        cpu_ms = {"scheduler": round(_cpu_seconds(sched.pid) / max(len(bound), 1) * 1000, 3),
                  "apiserver": round((_cpu_seconds(proc.pid) - api_cpu) / max(len(bound), 1) * 1000, 3)}
        scheduler_rss = _peak_rss_mib(sched.pid)
        if etcd_pids:  # the three members together
            cpu_ms["etcd"] = round((sum(_cpu_seconds(pid) for pid in etcd_pids) - etcd_cpu)
                                   / max(len(bound), 1) * 1000, 3)
        watcher.cancel()
        await client.aclose()
        assignment = [bound[r["id"]][1] if r["id"] in bound else None for r in requests]
        latencies = [bound[r["id"]][0] - created[r["id"]] for r in requests if r["id"] in bound]
        seconds = end - start
        first = min((t for t, _ in bound.values()), default=end)
        out: dict[str, Any] = wl.summarize(
            workload, assignment, seconds, latencies, mode="api", strategy=args.strategy, store=args.store,
            pools_setup_seconds=round(pools_s, 3),
            machine_create_per_s=round(len(requests) / created_s, 1),
            seconds_to_first_bind=round(first - start, 3),
            binds_per_s_after_first=round((len(bound) - 1) / (end - first), 1) if end > first else None,
            cpu_ms_per_placement=cpu_ms, bind_concurrency=args.bind_concurrency or "scheduler default",
            scheduler_peak_rss_mib=scheduler_rss)
        return out
    finally:
        if sched is not None:
            sched.terminate()
            sched.wait(timeout=10)
        proc.send_signal(signal.SIGINT)  # a clean exit, so a profile is written
        proc.wait(timeout=30)
        stack.close()
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--workload", required=True, help="file written by workload.py")
    ap.add_argument("--mode", choices=("inprocess", "api"), default="inprocess")
    ap.add_argument("--strategy", choices=tuple(STRATEGY), default="spread")
    ap.add_argument("--until-first-rejection", action="store_true")
    ap.add_argument("--preplace", type=int, default=0, help="place the first N requests untimed first")
    ap.add_argument("--measure", type=int, default=0, help="time only the next N requests (0: all)")
    ap.add_argument("--no-index", action="store_true", help="disable the per-class index (scan every pool)")
    ap.add_argument("--concurrency", type=int, default=8, help="api mode: parallel HTTP writers")
    ap.add_argument("--api-timeout", type=float, default=300.0, help="api mode: give up after N seconds")
    ap.add_argument("--keep", action="store_true", help="api mode: keep the temp dir (db, logs)")
    ap.add_argument("--profile-scheduler", default=None, help="api mode: cProfile the scheduler into FILE")
    ap.add_argument("--profile-apiserver", default=None, help="api mode: cProfile the apiserver into FILE")
    ap.add_argument("--store", choices=("sqlite", "etcd"), default="sqlite",
                    help="api mode: the apiserver's store (etcd: a 3-member cluster on loopback ports)")
    ap.add_argument("--etcd-data", choices=("disk", "tmpfs"), default="disk",
                    help="api mode, --store etcd: where the members keep their data")
    ap.add_argument("--bind-concurrency", type=int, default=0,
                    help="api mode: scheduler binds in flight (0: the scheduler's own default)")
    args = ap.parse_args(argv)
    wl = load_workload_module()
    try:
        workload = json.loads(Path(args.workload).read_text())
    except (OSError, ValueError) as exc:
        raise SystemExit(f"--workload: {exc}") from exc
    if args.mode == "inprocess":
        result = run_inprocess(wl, workload, args)
    else:
        result = asyncio.run(run_api(wl, workload, args))
    print(json.dumps(result, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    sys.exit(main())
