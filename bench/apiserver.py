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

``--store etcd`` compares the stores instead: creates/s, gets/s and watch fan-out (events delivered
per second to ``--watchers`` watch streams while objects are created) through one apiserver on
SQLite and through two apiservers on a 3-member etcd cluster (real ``etcd`` processes on loopback
ports, data on disk unless ``--etcd-data tmpfs``), in the same run, phases interleaved A B B A.
The etcd side spreads its connections and watchers over both apiservers.

    .venv/bin/python bench/apiserver.py --store etcd [--creates 5000] [--gets 10000] [--watchers 100]

``--fanout`` measures watch fan-out alone on SQLite (one apiserver, no etcd): events delivered per
second to ``--watchers`` watch streams while ``--watch-events`` Machines are created, two runs.

    .venv/bin/python bench/apiserver.py --fanout [--watchers 100] [--watch-events 2000]

``--rbac`` measures what authorization costs: two apiservers on SQLite holding the same ``--roles``
Roles and ``--bindings`` bindings, one with ``--authorization-mode RBAC``, one with ``AlwaysAllow``,
loaded by the same non-admin user (bound to ``edit`` in ``default`` by a RoleBinding), creates and
gets interleaved A B B A; ``ratio`` is RBAC's rate as a share of AlwaysAllow's.

    .venv/bin/python bench/apiserver.py --rbac [--creates 5000] [--gets 20000] [--roles 100] [--bindings 1000]
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
from ironpool.ports import free_port

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
    ca_file: str | None = None  # HTTPS: the CA's certificate, for clients in other processes

    def conn(self) -> Conn:
        return Conn(self.host, self.port, self.token, self.tls)


def _spread(target: Target | list[Target]) -> list[Target]:
    return target if isinstance(target, list) else [target]


async def run_phase(
    target: Target | list[Target],
    clients: int,
    total: int,
    make: Callable[[int], tuple[str, str, bytes]],
    expect: int,
) -> dict[str, float]:
    """``total`` requests over ``clients`` connections (spread over the apiservers of ``target``);
    rate, latency percentiles (ms) and the apiservers' CPU time per request."""
    targets = _spread(target)
    conns = [targets[i % len(targets)].conn() for i in range(clients)]
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

    start, cpu_start = time.perf_counter(), sum(cpu_seconds(t.pid) for t in targets)
    await asyncio.gather(*(worker(c) for c in conns))
    elapsed, cpu = time.perf_counter() - start, sum(cpu_seconds(t.pid) for t in targets) - cpu_start
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
    args: argparse.Namespace, targets: dict[str, Target] | dict[str, list[Target]], total: int,
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


def tls_files(tmp: Path) -> tuple[list[str], ssl.SSLContext, str]:
    """A throwaway CA and serving certificate for 127.0.0.1: the apiserver's flags, the client's
    context and the CA's certificate file."""
    from ironpool.allinone.access import prepare_tls

    tls = prepare_tls(tmp / "pki", "127.0.0.1")
    assert tls.client_ca_file is not None
    flags = ["--tls-cert-file", tls.cert_file, "--tls-private-key-file", tls.key_file,
             "--client-ca-file", tls.client_ca_file]
    return flags, ssl.create_default_context(cafile=tls.client_ca_file), tls.client_ca_file


