#!/usr/bin/env python3
"""Reservation benchmarks on the seeded placement workload (bench/workload.py): prints one JSON line.

    python bench/workload.py --hosts 1000 --requests 2000 --seed 1 --out w1k.json
    python bench/reservations.py gang --workload w1k.json --set 50
    python bench/workload.py --hosts 5000 --requests 2000 --seed 1 --out w5k.json
    python bench/reservations.py api --workload w5k.json

``gang`` times the scheduler's decision for a whole Reservation in-process: a set of ``--set``
machines of the workload's class mix planned over every pool (filters, scoring and the tentative
placements that make each machine see the room the others took), the plan held in the cache and
released again; ``--repeat`` times, on a fleet that ``--preplace`` plain placements filled first.

``api`` measures placements per second through the API, twice in one run, each on a fresh apiserver
(SQLite) with the workload's pools: the plain path (bench/scheduler.py's ``api`` mode: the Machines
exist before ``ironpool scheduler`` starts; timed from its start to the last binding), and the same
Machines each placed within a Reservation: the Reservations (``--set`` machines each, of one class)
are planned by a first scheduler and accepted by a stand-in for the pools' poollets, then the
labelled Machines are created and a fresh scheduler started and timed the same way. It prints both
rates and their ratio.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import importlib.util
import json
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import ModuleType
from typing import Any

HERE = Path(__file__).resolve().parent
LABEL = "compute.ironcore.dev/reservation"


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"bench_{name}", HERE / f"{name}.py")
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot load bench/{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


sched = _load("scheduler")


def reservation_doc(name: str, counts: dict[str, int], namespace: str = "default") -> dict[str, Any]:
    return {"apiVersion": "compute.ironcore.dev/v1alpha1", "kind": "Reservation",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"resources": {f"class/machine.{sched.class_name(c)}": str(n)
                                   for c, n in counts.items()}}}


# -- gang: one decision for a whole set, in-process --------------------------------------------------

def run_gang(workload: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    from ironpool.scheduler.config import parse_config
    from ironpool.scheduler.core import SchedulerCore
    from ironpool.scheduler.model import request_from_json

    core = SchedulerCore(parse_config({"profiles": [{"name": "bench", "strategy": "LeastAllocated"}]}))
    names = sorted(workload["classes"])
    for name in names:
        core.set_class("machine", sched.class_doc(name, workload["classes"][name]))
    for host in workload["hosts"]:
        core.set_pool("machine", sched.pool_doc(host, names))
    requests = workload["requests"]
    for req in requests[:args.preplace]:
        d = core.schedule(request_from_json("machine", sched.machine_doc(req)))
        if d.pool is not None:
            core.cache.observe_bound("machine", d.request.key, d.pool, d.request.class_name)
    mix: dict[str, int] = {}
    for req in requests[args.preplace:args.preplace + args.set]:
        mix[req["class"]] = mix.get(req["class"], 0) + 1
    gc.collect()
    gc.freeze()
    times: list[float] = []
    fits = 0
    for i in range(args.repeat):
        info, _ = core.set_reservation({**reservation_doc(f"gang-{i}", mix),
                                        "metadata": {"name": f"gang-{i}", "namespace": "default",
                                                     "resourceVersion": "1"}})
        t0 = time.perf_counter()
        plan = core.plan_reservation(info)
        times.append(time.perf_counter() - t0)
        fits += plan.fits
        core.delete_reservation(info.key)  # released: the next one sees the same fleet
    times.sort()
    return {"mode": "gang", "pools": len(workload["hosts"]), "set": args.set, "classes": len(mix),
            "preplaced": args.preplace, "repeat": args.repeat, "fits": fits,
            "decision_ms": {"p50": round(statistics.median(times) * 1000, 2),
                            "p95": round(times[int(0.95 * (len(times) - 1))] * 1000, 2),
                            "max": round(times[-1] * 1000, 2)}}


# -- api: placements per second, plain and within Reservations --------------------------------------

async def _accept_all(client: Any, rsv: Any, names: list[str], timeout: float) -> float:
    """Plan every Reservation (the running scheduler does) and accept every part (as the pools'
    poollets would); the seconds it took."""
    start = time.perf_counter()
    deadline = time.monotonic() + timeout
    pending = set(names)
    while pending:
        if time.monotonic() > deadline:
            raise SystemExit(f"{len(pending)} reservations not planned in {timeout}s")
        for doc in (await client.list_raw(rsv, "default")).items:
            name = doc["metadata"]["name"]
            if name not in pending:
                continue
            status = doc.get("status") or {}
            verdict = next((c for c in status.get("conditions") or [] if c["type"] == "Scheduled"), None)
            if verdict is None:
                continue
            if verdict["status"] != "True":
                raise SystemExit(f"reservation {name} refused: {verdict['message']}")
            pools = [{**e, "state": "Accepted"} for e in status.get("pools") or []]
            patch = {"metadata": {"resourceVersion": doc["metadata"]["resourceVersion"]},
                     "status": {"pools": pools}}
            with contextlib.suppress(Exception):
                await client.patch_raw(rsv, name, patch, "default", subresource="status")
                pending.discard(name)
        await asyncio.sleep(0.05)
    return time.perf_counter() - start


async def run_reserved(wl: ModuleType, workload: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    """The api run with every Machine within a Reservation (see the module docstring)."""
    from ironpool.api import Machine, MachineClass, MachinePool, Reservation
    from ironpool.client.config import ClientConfig
    from ironpool.client.rest import AsyncClient
    from ironpool.client.wire import resource_for_model

    tmp = Path(tempfile.mkdtemp(prefix="ironpool-bench-rsv-"))
    proc, url, token_file = sched._start_apiserver(tmp)
    token = token_file.read_text().split(",")[0]
    planner: Any = None
    timed: Any = None
    try:
        client = AsyncClient(ClientConfig(server=url, token=token))
        mc, mp, m = (resource_for_model(x) for x in (MachineClass, MachinePool, Machine))
        rsv = resource_for_model(Reservation)
        sem = asyncio.Semaphore(args.concurrency)

        async def limited(coro: Any) -> Any:
            async with sem:
                return await coro

        names = sorted(workload["classes"])
        await asyncio.gather(*(limited(client.create_raw(mc, sched.class_doc(n, workload["classes"][n])))
                               for n in names))

        async def make_pool(host: dict[str, Any]) -> None:
            doc = sched.pool_doc(host, names)
            status = doc.pop("status")
            await client.create_raw(mp, doc)
            await client.patch_raw(mp, host["name"], {"status": status}, subresource="status")

        await asyncio.gather(*(limited(make_pool(h)) for h in workload["hosts"]))
        # One Reservation per `--set` Machines of one class, every Machine within one.
        by_class: dict[str, list[dict[str, Any]]] = {}
        for req in workload["requests"]:
            by_class.setdefault(req["class"], []).append(req)
        within: dict[str, str] = {}
        reservations: dict[str, dict[str, int]] = {}
        for cls, reqs in sorted(by_class.items()):
            for start in range(0, len(reqs), args.set):
                name = f"r-{sched.class_name(cls)}-{start // args.set}"
                chunk = reqs[start:start + args.set]
                reservations[name] = {cls: len(chunk)}
                within.update((r["id"], name) for r in chunk)
        cfg = tmp / "scheduler.yaml"
        cfg.write_text("profiles:\n  - name: bench\n    strategy: LeastAllocated\n")
        command = [sys.executable, "-m", "ironpool.cli.main", "scheduler", "--server", url, "--token-file",
                   str(token_file), "--config", str(cfg), "--log-level", "WARNING", "--no-leader-elect"]
        planner = subprocess.Popen(command, stdout=open(tmp / "planner.log", "wb"),  # noqa: SIM115
                                   stderr=subprocess.STDOUT)
        t_rsv = time.perf_counter()
        await asyncio.gather(*(limited(client.create_raw(rsv, reservation_doc(n, c), "default"))
                               for n, c in reservations.items()))
        accept_s = await _accept_all(client, rsv, list(reservations), args.api_timeout)
        held = {d["metadata"]["name"]: {e["ref"] for e in (d.get("status") or {}).get("pools") or []}
                for d in (await client.list_raw(rsv, "default")).items}
        reserve_s = time.perf_counter() - t_rsv
        planner.terminate()
        planner.wait(timeout=10)
        planner = None

        requests = workload["requests"]
        bound: dict[str, tuple[float, str]] = {}
        rv = (await client.list_raw(m, None, limit=1)).resource_version
        watcher, done = sched.watch_bindings(client, m, rv, len(requests), bound)

        async def make_machine(req: dict[str, Any]) -> None:
            doc = sched.machine_doc(req)
            doc["metadata"]["labels"] = {LABEL: within[req["id"]]}
            await client.create_raw(m, doc, "default")

        await asyncio.gather(*(limited(make_machine(r)) for r in requests))
        start = time.perf_counter()
        timed = subprocess.Popen(command, stdout=open(tmp / "scheduler.log", "wb"),  # noqa: SIM115
                                 stderr=subprocess.STDOUT)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(done.wait(), timeout=args.api_timeout)
        end = max((t for t, _ in bound.values()), default=time.perf_counter())
        watcher.cancel()
        await client.aclose()
        assignment = [bound[r["id"]][1] if r["id"] in bound else None for r in requests]
        latencies = [bound[r["id"]][0] - start for r in requests if r["id"] in bound]
        first = min((t for t, _ in bound.values()), default=end)
        outside = sum(1 for r in requests
                      if r["id"] in bound and bound[r["id"]][1] not in held.get(within[r["id"]], ()))
        return dict(wl.summarize(workload, assignment, end - start, latencies, mode="api-reserved",
                                 seconds_to_first_bind=round(first - start, 3),
                                 binds_per_s_after_first=round((len(bound) - 1) / (end - first), 1)
                                 if end > first else None,
                                 placed_outside_their_reservation=outside,
                                 reservations=len(reservations), set=args.set,
                                 reserve_and_accept_seconds=round(reserve_s, 3),
                                 accept_seconds=round(accept_s, 3)))
    finally:
        for p in (planner, timed):
            if p is not None:
                p.terminate()
                p.wait(timeout=10)
        proc.send_signal(signal.SIGINT)
        proc.wait(timeout=30)
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)


def run_api(wl: ModuleType, workload: dict[str, Any], args: argparse.Namespace) -> dict[str, Any]:
    plain_args = argparse.Namespace(store="sqlite", etcd_data="disk", profile_apiserver=None,
                                    profile_scheduler=None, concurrency=args.concurrency, strategy="spread",
                                    bind_concurrency=0, api_timeout=args.api_timeout, keep=args.keep)
    plain = asyncio.run(sched.run_api(wl, workload, plain_args))
    reserved = asyncio.run(run_reserved(wl, workload, args))
    rates = {}
    for what in ("placements_per_s", "binds_per_s_after_first"):
        rate = {"plain": plain.get(what), "reserved": reserved.get(what)}
        ratio = round(rate["reserved"] / rate["plain"], 3) if rate["plain"] and rate["reserved"] else None
        rates[what] = {**rate, "reserved_vs_plain": ratio}
    return {"mode": "api", "pools": len(workload["hosts"]), "machines": len(workload["requests"]),
            **rates, "plain": plain, "reserved": reserved}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("mode", choices=("gang", "api"))
    ap.add_argument("--workload", required=True, help="file written by workload.py")
    ap.add_argument("--set", type=int, default=50, help="machines per Reservation")
    ap.add_argument("--repeat", type=int, default=200, help="gang: decisions timed")
    ap.add_argument("--preplace", type=int, default=0, help="gang: plain placements made first")
    ap.add_argument("--concurrency", type=int, default=8, help="api: parallel HTTP writers")
    ap.add_argument("--api-timeout", type=float, default=300.0)
    ap.add_argument("--keep", action="store_true", help="api: keep the temp dirs (db, logs)")
    args = ap.parse_args(argv)
    wl = sched.load_workload_module()
    workload = json.loads(Path(args.workload).read_text())
    result = run_gang(workload, args) if args.mode == "gang" else run_api(wl, workload, args)
    print(json.dumps(result, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
