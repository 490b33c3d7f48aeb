"""Benchmark of a list of many large objects: the apiserver's peak resident memory and the time.

It starts ``ironpool apiserver`` (on a fresh SQLite file, or on a 1-member etcd cluster with
``--store etcd``), creates ``--objects`` Secrets of about ``--size`` KiB each, lets the server
settle, resets the kernel's record of its peak resident size (``/proc/PID/clear_refs``), lists
them all in one request (the body is read as it comes and counted, not kept), and reads the peak
back (``VmHWM``). Prints one JSON line per backend: the list's size, the time to the last byte,
the server's resident size before the list and its peak while the list was written.

``--core DIR`` runs the server from another checkout's ``core`` (an export of ``main``, to compare
before and after), e.g.::

    git archive main core | tar -x -C /tmp/main-code
    nice -n 19 .venv/bin/python bench/list_memory.py --objects 10000 --size 100 --core /tmp/main-code/core
    nice -n 19 .venv/bin/python bench/list_memory.py --objects 10000 --size 100 --store etcd

Run it as the owner of the server process (``clear_refs`` needs it). Creating 10,000 objects of
100 KiB writes about 1.4 GB of JSON: minutes on a loaded machine.
"""

from __future__ import annotations

import argparse
import base64
import contextlib
import http.client
import json
import os
import secrets
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
from ironpool.ports import free_port

NS = "bench-lists"
SECRETS = f"/api/v1/namespaces/{NS}/secrets"


def _status(pid: int, field: str) -> int:
    """A size from ``/proc/PID/status`` (``VmRSS``, ``VmHWM``) in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {field} in /proc/{pid}/status")


class Server:
    """``ironpool apiserver`` on ``store_url`` (plain HTTP on loopback), from ``core`` if given."""

    def __init__(self, work: Path, store_url: str, core: Path | None) -> None:
        token = secrets.token_hex(16)
        tokens = work / "tokens.csv"
        tokens.write_text(f'{token},admin,1,"system:masters"\n')
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.headers = {"Authorization": f"Bearer {token}"}
        env = {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"}
        if core is not None:
            env["PYTHONPATH"] = str(core)
        self.log = work / f"apiserver-{self.port}.log"
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "ironpool.cli.main", "apiserver", "--store", store_url,
                 "--listen", f"127.0.0.1:{self.port}", "--token-file", str(tokens)],
                stdout=log, stderr=subprocess.STDOUT, env=env)
        deadline = time.monotonic() + 60
        while True:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{self.url}/readyz", timeout=0.5).status_code == 200:
                    return
            if self.proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"apiserver did not start: {self.log.read_text()[-2000:]}")
            time.sleep(0.2)

    def stop(self) -> None:
        self.proc.terminate()
        try:
            self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


def seed(server: Server, objects: int, size: int, writers: int) -> float:
    """Create the namespace and the Secrets; the seconds it took."""
    started = time.monotonic()
    pad = base64.b64encode(b"x" * (size * 3 // 4)).decode()
    with httpx.Client(base_url=server.url, headers=server.headers, timeout=120) as client:
        client.post("/api/v1/namespaces", json={"apiVersion": "v1", "kind": "Namespace",
                                                "metadata": {"name": NS}}).raise_for_status()

        def create(i: int) -> None:
            body = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": f"s{i:06d}"},
                    "data": {"pad": pad}}
            client.post(SECRETS, json=body).raise_for_status()

        with ThreadPoolExecutor(writers) as pool:
            list(pool.map(create, range(objects)))
    return time.monotonic() - started


def list_once(server: Server) -> dict[str, Any]:
    """List every Secret in one request; the body's size and item count, the time, the peak."""
    pid = server.proc.pid
    rss_before = _status(pid, "VmRSS")
    Path(f"/proc/{pid}/clear_refs").write_text("5")  # VmHWM from now on
    started = time.monotonic()
    size = items = 0
    tail = b""
    marker = b'"kind":"Secret"'  # once per item (the list itself is a SecretList)
    # http.client reads a chunked body at socket speed (httpx's pure-Python framing took 3x longer).
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=600)
    try:
        conn.request("GET", SECRETS, headers=server.headers)
        response = conn.getresponse()
        if response.status != 200:
            raise RuntimeError(f"list answered {response.status}: {response.read()[:500]!r}")
        framing = "content-length" if response.getheader("Content-Length") else "chunked"
        while chunk := response.read(1 << 20):
            size += len(chunk)
            window = tail + chunk
            items += window.count(marker)
            tail = window[-(len(marker) - 1):]  # a marker cut by a chunk boundary is counted once
    finally:
        conn.close()
    ends = tail.endswith(b"]}")
    seconds = time.monotonic() - started
    return {"list_bytes": size, "items": items, "whole": ends, "framing": framing,
            "list_seconds": round(seconds, 2), "rss_before_mib": rss_before >> 20,
            "peak_rss_mib": _status(pid, "VmHWM") >> 20,
            "peak_growth_mib": (_status(pid, "VmHWM") - rss_before) >> 20}


@contextlib.contextmanager
def store_url(kind: str, work: Path) -> Iterator[str]:
    if kind == "sqlite":
        yield f"sqlite://{work / 'ironpool.db'}"
        return
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from tests.helpers.etcd import etcd_cluster

    with etcd_cluster(1, fast=True) as cluster:
        yield cluster.url("/bench-lists")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--objects", type=int, default=10_000)
    parser.add_argument("--size", type=int, default=100, help="KiB of JSON per object")
    parser.add_argument("--store", choices=["sqlite", "etcd"], default="sqlite")
    parser.add_argument("--writers", type=int, default=8, help="clients creating the objects")
    parser.add_argument("--core", type=Path, help="run the server from this checkout's core/")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="ironpool-list-bench-") as tmp, \
            store_url(args.store, Path(tmp)) as url:
        server = Server(Path(tmp), url, args.core)
        try:
            seeded = seed(server, args.objects, args.size * 1024, args.writers)
            time.sleep(5)  # the server's memory settles after the burst (it trims every 2 s)
            result = list_once(server)
        finally:
            server.stop()
    print(json.dumps({"store": args.store, "code": str(args.core or "this checkout"),
                      "objects": args.objects, "size_kib": args.size, "seed_seconds": round(seeded, 1),
                      **result}))


if __name__ == "__main__":
    main()