@contextlib.contextmanager
def serving(https: bool = False, store: str | None = None, extra_args: tuple[str, ...] = (),
            more_tokens: str = "") -> Iterator[tuple[str, Target]]:
    """``ironpool apiserver`` on a fresh SQLite file, or on ``store`` (HTTPS with a throwaway CA),
    stopped afterwards: its URL and the :class:`Target` to load it with (as the admin). ``extra_args``
    go to the apiserver, ``more_tokens`` (token-file lines) to its token file."""
    with tempfile.TemporaryDirectory(prefix="ironpool-bench-") as tmp_name:
        tmp = Path(tmp_name)
        token = secrets.token_hex(16)
        (tmp / "tokens.csv").write_text(f'{token},admin,1,"system:masters"\n{more_tokens}')
        port = free_port()
        flags, context, ca_file = tls_files(tmp) if https else ([], None, None)
        url = f"{'https' if https else 'http'}://127.0.0.1:{port}"
        log_path = tmp / "apiserver.log"
        log = open(log_path, "wb")  # noqa: SIM115 - handed to the child
        proc = subprocess.Popen(
            [sys.executable, "-m", "ironpool.cli.main", "apiserver", "--store", store or f"sqlite:///{tmp}/bench.db",
             "--listen", f"127.0.0.1:{port}", "--token-file", f"{tmp}/tokens.csv", "--log-level", "warning",
             *flags, *extra_args],
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
            yield url, Target(port, token, proc.pid, context, ca_file=ca_file)
        finally:
            proc.terminate()
            proc.wait(timeout=10)


class _Watcher:
    """A watch stream read as raw bytes; counts the events (``{"type":``) it has delivered."""

    MARK = b'{"type":"'

    def __init__(self, target: Target, path: str) -> None:
        self.target, self.path = target, path
        self.events = 0
        self.done = asyncio.Event()
        self.want = 0

    async def run(self, ready: asyncio.Event) -> None:
        conn = self.target.conn()
        await conn.open()
        head = (f"GET {self.path} HTTP/1.1\r\nHost: {conn.host}\r\n").encode() + conn.auth + b"\r\n"
        conn.writer.write(head)
        await conn.reader.readuntil(b"\r\n\r\n")
        ready.set()
        tail = b""
        try:
            while True:
                chunk = await conn.reader.read(65536)
                if not chunk:
                    return
                data = tail + chunk
                self.events += data.count(self.MARK)
                tail = data[-(len(self.MARK) - 1):]  # a mark split across two reads is counted once
                if self.want and self.events >= self.want:
                    self.done.set()
        finally:
            conn.close()


async def fan_out(target: Target | list[Target], watchers: int, events: int, clients: int,
                  tag: str) -> dict[str, float]:
    """``watchers`` watch streams (spread over the apiservers) while ``events`` Machines are created:
    events delivered per second over all watchers, from the first create to the last delivery."""
    targets = _spread(target)
    conn = targets[0].conn()
    await conn.open()
    _, body = await conn.request("GET", f"{MACHINES}?limit=1")
    conn.close()
    rv = json.loads(body)["metadata"]["resourceVersion"]
    path = f"{MACHINES}?watch=true&resourceVersion={rv}"
    streams = [_Watcher(targets[i % len(targets)], path) for i in range(watchers)]
    ready = [asyncio.Event() for _ in streams]
    tasks = [asyncio.ensure_future(w.run(r)) for w, r in zip(streams, ready, strict=True)]
    await asyncio.gather(*(r.wait() for r in ready))
    for w in streams:
        w.want = events
    start = time.perf_counter()
    created = await run_phase(target, clients, events,
                              lambda i: ("POST", MACHINES, machine(f"{tag}{i:06d}")), 201)
    await asyncio.wait_for(asyncio.gather(*(w.done.wait() for w in streams)), 300)
    elapsed = time.perf_counter() - start
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    return {"watchers": watchers, "events_each": events, "seconds": round(elapsed, 3),
            "delivered_per_s": round(watchers * events / elapsed, 1),
            "create_per_s_meanwhile": created["per_s"]}


def etcd_calls(endpoints: list[str]) -> dict[str, int]:
    """The unary gRPC calls the members have answered, by method (from their Prometheus metrics)."""
    calls: dict[str, int] = {}
    for endpoint in endpoints:
        for line in httpx.get(f"http://{endpoint}/metrics", timeout=5).text.splitlines():
            if line.startswith("grpc_server_started_total{") and 'grpc_type="unary"' in line:
                method = line.partition('grpc_method="')[2].partition('"')[0]
                calls[method] = calls.get(method, 0) + int(float(line.rpartition(" ")[2]))
    return calls


async def compare_stores(args: argparse.Namespace, targets: dict[str, list[Target]],
                         etcd_pids: list[int], endpoints: list[str]) -> dict[str, object]:
    result: dict[str, dict[str, object]] = {name: {} for name in targets}
    for group in targets.values():
        conn = group[0].conn()
        await conn.open()
        status, payload = await conn.request("POST", CLASSES, json.dumps({
            "apiVersion": "compute.ironcore.dev/v1alpha1", "kind": "MachineClass",
            "metadata": {"name": "small"}, "capabilities": {"cpu": "1", "memory": "1Gi"},
        }).encode())
        conn.close()
        assert status == 201, payload
    etcd_cpu, calls = sum(cpu_seconds(pid) for pid in etcd_pids), etcd_calls(endpoints)
    creates = await interleaved(args, targets, args.creates,
                                lambda i: ("POST", MACHINES, machine(f"m{i:07d}")), 201)
    etcd_cpu = sum(cpu_seconds(pid) for pid in etcd_pids) - etcd_cpu
    calls = {m: n - calls.get(m, 0) for m, n in etcd_calls(endpoints).items() if n > calls.get(m, 0)}
    gets = await interleaved(args, targets, args.gets,
                             lambda i: ("GET", f"{MACHINES}/m{(i * 7919) % args.creates:07d}", b""), 200)
    for name in targets:
        result[name]["create"], result[name]["get"] = creates[name], gets[name]
    # What the members spent, beside the apiservers' server_cpu_us (all three share these cores here).
    result["etcd"]["create"]["etcd_members_cpu_us"] = round(etcd_cpu / args.creates * 1e6, 1)  # type: ignore[index]
    # Unary gRPC calls the apiservers made per create, by method (watch streams are not counted).
    result["etcd"]["create"]["etcd_calls"] = {  # type: ignore[index]
        m: round(n / args.creates, 2) for m, n in sorted(calls.items())}
    order = [*targets, *list(targets)[::-1]]
    fan: dict[str, list[dict[str, float]]] = {name: [] for name in targets}
    for i, name in enumerate(order):
        fan[name].append(await fan_out(targets[name], args.watchers, args.watch_events // 2, args.clients,
                                       f"w{i}-"))
    for name, runs in fan.items():
        result[name]["watch_fanout"] = {
            "watchers": args.watchers, "events_each": sum(int(r["events_each"]) for r in runs),
            "delivered_per_s": round(sum(r["watchers"] * r["events_each"] for r in runs)
                                     / sum(r["seconds"] for r in runs), 1)}
    out: dict[str, object] = dict(result)
    out["etcd_vs_sqlite"] = {
        "create_rate": round(float(creates["etcd"]["per_s"]) / float(creates["sqlite"]["per_s"]), 3),
        "get_rate": round(float(gets["etcd"]["per_s"]) / float(gets["sqlite"]["per_s"]), 3),
        "fanout_rate": round(float(result["etcd"]["watch_fanout"]["delivered_per_s"])  # type: ignore[index]
                             / float(result["sqlite"]["watch_fanout"]["delivered_per_s"]), 3),  # type: ignore[index]
    }
    return out


def store_comparison(args: argparse.Namespace) -> dict[str, object]:
    """One apiserver on SQLite beside two apiservers on a 3-member etcd, loaded alike."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from tests.helpers.etcd import etcd_cluster

    with contextlib.ExitStack() as stack:
        _, sqlite = stack.enter_context(serving())
        base = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="ironpool-bench-etcd-")))
        cluster = stack.enter_context(etcd_cluster(3, fast=args.etcd_data == "tmpfs", base=base))
        etcd = [stack.enter_context(serving(store=cluster.url("/bench")))[1] for _ in range(2)]
        pids = [m.process.pid for m in cluster.members if m.process is not None]
        endpoints = [m.endpoint for m in cluster.members]
        result = uvloop.run(compare_stores(args, {"sqlite": [sqlite], "etcd": etcd}, pids, endpoints))
    result.update(clients=args.clients, cores=os.cpu_count(),
                  etcd_setup={"members": 3, "apiservers": 2, "data": args.etcd_data},
                  note="load generator, apiservers and etcd members share the same cores")
    return result


RBAC_USER_TOKEN = "rbac-bench-user-token"
RBAC_GROUP = "rbac.authorization.k8s.io"
RBAC = f"/apis/{RBAC_GROUP}/v1"


def rbac_objects(args: argparse.Namespace) -> list[tuple[str, str | None, dict[str, object]]]:
    """(plural, namespace, body): ten namespaces, ``--roles`` Roles over them and ``--bindings``
    bindings of other users and groups (a tenth of them ClusterRoleBindings), then the user under test
    bound to ``edit`` in ``default`` by a RoleBinding."""
    namespaces = [f"team-{i}" for i in range(10)]
    rule = {"verbs": ["get", "list", "watch", "create"], "apiGroups": ["compute.ironcore.dev"],
            "resources": ["machines", "machines/status"]}
    out: list[tuple[str, str | None, dict[str, object]]] = [
        ("namespaces", None, {"metadata": {"name": ns}}) for ns in namespaces]
    out += [("roles", namespaces[i % 10], {"metadata": {"name": f"role-{i}"},
                                           "rules": [rule, {**rule, "resourceNames": [f"m-{i}"]}]})
            for i in range(args.roles)]
    for i in range(args.bindings):
        subjects = [{"kind": "User", "name": f"user-{i}"}, {"kind": "Group", "name": f"group-{i % 50}"}]
        if i % 10 == 0:
            ref = {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": "view"}
            out.append(("clusterrolebindings", None,
                        {"metadata": {"name": f"crb-{i}"}, "subjects": subjects, "roleRef": ref}))
        else:
            ref = {"apiGroup": RBAC_GROUP, "kind": "Role", "name": f"role-{i % args.roles}"}
            out.append(("rolebindings", namespaces[i % 10],
                        {"metadata": {"name": f"rb-{i}"}, "subjects": subjects, "roleRef": ref}))
    out.append(("rolebindings", "default", {
        "metadata": {"name": "bench-edit"}, "subjects": [{"kind": "User", "name": "bench-user"}],
        "roleRef": {"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": "edit"}}))
    return out


async def _seed_rbac(admin: Target, args: argparse.Namespace) -> None:
    objects = rbac_objects(args)

    def post(i: int) -> tuple[str, str, bytes]:
        plural, ns, body = objects[i]
        root = "/api/v1" if plural == "namespaces" else RBAC
        path = f"{root}/namespaces/{ns}/{plural}" if ns else f"{root}/{plural}"
        return ("POST", path, json.dumps(body).encode())

    namespaces = sum(1 for plural, _, _ in objects if plural == "namespaces")
    await run_phase(admin, args.clients, namespaces, post, 201)  # the namespaces before what lives in them
    await run_phase(admin, args.clients, len(objects) - namespaces, lambda i: post(namespaces + i), 201)


async def authorize_cost(args: argparse.Namespace, calls: int = 200_000) -> dict[str, float]:
    """The RBAC authorizer's own cost per call (in this process, over the same objects in a SQLite
    store): what other load on the machine disturbs far less than the rates."""
    from ironpool.api.resources import resolve
    from ironpool.apiserver.auth.authentication import User
    from ironpool.apiserver.auth.authorizer import Authorization
    from ironpool.apiserver.controllers.bootstrap import Bootstrap
    from ironpool.apiserver.registry.generic import Registry
    from ironpool.store.sqlite import SQLiteStore

    with tempfile.TemporaryDirectory(prefix="ironpool-bench-") as tmp:
        store = SQLiteStore(f"{tmp}/authz.db")
        registry = Registry(store)
        for plural, ns, body in rbac_objects(args):
            await registry.create(resolve(plural), ns, body)
        auth = Authorization(store)
        await Bootstrap(registry, auth).ensure()
        user = User("bench-user", "2")
        out: dict[str, float] = {}
        for verb, name in (("get", "m0000001"), ("create", None)):
            auth(user, verb, "machines", "default", name)  # the first call fills the cache
            start = time.perf_counter()
            for _ in range(calls):
                auth(user, verb, "machines", "default", name)
            out[f"{verb}_us"] = round((time.perf_counter() - start) / calls * 1e6, 3)
        await auth.stop()
        await store.close()
    return out


async def rbac_bench(args: argparse.Namespace, admins: dict[str, Target]) -> dict[str, object]:
    """Creates and gets by a non-admin user through RBAC and through AlwaysAllow, interleaved."""
    users: dict[str, Target] = {}
    for name, admin in admins.items():
        await _seed_rbac(admin, args)
        conn = admin.conn()
        await conn.open()
        status, payload = await conn.request("POST", CLASSES, json.dumps({
            "apiVersion": "compute.ironcore.dev/v1alpha1", "kind": "MachineClass",
            "metadata": {"name": "small"}, "capabilities": {"cpu": "1", "memory": "1Gi"}}).encode())
        conn.close()
        assert status == 201, payload
        users[name] = Target(admin.port, RBAC_USER_TOKEN, admin.pid, admin.tls)
    creates = await interleaved(args, users, args.creates,
                                lambda i: ("POST", MACHINES, machine(f"m{i:07d}")), 201)
    gets = await interleaved(args, users, args.gets,
                             lambda i: ("GET", f"{MACHINES}/m{(i * 7919) % args.creates:07d}", b""), 200)
    result: dict[str, object] = {name: {"create": creates[name], "get": gets[name]} for name in users}
    result["ratio"] = {phase: round(float(by["rbac"]["per_s"]) / float(by["always_allow"]["per_s"]), 3)
                       for phase, by in (("create", creates), ("get", gets))}
    result["cpu_ratio"] = {
        phase: round(float(by["rbac"]["server_cpu_us"]) / float(by["always_allow"]["server_cpu_us"]), 3)
        for phase, by in (("create", creates), ("get", gets))}
    result["authorize_in_process"] = await authorize_cost(args)
    return result


async def fanout_only(args: argparse.Namespace, target: Target) -> dict[str, object]:
    conn = target.conn()
    await conn.open()
    status, payload = await conn.request("POST", CLASSES, json.dumps({
        "apiVersion": "compute.ironcore.dev/v1alpha1", "kind": "MachineClass",
        "metadata": {"name": "small"}, "capabilities": {"cpu": "1", "memory": "1Gi"}}).encode())
    conn.close()
    assert status == 201, payload
    runs = [await fan_out(target, args.watchers, args.watch_events // 2, args.clients, f"f{i}-")
            for i in range(2)]
    return {"watchers": args.watchers, "runs": runs,
            "delivered_per_s": round(sum(r["watchers"] * r["events_each"] for r in runs)
                                     / sum(r["seconds"] for r in runs), 1)}


def rbac_comparison(args: argparse.Namespace) -> dict[str, object]:
    """``--rbac``: two apiservers on SQLite with the same Roles and bindings, one authorizing by RBAC,
    one with AlwaysAllow; the same non-admin user loads both."""
    user = f'{RBAC_USER_TOKEN},bench-user,2\n'
    result: dict[str, object] = {"clients": args.clients, "store": "sqlite", "cores": os.cpu_count(),
                                 "roles": args.roles, "bindings": args.bindings}
    with serving(extra_args=("--authorization-mode", "RBAC"), more_tokens=user) as (_, rbac), \
            serving(extra_args=("--authorization-mode", "AlwaysAllow"), more_tokens=user) as (_, allow):
        result.update(uvloop.run(rbac_bench(args, {"rbac": rbac, "always_allow": allow})))
    result["note"] = ("ratio: RBAC's rate as a share of AlwaysAllow's (target >= 0.90); cpu_ratio: the "
                      "apiserver's CPU per request, RBAC over AlwaysAllow; authorize_in_process: one RBAC "
                      "decision for the user under test, in microseconds; load generator on the same cores")
    return result


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
    parser.add_argument("--store", choices=("sqlite", "etcd"), default="sqlite",
                        help="etcd: compare SQLite with two apiservers on a 3-member etcd (see above)")
    parser.add_argument("--watchers", type=int, default=100, help="--store etcd, --fanout: watch streams")
    parser.add_argument("--watch-events", type=int, default=2000, help="--store etcd, --fanout: objects "
                        "created while the watchers stream (half per run)")
    parser.add_argument("--etcd-data", choices=("disk", "tmpfs"), default="disk",
                        help="--store etcd: where the members keep their data (tmpfs: fsync costs nothing)")
    parser.add_argument("--fanout", action="store_true",
                        help="watch fan-out alone, on one apiserver on SQLite (see above)")
    parser.add_argument("--rbac", action="store_true",
                        help="RBAC (a user bound to edit, with --roles Roles and --bindings bindings) beside "
                        "AlwaysAllow, interleaved")
    parser.add_argument("--roles", type=int, default=100, help="--rbac: Roles present")
    parser.add_argument("--bindings", type=int, default=1000, help="--rbac: bindings present")
    args = parser.parse_args()
    if args.fanout:
        with serving() as (_, target):
            fanout: dict[str, object] = {"clients": args.clients, "store": "sqlite", "cores": os.cpu_count()}
            fanout.update(uvloop.run(fanout_only(args, target)))
        print(json.dumps(fanout))
        return
    if args.rbac:
        print(json.dumps(rbac_comparison(args)))
        return
    if args.store == "etcd":
        print(json.dumps(store_comparison(args)))
        return
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
