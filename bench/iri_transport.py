"""Benchmark: IRI call latency over unix://, tcp:// and ssh:// (a throwaway sshd on loopback).

A small in-process MachineRuntime serves ``Version`` and ``ListMachines`` (100 machines with
labels, volumes and NICs); the client is ironpool's ``MachineRuntimeClient``. Prints one JSON line
with p50/p99 latencies (ms) per transport and the SSH tunnel set-up time.

    .venv/bin/python bench/iri_transport.py [--calls 500]
"""

from __future__ import annotations

import argparse
import getpass
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
from ironpool.iri.client import MachineRuntimeClient
from ironpool.iri.gen.machine.v1alpha1 import api_pb2 as mpb
from ironpool.iri.gen.machine.v1alpha1 import api_pb2_grpc as mgrpc
from ironpool.iri.ssh import SSHOptions
from ironpool.ports import free_port


class _Runtime(mgrpc.MachineRuntimeServicer):
    def __init__(self, n: int) -> None:
        machines = []
        for i in range(n):
            m = mpb.Machine()
            m.metadata.id = f"m{i:05d}"
            m.metadata.labels.update({"machinepoollet.ironcore.dev/machine-uid": f"uid-{i}", "app": "web"})
            setattr(m.spec, "class", "x3-small")
            m.spec.volumes.add(name="root", device="oda").local_disk.size_bytes = 10 << 30
            m.spec.network_interfaces.add(name="eth0", network_id="net-1", ips=["10.0.0.1"])
            machines.append(m)
        self.resp = mpb.ListMachinesResponse(machines=machines)

    def Version(self, request: Any, context: Any) -> mpb.VersionResponse:
        return mpb.VersionResponse(runtime_name="bench", runtime_version="0.0.0")

    def ListMachines(self, request: Any, context: Any) -> mpb.ListMachinesResponse:
        return self.resp


def _percentiles(samples: list[float]) -> dict[str, float]:
    s = sorted(samples)
    return {"p50_ms": round(s[len(s) // 2] * 1000, 3), "p99_ms": round(s[int(len(s) * 0.99) - 1] * 1000, 3)}


def _measure(client: MachineRuntimeClient, calls: int) -> dict[str, Any]:
    client.version()  # connect
    version, listing = [], []
    for _ in range(calls):
        t0 = time.perf_counter()
        client.version()
        version.append(time.perf_counter() - t0)
    for _ in range(max(1, calls // 5)):
        t0 = time.perf_counter()
        client.list_machines()
        listing.append(time.perf_counter() - t0)
    return {"version": _percentiles(version), "list_100_machines": _percentiles(listing)}


def _start_sshd(d: Path) -> tuple[subprocess.Popen[bytes], int]:
    for name in ("host", "client"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(d / name)], check=True)
    (d / "authorized_keys").write_text((d / "client.pub").read_text())
    port = free_port()
    host_pub = " ".join((d / "host.pub").read_text().split()[:2])
    (d / "known_hosts").write_text(f"[127.0.0.1]:{port} {host_pub}\n")
    (d / "sshd_config").write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {d}/host\nPidFile {d}/sshd.pid\n"
        f"AuthorizedKeysFile {d}/authorized_keys\nPasswordAuthentication no\nStrictModes no\nUsePAM no\n"
        "AllowStreamLocalForwarding yes\n"
    )
    os.makedirs("/run/sshd", exist_ok=True)
    proc = subprocess.Popen(
        ["/usr/sbin/sshd", "-D", "-e", "-f", str(d / "sshd_config")], stderr=subprocess.DEVNULL
    )
    deadline = time.monotonic() + 15
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as c:
                if c.recv(8).startswith(b"SSH-"):
                    return proc, port
        except OSError:
            time.sleep(0.02)
    proc.kill()
    raise RuntimeError("sshd did not start")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=500)
    args = parser.parse_args()
    d = Path(tempfile.mkdtemp(prefix="iri-bench-"))
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=4))
    mgrpc.add_MachineRuntimeServicer_to_server(_Runtime(100), server)
    sock = str(d / "iri.sock")
    server.add_insecure_port(f"unix:{sock}")
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    sshd, ssh_port = _start_sshd(d)
    result: dict[str, Any] = {"bench": "iri_transport", "calls": args.calls}
    try:
        for name, endpoint in (("unix", f"unix://{sock}"), ("tcp", f"tcp://127.0.0.1:{port}")):
            with MachineRuntimeClient(endpoint) as c:
                result[name] = _measure(c, args.calls)
        opts = SSHOptions(
            key_filename=str(d / "client"),
            known_hosts=str(d / "known_hosts"),
            allow_agent=False,
            look_for_keys=False,
        )
        t0 = time.perf_counter()
        with MachineRuntimeClient(
            f"ssh://{getpass.getuser()}@127.0.0.1:{ssh_port}{sock}", ssh_options=opts
        ) as c:
            c.version()
            setup = time.perf_counter() - t0
            result["ssh"] = _measure(c, args.calls)
            result["ssh"]["tunnel_setup_ms"] = round(setup * 1000, 1)
    finally:
        sshd.terminate()
        sshd.wait()
        server.stop(None)
        shutil.rmtree(d, ignore_errors=True)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
