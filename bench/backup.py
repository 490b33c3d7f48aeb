"""Benchmark of ``ironpool backup`` and ``ironpool restore`` on SQLite, while clients create Machines.

It starts ``ironpool apiserver`` on a fresh SQLite file, creates ``--objects`` Machines, then keeps
``--clients`` clients creating more and runs ``ironpool backup`` (a separate process, as a user runs
it) in the middle of that. Prints one JSON line: how long the backup took, the archive's size, the
create rate of the clients before and while the backup ran (what a backup costs the writers),
how many Machines were acknowledged before it began and whether each of them is in the restored
store, and how long ``ironpool restore`` and an apiserver's start on the restored file took.

    .venv/bin/python bench/backup.py [--objects 5000] [--clients 8]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import secrets
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
from ironpool.ports import free_port

MACHINES = "/apis/compute.ironcore.dev/v1alpha1/namespaces/default/machines"


class Server:
    """``ironpool apiserver`` on ``db`` (plain HTTP on loopback)."""

    def __init__(self, work: Path, db: Path, token: str) -> None:
        tokens = work / "tokens.csv"
        if not tokens.exists():
            tokens.write_text(f'{token},admin,1,"system:masters"\n')
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.headers = {"Authorization": f"Bearer {token}"}
        log = open(work / f"apiserver-{self.port}.log", "wb")  # noqa: SIM115 - the child's
        started = time.monotonic()
        self.proc = subprocess.Popen([sys.executable, "-m", "ironpool.cli.main", "apiserver", "--store",
                                      f"sqlite://{db}", "--listen", f"127.0.0.1:{self.port}",
                                      "--token-file", str(tokens)], stdout=log, stderr=subprocess.STDOUT)
        deadline = started + 60
        while True:
            try:
                if httpx.get(f"{self.url}/readyz", timeout=0.5).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"apiserver did not start; see {log.name}")
            time.sleep(0.05)
        self.start_seconds = time.monotonic() - started

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(30)


def machine(name: str) -> dict[str, Any]:
    return {"apiVersion": "compute.ironcore.dev/v1alpha1", "kind": "Machine",
            "metadata": {"name": name, "namespace": "default"},
            "spec": {"machineClassRef": {"name": "x-small"},
                     "volumes": [{"name": "root", "localDisk": {"image": "tiny", "sizeLimit": "64Mi"}}]}}


async def load(server: Server, names: list[str], clients: int, acked: dict[str, float]) -> None:
    """Create ``names`` from ``clients`` connections; ``acked[name]`` = when its 201 arrived."""
    async with httpx.AsyncClient(base_url=server.url, headers=server.headers, timeout=60,
                                 limits=httpx.Limits(max_connections=clients)) as client:
        async def writer(part: list[str]) -> None:
            for name in part:
                answer = await client.post(MACHINES, json=machine(name))
                if answer.status_code != 201:
                    raise SystemExit(f"create {name}: {answer.status_code} {answer.text}")
                acked[name] = time.monotonic()

        await asyncio.gather(*(writer(names[i::clients]) for i in range(clients)))


async def backup_during_load(server: Server, archive: Path, db: Path, first: int, clients: int,
                             total: int) -> dict[str, Any]:
    acked: dict[str, float] = {}
    names = [f"live-{i:06d}" for i in range(total)]
    loader = asyncio.ensure_future(load(server, names, clients, acked))
    while len(acked) < total // 3:
        await asyncio.sleep(0.01)
    before = dict(acked)
    started = time.monotonic()
    pipe = asyncio.subprocess.PIPE
    proc = await asyncio.create_subprocess_exec(sys.executable, "-m", "ironpool.cli.main", "backup",
                                                str(archive), "--store", f"sqlite://{db}",
                                                stdout=pipe, stderr=pipe)
    out, err = await proc.communicate()
    ended = time.monotonic()
    if proc.returncode != 0:
        raise SystemExit(f"backup failed: {err.decode()}")
    await loader
    times = sorted(acked.values())
    t0 = times[0]
    rate_before = sum(1 for t in times if t < started) / max(started - t0, 1e-9)
    rate_during = sum(1 for t in times if started <= t < ended) / max(ended - started, 1e-9)
    return {"backup_seconds": round(ended - started, 3), "archive_bytes": archive.stat().st_size,
            "creates_per_s_before": round(rate_before), "creates_per_s_during_backup": round(rate_during),
            "acked_before_backup": len(before) + first, "before_names": before, "backup_output": out.decode()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--objects", type=int, default=5000, help="Machines created before the load")
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--live", type=int, default=1500, help="Machines created while the backup runs")
    args = parser.parse_args()
    token = secrets.token_hex(16)
    with tempfile.TemporaryDirectory(prefix="ironpool-bench-backup-") as tmp:
        work = Path(tmp)
        db = work / "ironpool.db"
        server = Server(work, db, token)
        try:
            classes = "/apis/compute.ironcore.dev/v1alpha1/machineclasses"
            httpx.post(f"{server.url}{classes}", headers=server.headers, json={
                "apiVersion": "compute.ironcore.dev/v1alpha1", "kind": "MachineClass",
                "metadata": {"name": "x-small"}, "capabilities": {"cpu": "1", "memory": "256Mi"}},
            ).raise_for_status()
            asyncio.run(load(server, [f"pre-{i:06d}" for i in range(args.objects)], args.clients, {}))
            result = asyncio.run(backup_during_load(server, work / "b.tar.gz", db, args.objects, args.clients,
                                                    args.live))
        finally:
            server.stop()
        started = time.monotonic()
        subprocess.run([sys.executable, "-m", "ironpool.cli.main", "restore", str(work / "b.tar.gz"),
                        "--data-dir", str(work / "restored")], check=True, capture_output=True)
        restore_seconds = time.monotonic() - started
        again = Server(work, work / "restored" / "ironpool.db", token)
        try:
            items = httpx.get(f"{again.url}{MACHINES}", headers=again.headers, timeout=120).json()["items"]
        finally:
            again.stop()
    restored = {m["metadata"]["name"] for m in items}
    before: dict[str, float] = result.pop("before_names")
    missing = [n for n in before if n not in restored]
    missing += [f"pre-{i:06d}" for i in range(args.objects) if f"pre-{i:06d}" not in restored]
    # The command's own line ends with "(BYTES bytes, SECONDS s)": the snapshot and archive alone,
    # without the process's start (its imports), which the wall time above includes.
    reported = result.pop("backup_output").rsplit(", ", 1)[-1].strip().rstrip(")s")
    print(json.dumps({**result, "backup_command_seconds": float(reported),
                      "restored_machines": len(restored), "missing_acknowledged": len(missing),
                      "restore_seconds": round(restore_seconds, 3),
                      "restored_apiserver_start_seconds": round(again.start_seconds, 3),
                      "load_average": os.getloadavg()[0]}))


if __name__ == "__main__":
    main()
