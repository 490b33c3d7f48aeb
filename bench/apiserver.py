"""Benchmark of ``ironpool apiserver`` on SQLite: creates/s, gets/s, a 10,000-item list, RSS.

Starts the apiserver as a subprocess on a fresh SQLite file and drives it from this process (the
load generator, a separate process sharing the same cores) with a lean asyncio HTTP/1.1 keep-alive
client: ``--clients`` connections, each sending one request at a time. Prints one JSON line.
Besides rates and latencies, each phase reports the apiserver's own CPU time per request
(``server_cpu_us``), which other load on the machine disturbs far less than the rates.

    .venv/bin/python bench/apiserver.py [--clients 8] [--creates 10000] [--gets 30000] [--objects 100000]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import secrets
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx

MACHINES = "/apis/compute.ironcore.dev/v1alpha1/namespaces/default/machines"
CLASSES = "/apis/compute.ironcore.dev/v1alpha1/machineclasses"


class Conn:
    """One keep-alive HTTP/1.1 connection; responses must carry Content-Length."""

    def __init__(self, host: str, port: int, token: str) -> None:
        self.host, self.port = host, port
        self.auth = f"Authorization: Bearer {token}\r\n".encode()
        self.reader: asyncio.StreamReader
        self.writer: asyncio.StreamWriter

    async def open(self) -> None:
        self.reader, self.writer = await asyncio.open_connection(self.host, self.port)
        sock = self.writer.get_extra_info("socket")
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    async def request(self, method: str, path: str, body: bytes = b"") -> tuple[int, bytes]:
        head = (
            f"{method} {path} HTTP/1.1\r\nHost: {self.host}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n"
        ).encode()
        self.writer.write(head + self.auth + b"\r\n" + body)
        header = await self.reader.readuntil(b"\r\n\r\n")
        status = int(header[9:12])
        length = 0
        for line in header.split(b"\r\n"):
            if line[:15].lower() == b"content-length:":
                length = int(line[15:])
        return status, await self.reader.readexactly(length)

    def close(self) -> None:
        self.writer.close()


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(len(ordered) * p))] * 1000 if ordered else 0.0


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time a process has used so far."""
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def run_phase(
    host: str,
    port: int,
    token: str,
    clients: int,
    total: int,
    make: Callable[[int], tuple[str, str, bytes]],
    expect: int,
    pid: int,
) -> dict[str, float]:
    """``total`` requests over ``clients`` connections; rate, latency percentiles (ms) and the
    apiserver's (process ``pid``) CPU time per request."""
    conns = [Conn(host, port, token) for _ in range(clients)]
    await asyncio.gather(*(c.open() for c in conns))
    latencies: list[float] = []
    counter = iter(range(total))

    async def worker(conn: Conn) -> None:
        for i in counter:
            method, path, body = make(i)
            t0 = time.perf_counter()
            status, payload = await conn.request(method, path, body)
            latencies.append(time.perf_counter() - t0)
            if status != expect:
                raise RuntimeError(f"{method} {path}: HTTP {status}: {payload[:300]!r}")

    start, cpu_start = time.perf_counter(), cpu_seconds(pid)
    await asyncio.gather(*(worker(c) for c in conns))
    elapsed, cpu = time.perf_counter() - start, cpu_seconds(pid) - cpu_start
    for c in conns:
        c.close()
    return {
        "per_s": round(total / elapsed, 1),
        "p50_ms": round(pct(latencies, 0.50), 2),
        "p99_ms": round(pct(latencies, 0.99), 2),
        "server_cpu_us": round(cpu / total * 1e6, 1),
        "n": total,
    }


