"""Benchmark of ``ironpool apiserver`` on SQLite: creates/s, gets/s, a 10,000-item list (as JSON
and as the Table kubectl asks for), RSS; over plain HTTP and over HTTPS in the same run.

It starts two apiservers as subprocesses, each on a fresh SQLite file, one over plain HTTP and one
over HTTPS (a certificate from a throwaway CA, as ``ironpool up`` makes one), and drives them from
this process (the load generator, a separate process sharing the same cores) with a lean asyncio
HTTP/1.1 keep-alive client: ``--clients`` connections, each sending one request at a time. The
create and get phases alternate between the two (HTTP, HTTPS, HTTPS, HTTP), so other load on the
machine weighs on both alike. Prints one JSON line with both and what TLS costs (``tls``: the HTTPS
rate as a share of the HTTP one). Besides rates and latencies, each phase reports the apiserver's
own CPU time per request (``server_cpu_us``), which other load disturbs far less than the rates.

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
import ssl
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import uvloop

MACHINES = "/apis/compute.ironcore.dev/v1alpha1/namespaces/default/machines"
CLASSES = "/apis/compute.ironcore.dev/v1alpha1/machineclasses"
TABLE = ("application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,"
         "application/json")


class Conn:
    """One keep-alive HTTP/1.1 connection; responses must carry Content-Length."""

    def __init__(self, host: str, port: int, token: str, tls: ssl.SSLContext | None = None) -> None:
        self.host, self.port, self.tls = host, port, tls
        self.auth = f"Authorization: Bearer {token}\r\n".encode()
        self.reader: asyncio.StreamReader
        self.writer: asyncio.StreamWriter

    async def open(self) -> None:
        self.reader, self.writer = await asyncio.open_connection(self.host, self.port, ssl=self.tls)
        sock = self.writer.get_extra_info("socket")
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    async def request(self, method: str, path: str, body: bytes = b"", accept: str = "") -> tuple[int, bytes]:
        head = (
            f"{method} {path} HTTP/1.1\r\nHost: {self.host}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n" + (f"Accept: {accept}\r\n" if accept else "")
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


@dataclass(frozen=True)
class Target:
    """One apiserver under test: where it listens, its token, its process and (HTTPS) its CA."""

    port: int
    token: str
    pid: int
    tls: ssl.SSLContext | None = None
    host: str = "127.0.0.1"

    def conn(self) -> Conn:
        return Conn(self.host, self.port, self.token, self.tls)


async def run_phase(
    target: Target,
    clients: int,
    total: int,
    make: Callable[[int], tuple[str, str, bytes]],
    expect: int,
) -> dict[str, float]:
    """``total`` requests over ``clients`` connections; rate, latency percentiles (ms) and the
    apiserver's CPU time per request."""
    conns = [target.conn() for _ in range(clients)]
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

    start, cpu_start = time.perf_counter(), cpu_seconds(target.pid)
    await asyncio.gather(*(worker(c) for c in conns))
    elapsed, cpu = time.perf_counter() - start, cpu_seconds(target.pid) - cpu_start
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


async def timed_lists(target: Target, accept: str, expect_items: int) -> dict[str, object]:
    """Five reads of the whole Machine list, as JSON or as a Table; median and fastest time."""
    conn = target.conn()
    await conn.open()
    times, parse_times = [], []
    for _ in range(5):
        t0 = time.perf_counter()
        status, body = await conn.request("GET", MACHINES, accept=accept)
        t1 = time.perf_counter()
        doc = json.loads(body)
        parse_times.append(time.perf_counter() - t1)
        times.append(t1 - t0)
        items = doc.get("rows") if accept else doc.get("items")
        assert status == 200 and len(items) == expect_items, (status, len(items))
    conn.close()
    return {
        "median_s": round(statistics.median(times), 3),
        "min_s": round(min(times), 3),
        "bytes": len(body),
        "client_json_parse_s": round(statistics.median(parse_times), 3),
    }


def merged(runs: list[dict[str, float]]) -> dict[str, float]:
    """Several runs of one phase as one: the overall rate, CPU per request weighted by requests, and
    the mean of the runs' percentiles."""
    n = sum(r["n"] for r in runs)
    return {
        "per_s": round(n / sum(r["n"] / r["per_s"] for r in runs), 1),
        "p50_ms": round(statistics.mean(r["p50_ms"] for r in runs), 2),
        "p99_ms": round(statistics.mean(r["p99_ms"] for r in runs), 2),
        "server_cpu_us": round(sum(r["server_cpu_us"] * r["n"] for r in runs) / n, 1),
        "n": n,
    }


async def interleaved(
    args: argparse.Namespace, targets: dict[str, Target], total: int,
    make: Callable[[int], tuple[str, str, bytes]], expect: int,
) -> dict[str, dict[str, float]]:
    """One phase on every target in A B B A order, half of ``total`` requests a run (request ``i``
    of a target's second run continues where its first stopped), so load that comes and goes on a
    shared machine weighs on each scheme alike."""
    names = list(targets)
    order = names + names[::-1]
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in names}
    half = total // 2
    for name in order:
        offset = half * len(runs[name])
        count = half if not runs[name] else total - half
        runs[name].append(await run_phase(targets[name], args.clients, count,
                                          lambda i, o=offset: make(o + i), expect))
    return {name: merged(r) for name, r in runs.items()}


