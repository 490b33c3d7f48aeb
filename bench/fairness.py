#!/usr/bin/env python3
"""Fair share under a hostile user: what one authenticated user (bound to ``edit`` in one namespace)
can take from everyone else, against a real ``ironpool apiserver`` over HTTPS (as ``ironpool up``
serves), with its default limits; one JSON line.

    .venv/bin/python bench/fairness.py [--watches 10000] [--selector-clients 8] [--objects 1000]

Two attacks, each by a process of its own (the attacker shares the machine's cores with the
apiserver, as it would):

1. ``watch_hold``: the attacker opens ``--watches`` watch streams of its namespace, each on a new
   TLS connection (``--hog-concurrency`` at a time), and holds whatever the server leaves open. It
   reports what it was answered and how many connections stay open.
2. ``selectors``: ``--selector-clients`` keep-alive connections of the same user LIST its namespace
   (``--objects`` Secrets, each labelled so that it matches) with the largest selector the server
   allows, back to back, for ``--seconds``. It reports the LISTs' latency; the apiserver's CPU per
   LIST is read from ``/proc``. A selector past the bound is refused: the time to the 400 is reported.

During each attack's hold this process probes, every ``--interval`` seconds and each on a new TLS
connection, as a health checker, an administrator and a pool do: ``GET /healthz``, an admin ``GET`` of
a Secret, and a pool's heartbeat (``PUT`` of its Lease as the pool identity). It reports p50/p99/max
of each in milliseconds (the targets: p99 under 100 ms) and any failure.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import math
import os
import resource
import secrets
import ssl
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import uvloop

sys.path.insert(0, str(Path(__file__).resolve().parent))
from apiserver import Conn, Target, cpu_seconds, serving

USER, POOL = "mallory", "compute.ironcore.dev:system:machinepool:p1"
NAMESPACE = "team-a"
SECRETS = f"/api/v1/namespaces/{NAMESPACE}/secrets"
LEASE = "/apis/coordination.k8s.io/v1/namespaces/ironpool-machinepool-lease/leases/p1"
RBAC = "/apis/rbac.authorization.k8s.io/v1"


def largest_selector(terms: int, limit_bytes: int) -> tuple[str, dict[str, str]]:
    """A label selector of ``terms`` terms (sets of four values, the longest values that keep it
    within ``limit_bytes``), and labels that match every requirement: the costliest selector, since
    no requirement fails early."""
    for length in range(63, 0, -1):
        reqs, labels = [], {}
        for i in range(terms // 4):
            values = [f"v{j}" + "x" * (length - 2) for j in range(4)]
            reqs.append(f"example.com/key-{i:03d} in ({','.join(values)})")
            labels[f"example.com/key-{i:03d}"] = values[i % 4]
        selector = ",".join(reqs)
        if len(selector) <= limit_bytes:
            return selector, labels
    raise ValueError(f"no selector of {terms} terms fits in {limit_bytes} bytes")


def pcts(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    if not ordered:
        return {"n": 0}

    def at(p: float) -> float:
        return round(ordered[max(0, math.ceil(len(ordered) * p) - 1)] * 1000, 1)

    return {"n": len(ordered), "p50_ms": at(0.5), "p99_ms": at(0.99), "max_ms": round(ordered[-1] * 1000, 1)}


# -- the attacker (a process of its own: bench/fairness.py --attacker ...) -------------------------------

async def hold_watches(port: int, token: str, attempts: int, concurrency: int, ca: str) -> None:
    context = ssl.create_default_context(cafile=ca)
    request = (f"GET {SECRETS}?watch=1&timeoutSeconds=3600 HTTP/1.1\r\nHost: 127.0.0.1\r\n"
               f"Authorization: Bearer {token}\r\n\r\n").encode()
    codes: dict[str, int] = {}
    held: list[asyncio.StreamReader] = []
    writers: list[asyncio.StreamWriter] = []
    gate = asyncio.Semaphore(concurrency)

    async def one() -> None:
        async with gate:
            try:
                reader, writer = await asyncio.open_connection("127.0.0.1", port, ssl=context)
                writer.write(request)
                head = await reader.readuntil(b"\r\n\r\n")
                code = head[9:12].decode()
            except (OSError, asyncio.IncompleteReadError, ssl.SSLError):
                codes["refused"] = codes.get("refused", 0) + 1
                return
            codes[code] = codes.get(code, 0) + 1
            held.append(reader)
            writers.append(writer)

    started = time.perf_counter()
    await asyncio.gather(*(one() for _ in range(attempts)))
    ramp = time.perf_counter() - started

    async def closed(reader: asyncio.StreamReader) -> bool:
        try:
            while await asyncio.wait_for(reader.read(65536), 1.0):
                pass
            return True  # EOF: the server closed it
        except (TimeoutError, OSError):
            return False

    gone = sum(await asyncio.gather(*(closed(r) for r in held)))
    print(json.dumps({"codes": codes, "open": len(held) - gone, "ramp_s": round(ramp, 1)}), flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)  # hold until told
    for writer in writers:
        writer.close()


async def list_with_selector(port: int, token: str, clients: int, seconds: float, ca: str,
                             selector: str) -> None:
    from urllib.parse import quote

    context = ssl.create_default_context(cafile=ca)
    path = f"{SECRETS}?labelSelector={quote(selector)}"
    conns = [Conn("127.0.0.1", port, token, context) for _ in range(clients)]
    await asyncio.gather(*(c.open() for c in conns))
    latencies: list[float] = []
    items = 0
    print(json.dumps({"started": True}), flush=True)
    deadline = time.monotonic() + seconds

    async def loop(conn: Conn) -> None:
        nonlocal items
        while time.monotonic() < deadline:
            t0 = time.perf_counter()
            status, body = await conn.request("GET", path)
            latencies.append(time.perf_counter() - t0)
            if status != 200:
                raise SystemExit(f"LIST: HTTP {status}: {body[:300]!r}")
            items = len(json.loads(body)["items"])

    await asyncio.gather(*(loop(c) for c in conns))
    print(json.dumps({"lists": pcts(latencies), "items_per_list": items}), flush=True)


# -- the probes --------------------------------------------------------------------------------


async def probe_once(target: Target, method: str, path: str, token: str | None, body: bytes = b"") -> float:
    started = time.perf_counter()
    reader, writer = await asyncio.open_connection("127.0.0.1", target.port, ssl=target.tls)
    auth = f"Authorization: Bearer {token}\r\n" if token else ""
    writer.write((f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                  f"Content-Length: {len(body)}\r\n{auth}Connection: close\r\n\r\n").encode() + body)
    head = await reader.readuntil(b"\r\n\r\n")
    status = int(head[9:12])
    await reader.read()
    writer.close()
    if status != 200:
        raise RuntimeError(f"{method} {path}: HTTP {status}")
    return time.perf_counter() - started


async def probe(target: Target, pool_token: str, stop: asyncio.Event, interval: float) -> dict[str, Any]:
    samples: dict[str, list[float]] = {"healthz": [], "admin_get": [], "pool_heartbeat": []}
    failures: list[str] = []
    lease_rv = ""
    while not stop.is_set():
        for name, method, path, token in (("healthz", "GET", "/healthz", None),
                                          ("admin_get", "GET", f"{SECRETS}/s00000", target.token)):
            try:
                samples[name].append(await probe_once(target, method, path, token))
            except (OSError, RuntimeError, asyncio.IncompleteReadError) as exc:
                failures.append(f"{name}: {exc!r}")
        try:
            lease = {"metadata": {"name": "p1", "resourceVersion": lease_rv},
                     "spec": {"holderIdentity": "p1", "leaseDurationSeconds": 40,
                              "renewTime": time.strftime("%Y-%m-%dT%H:%M:%S.000000Z", time.gmtime())}}
            samples["pool_heartbeat"].append(await probe_once(target, "PUT", LEASE, pool_token,
                                                              json.dumps(lease).encode()))
            conn = Conn("127.0.0.1", target.port, pool_token, target.tls)
            await conn.open()
            _, got = await conn.request("GET", LEASE)
            conn.close()
            lease_rv = json.loads(got)["metadata"]["resourceVersion"]
        except (OSError, RuntimeError, asyncio.IncompleteReadError) as exc:
            failures.append(f"pool_heartbeat: {exc!r}")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), interval)
    return {**{name: pcts(s) for name, s in samples.items()}, "failures": failures[:5],
            "failure_count": len(failures)}


# -- the run -------------------------------------------------------------------------------------


@contextlib.contextmanager
def attacker(*argv: str) -> Iterator[subprocess.Popen[str]]:
    proc = subprocess.Popen([sys.executable, __file__, "--attacker", *argv], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)
    try:
        yield proc
    finally:
        if proc.stdin is not None:
            proc.stdin.close()
        proc.wait(timeout=60)


async def setup(target: Target, pool_token: str, objects: int, labels: dict[str, str]) -> None:
    conn = target.conn()
    await conn.open()
    binding = {"metadata": {"name": "mallory-edit"}, "subjects": [{"kind": "User", "name": USER}],
               "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"}}
    for method, path, body in (("POST", "/api/v1/namespaces", {"metadata": {"name": NAMESPACE}}),
                               ("POST", f"{RBAC}/namespaces/{NAMESPACE}/rolebindings", binding)):
        status, payload = await conn.request(method, path, json.dumps(body).encode())
        assert status == 201, payload
    for i in range(objects):
        secret = {"metadata": {"name": f"s{i:05d}", "labels": labels}, "stringData": {"k": "v" * 64}}
        status, payload = await conn.request("POST", SECRETS, json.dumps(secret).encode())
        assert status == 201, payload
    conn.close()
    pool = Conn("127.0.0.1", target.port, pool_token, target.tls)
    await pool.open()
    lease = {"metadata": {"name": "p1"}, "spec": {"holderIdentity": "p1", "leaseDurationSeconds": 40}}
    status, payload = await pool.request("POST", LEASE.rsplit("/", 1)[0], json.dumps(lease).encode())
    assert status == 201, payload
    pool.close()


async def during(target: Target, pool_token: str, interval: float, proc: subprocess.Popen[str],
                 hold_for: float) -> tuple[dict[str, Any], dict[str, Any]]:
    """Probe while the attacker ramps up, then for ``hold_for`` seconds of its hold."""
    assert proc.stdout is not None
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    ramp_probe = asyncio.ensure_future(probe(target, pool_token, stop, interval))
    report = json.loads(await loop.run_in_executor(None, proc.stdout.readline))
    stop.set()
    ramp = await ramp_probe
    stop = asyncio.Event()
    hold_probe = asyncio.ensure_future(probe(target, pool_token, stop, interval))
    await asyncio.sleep(hold_for)  # the length of the measurement, not a synchronisation
    stop.set()
    return {"attacker": report, "probes_during_ramp": ramp}, await hold_probe


async def run(args: argparse.Namespace, target: Target, ca: str, tokens: dict[str, str]) -> dict[str, Any]:
    try:
        from ironpool.api.selectors import MAX_SELECTOR_BYTES, MAX_SELECTOR_TERMS
    except ImportError:  # an ironpool from before the bounds (PYTHONPATH), to measure what they changed
        MAX_SELECTOR_BYTES, MAX_SELECTOR_TERMS = 8 * 1024, 256
    selector, labels = largest_selector(MAX_SELECTOR_TERMS, MAX_SELECTOR_BYTES)
    await setup(target, tokens["pool"], args.objects, labels)
    out: dict[str, Any] = {}
    with attacker("watches", str(target.port), tokens["user"], str(args.watches), str(args.hog_concurrency),
                  ca) as proc:
        ramp, hold = await during(target, tokens["pool"], args.interval, proc, args.seconds)
        out["watch_hold"] = {**ramp, "probes_during_hold": hold}
    with attacker("selectors", str(target.port), tokens["user"], str(args.selector_clients),
                  str(args.seconds), ca, selector) as proc:
        assert proc.stdout is not None
        loop = asyncio.get_running_loop()
        json.loads(await loop.run_in_executor(None, proc.stdout.readline))
        cpu = cpu_seconds(target.pid)
        stop = asyncio.Event()
        probing = asyncio.ensure_future(probe(target, tokens["pool"], stop, args.interval))
        report = json.loads(await loop.run_in_executor(None, proc.stdout.readline))
        stop.set()
        cpu = cpu_seconds(target.pid) - cpu
        lists = report["lists"]
        out["selectors"] = {
            "selector_terms": MAX_SELECTOR_TERMS, "selector_bytes": len(selector),
            "clients": args.selector_clients, "objects": args.objects,
            "items_per_list": report["items_per_list"], "lists": lists,
            "server_cpu_ms_per_list": round(cpu / max(1, lists["n"]) * 1000, 2),
            "probes_during": await probing,
        }
    over = ",".join(f"k{i}=v" for i in range(15_000))
    conn = Conn("127.0.0.1", target.port, tokens["user"], target.tls)
    await conn.open()
    t0 = time.perf_counter()
    status, _ = await conn.request("GET", f"{SECRETS}?labelSelector={over}")
    out["selectors"]["over_the_bound"] = {"terms": 15_000, "status": status,
                                         "answered_ms": round((time.perf_counter() - t0) * 1000, 2)}
    conn.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--watches", type=int, default=10_000)
    parser.add_argument("--hog-concurrency", type=int, default=200,
                        help="connections the attacker opens at once")
    parser.add_argument("--selector-clients", type=int, default=8)
    parser.add_argument("--objects", type=int, default=1000, help="Secrets in the attacker's namespace")
    parser.add_argument("--seconds", type=float, default=20.0, help="how long each hold is measured")
    parser.add_argument("--interval", type=float, default=0.05, help="seconds between rounds of probes")
    parser.add_argument("--attacker", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))  # the attacker holds thousands of sockets
    if args.attacker:
        kind, port, token, *rest = args.attacker
        if kind == "watches":
            uvloop.run(hold_watches(int(port), token, int(rest[0]), int(rest[1]), rest[2]))
        else:
            uvloop.run(list_with_selector(int(port), token, int(rest[0]), float(rest[1]), rest[2], rest[3]))
        return
    tokens = {"user": secrets.token_hex(16), "pool": secrets.token_hex(16)}
    lines = (f"{tokens['user']},{USER},2\n"
             f"{tokens['pool']},{POOL},3,\"compute.ironcore.dev:system:machinepools\"\n")
    load = os.getloadavg()[0]
    with serving(https=True, more_tokens=lines) as (_, target):
        assert target.ca_file is not None
        result = uvloop.run(run(args, target, target.ca_file, tokens))
    result.update(cores=os.cpu_count(), load_before=round(load, 2), watches_attempted=args.watches,
                  note="attacker processes, prober and apiserver share the same cores; limits at their "
                       "defaults (1,000 watches and 2,048 connections per user)")
    print(json.dumps(result))


if __name__ == "__main__":
    main()