def machine(name: str) -> bytes:
    return json.dumps(
        {
            "apiVersion": "compute.ironcore.dev/v1alpha1",
            "kind": "Machine",
            "metadata": {"name": name, "labels": {"app": "bench", "tier": name[-1]}},
            "spec": {
                "machineClassRef": {"name": "small"},
                "power": "On",
                "machinePoolSelector": {"topology.ironcore.dev/zone": "a"},
            },
        }
    ).encode()


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def bench(args: argparse.Namespace, url: str, port: int, token: str, pid: int) -> dict[str, object]:
    host = "127.0.0.1"
    result: dict[str, object] = {"clients": args.clients, "store": "sqlite", "cores": os.cpu_count()}
    async with httpx.AsyncClient(base_url=url, headers={"Authorization": f"Bearer {token}"}) as c:
        r = await c.post(
            CLASSES,
            json={
                "apiVersion": "compute.ironcore.dev/v1alpha1",
                "kind": "MachineClass",
                "metadata": {"name": "small"},
                "capabilities": {"cpu": "1", "memory": "1Gi"},
            },
        )
        r.raise_for_status()

    result["create"] = await run_phase(
        host,
        port,
        token,
        args.clients,
        args.creates,
        lambda i: ("POST", MACHINES, machine(f"m{i:07d}")),
        201,
        pid,
    )
    result["get"] = await run_phase(
        host,
        port,
        token,
        args.clients,
        args.gets,
        lambda i: ("GET", f"{MACHINES}/m{(i * 7919) % args.creates:07d}", b""),
        200,
        pid,
    )
    # Top up to 10,000 Machines for the list.
    if args.creates < 10_000:
        await run_phase(
            host,
            port,
            token,
            args.clients,
            10_000 - args.creates,
            lambda i: ("POST", MACHINES, machine(f"m{args.creates + i:07d}")),
            201,
            pid,
        )
    conn = Conn(host, port, token)
    await conn.open()
    list_times, parse_times = [], []
    for _ in range(5):
        t0 = time.perf_counter()
        status, body = await conn.request("GET", MACHINES)
        t1 = time.perf_counter()
        items = json.loads(body)["items"]
        parse_times.append(time.perf_counter() - t1)
        list_times.append(t1 - t0)
        assert status == 200 and len(items) == 10_000, (status, len(items))
    conn.close()
    result["list_10000"] = {
        "median_s": round(statistics.median(list_times), 3),
        "min_s": round(min(list_times), 3),
        "bytes": len(body),
        "client_json_parse_s": round(statistics.median(parse_times), 3),
    }
    result["rss_mib_10000"] = round(rss_kib(pid) / 1024, 1)
    existing = max(args.creates, 10_000)
    if args.objects > existing:
        fill = await run_phase(
            host,
            port,
            token,
            args.clients,
            args.objects - existing,
            lambda i: ("POST", MACHINES, machine(f"m{existing + i:07d}")),
            201,
            pid,
        )
        result["fill_create_per_s"] = fill["per_s"]
    result[f"rss_mib_{max(args.objects, existing)}"] = round(rss_kib(pid) / 1024, 1)
    return result


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--creates", type=int, default=10_000)
    parser.add_argument("--gets", type=int, default=30_000)
    parser.add_argument("--objects", type=int, default=100_000, help="objects stored when RSS is measured")
    args = parser.parse_args()
    with running_apiserver() as (url, port, token, pid):
        result = asyncio.run(bench(args, url, port, token, pid))
    result["note"] = "load generator is a separate process on the same cores as the apiserver"
    print(json.dumps(result))


@contextlib.contextmanager
def running_apiserver() -> Iterator[tuple[str, int, str, int]]:
    """``ironpool apiserver`` on a fresh SQLite file, stopped afterwards: (url, port, token, pid)."""
    with tempfile.TemporaryDirectory(prefix="ironpool-bench-") as tmp:
        token = secrets.token_hex(16)
        (Path(tmp) / "tokens.csv").write_text(f'{token},admin,1,"system:masters"\n')
        port = free_port()
        url = f"http://127.0.0.1:{port}"
        log = open(Path(tmp) / "apiserver.log", "wb")  # noqa: SIM115 - handed to the child
        proc = subprocess.Popen(
            [sys.executable, "-m", "ironpool.cli.main", "apiserver", "--store", f"sqlite:///{tmp}/bench.db",
             "--listen", f"127.0.0.1:{port}", "--token-file", f"{tmp}/tokens.csv", "--log-level", "warning"],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            deadline = time.monotonic() + 30
            while True:
                try:
                    if httpx.get(f"{url}/readyz", timeout=0.5).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"apiserver did not start: {(Path(tmp) / 'apiserver.log').read_text()}")
                time.sleep(0.05)
            yield url, port, token, proc.pid
        finally:
            proc.terminate()
            proc.wait(timeout=10)


if __name__ == "__main__":
    main()
