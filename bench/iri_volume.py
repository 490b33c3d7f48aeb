"""Benchmark: the libvirt volume runtime over IRI gRPC (prints one JSON line).

Starts a real ``ironpool volume-runtime`` on qemu:///system with a throw-away ``dir`` pool, creates
``--volumes`` qcow2 volumes, then times ListVolumes (all / by id / by label), Status, ExpandVolume,
a kill -9 + restart with every volume, and DeleteVolume. Latencies in milliseconds.

Usage: python bench/iri_volume.py [--volumes 200] [--calls 300]
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import grpc
import libvirt
from ironpool.iri.gen.volume.v1alpha1 import api_pb2 as vpb
from ironpool.iri.gen.volume.v1alpha1 import api_pb2_grpc as vgrpc

CLASSES = """\
apiVersion: storage.ironcore.dev/v1alpha1
kind: VolumeClass
metadata: {name: fast}
capabilities: {tps: 100Mi, iops: 1000}
"""
MiB = 1 << 20


def percentiles(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "p50_ms": round(statistics.median(ordered) * 1000, 3),
        "p99_ms": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))] * 1000, 3),
        "per_s": round(len(ordered) / sum(ordered), 1),
    }


def timed(fn: Callable[[], object], n: int) -> list[float]:
    out = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return out


def start(cmd: list[str], address: str, log: Path) -> tuple[subprocess.Popen[bytes], grpc.Channel, float]:
    began = time.perf_counter()
    with open(log, "ab") as fh:
        proc = subprocess.Popen(cmd, stdout=fh, stderr=subprocess.STDOUT)
    channel = grpc.insecure_channel(address)
    stub = vgrpc.VolumeRuntimeStub(channel)
    deadline = time.monotonic() + 60
    while True:
        if proc.poll() is not None:
            sys.exit(f"runtime exited: {log.read_text()[-2000:]}")
        try:
            stub.Version(vpb.VersionRequest(), timeout=1)
            return proc, channel, time.perf_counter() - began
        except grpc.RpcError:
            if time.monotonic() > deadline:
                sys.exit("runtime did not start")
            time.sleep(0.02)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--volumes", type=int, default=200)
    parser.add_argument("--calls", type=int, default=300)
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="ivb-"))
    pool_name = f"ironpool-bench-{secrets.token_hex(4)}"
    (work / "classes.yaml").write_text(CLASSES)
    address = f"unix://{work}/vr.sock"
    cmd = [
        sys.executable,
        "-m",
        "ironpool.cli.main",
        "volume-runtime",
        "--storage-pool",
        pool_name,
        "--pool-path",
        str(work / "pool"),
        "--classes",
        str(work / "classes.yaml"),
        "--address",
        address,
        "--log-level",
        "WARNING",
    ]
    proc, channel, _ = start(cmd, address, work / "runtime.log")
    result: dict[str, object] = {"bench": "iri_volume", "volumes": args.volumes, "cpus": os.cpu_count()}
    try:
        stub = vgrpc.VolumeRuntimeStub(channel)
        ids: list[str] = []

        def create() -> None:
            spec = vpb.VolumeSpec(resources=vpb.VolumeResources(storage_bytes=64 * MiB))
            setattr(spec, "class", "fast")
            vol = vpb.Volume(spec=spec)
            vol.metadata.labels.update({"bench": "1", "n": str(len(ids))})
            ids.append(stub.CreateVolume(vpb.CreateVolumeRequest(volume=vol)).volume.metadata.id)

        result["create"] = percentiles(timed(create, args.volumes))
        result["list_all"] = percentiles(
            timed(lambda: stub.ListVolumes(vpb.ListVolumesRequest()), args.calls)
        )
        result["list_by_id"] = percentiles(
            timed(
                lambda: stub.ListVolumes(vpb.ListVolumesRequest(filter=vpb.VolumeFilter(id=ids[7]))),
                args.calls,
            )
        )
        result["list_by_label"] = percentiles(
            timed(
                lambda: stub.ListVolumes(
                    vpb.ListVolumesRequest(filter=vpb.VolumeFilter(label_selector={"n": "7"}))
                ),
                args.calls,
            )
        )
        result["status"] = percentiles(timed(lambda: stub.Status(vpb.StatusRequest()), args.calls))
        sizes = iter(range(1, 10**6))
        result["expand"] = percentiles(
            timed(
                lambda: stub.ExpandVolume(
                    vpb.ExpandVolumeRequest(
                        volume_id=ids[0],
                        resources=vpb.VolumeResources(storage_bytes=(64 + next(sizes)) * MiB),
                    )
                ),
                50,
            )
        )

        proc.send_signal(signal.SIGKILL)
        proc.wait()
        channel.close()
        proc, channel, restart_s = start(cmd, address, work / "runtime.log")
        stub = vgrpc.VolumeRuntimeStub(channel)
        assert len(stub.ListVolumes(vpb.ListVolumesRequest()).volumes) == args.volumes
        result["restart_to_serving_ms"] = round(restart_s * 1000, 1)

        pending = list(ids)
        result["delete"] = percentiles(
            timed(lambda: stub.DeleteVolume(vpb.DeleteVolumeRequest(volume_id=pending.pop())), len(ids))
        )
    finally:
        proc.terminate()
        proc.wait()
        channel.close()
        conn = libvirt.open("qemu:///system")
        try:
            pool = conn.storagePoolLookupByName(pool_name)
            pool.destroy()  # its folder goes with rmtree below
            pool.undefine()
        finally:
            conn.close()
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