async def bench(args: argparse.Namespace, targets: dict[str, Target]) -> dict[str, dict[str, object]]:
    result: dict[str, dict[str, object]] = {name: {} for name in targets}
    for target in targets.values():
        conn = target.conn()
        await conn.open()
        status, payload = await conn.request("POST", CLASSES, json.dumps({
            "apiVersion": "compute.ironcore.dev/v1alpha1", "kind": "MachineClass",
            "metadata": {"name": "small"}, "capabilities": {"cpu": "1", "memory": "1Gi"},
        }).encode())
        conn.close()
        assert status == 201, payload
    creates = await interleaved(args, targets, args.creates,
                                lambda i: ("POST", MACHINES, machine(f"m{i:07d}")), 201)
    gets = await interleaved(args, targets, args.gets,
                             lambda i: ("GET", f"{MACHINES}/m{(i * 7919) % args.creates:07d}", b""), 200)
    for name, target in targets.items():
        out = result[name]
        out["create"], out["get"] = creates[name], gets[name]
        # Top up to 10,000 Machines for the list.
        if args.creates < 10_000:
            await run_phase(
                target, args.clients, 10_000 - args.creates,
                lambda i: ("POST", MACHINES, machine(f"m{args.creates + i:07d}")), 201,
            )
        json_list = await timed_lists(target, "", 10_000)
        out["list_10000"] = json_list
        out["rss_mib_10000"] = round(rss_kib(target.pid) / 1024, 1)
        table = await timed_lists(target, TABLE, 10_000)
        # Ratios of the fastest of five reads: what other load on the machine disturbs least.
        json_s = max(float(str(json_list["min_s"])), 1e-9)
        table["vs_json"] = round(float(str(table["min_s"])) / json_s, 2)
        out["table_list_10000"] = table
        existing = max(args.creates, 10_000)
        if args.objects > existing:
            fill = await run_phase(
                target, args.clients, args.objects - existing,
                lambda i, e=existing: ("POST", MACHINES, machine(f"m{e + i:07d}")), 201,
            )
            out["fill_create_per_s"] = fill["per_s"]
        out[f"rss_mib_{max(args.objects, existing)}"] = round(rss_kib(target.pid) / 1024, 1)
    return result


def tls_files(tmp: Path) -> tuple[list[str], ssl.SSLContext]:
    """A throwaway CA and serving certificate for 127.0.0.1: the apiserver's flags and the client's
    context."""
    from ironpool.allinone.access import prepare_tls

    tls = prepare_tls(tmp / "pki", "127.0.0.1")
    assert tls.client_ca_file is not None
    flags = ["--tls-cert-file", tls.cert_file, "--tls-private-key-file", tls.key_file,
             "--client-ca-file", tls.client_ca_file]
    return flags, ssl.create_default_context(cafile=tls.client_ca_file)


@contextlib.contextmanager
def serving(https: bool = False) -> Iterator[tuple[str, Target]]:
    """``ironpool apiserver`` on a fresh SQLite file (HTTPS with a throwaway CA), stopped
    afterwards: its URL and the :class:`Target` to load it with."""
    with tempfile.TemporaryDirectory(prefix="ironpool-bench-") as tmp_name:
        tmp = Path(tmp_name)
        token = secrets.token_hex(16)
        (tmp / "tokens.csv").write_text(f'{token},admin,1,"system:masters"\n')
        port = free_port()
        flags, context = tls_files(tmp) if https else ([], None)
        url = f"{'https' if https else 'http'}://127.0.0.1:{port}"
        log_path = tmp / "apiserver.log"
        log = open(log_path, "wb")  # noqa: SIM115 - handed to the child
        proc = subprocess.Popen(
            [sys.executable, "-m", "ironpool.cli.main", "apiserver", "--store", f"sqlite:///{tmp}/bench.db",
             "--listen", f"127.0.0.1:{port}", "--token-file", f"{tmp}/tokens.csv", "--log-level", "warning",
             *flags],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        try:
            deadline = time.monotonic() + 30
            while True:
                try:
                    if httpx.get(f"{url}/readyz", timeout=0.5, verify=context or True).status_code == 200:
                        break
                except httpx.HTTPError:
                    pass
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise SystemExit(f"apiserver did not start: {log_path.read_text()}")
                time.sleep(0.05)
            yield url, Target(port, token, proc.pid, context)
        finally:
            proc.terminate()
            proc.wait(timeout=10)


def _share(result: dict[str, object], scheme: str, phase: str) -> float:
    phase_result = result[scheme]
    assert isinstance(phase_result, dict)
    return float(phase_result[phase]["per_s"])


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--creates", type=int, default=10_000)
    parser.add_argument("--gets", type=int, default=30_000)
    parser.add_argument("--objects", type=int, default=100_000, help="objects stored when RSS is measured")
    args = parser.parse_args()
    result: dict[str, object] = {"clients": args.clients, "store": "sqlite", "cores": os.cpu_count()}
    with serving() as (_, http), serving(https=True) as (_, https):
        # uvloop, as the apiserver itself runs: asyncio's own TLS layer (pure Python) in the load
        # generator would take the cores the server is measured on.
        result.update(uvloop.run(bench(args, {"http": http, "https": https})))
    https, http = result["https"], result["http"]
    assert isinstance(https, dict) and isinstance(http, dict)
    result["tls"] = {
        "create_rate_share": round(_share(result, "https", "create") / _share(result, "http", "create"), 3),
        "get_rate_share": round(_share(result, "https", "get") / _share(result, "http", "get"), 3),
        "list_time_ratio": round(https["list_10000"]["min_s"] / http["list_10000"]["min_s"], 3),
    }
    result["note"] = "load generator is a separate process on the same cores as the apiserver"
    print(json.dumps(result))


if __name__ == "__main__":
    main()
