"""Benchmark the libvirt machine runtime over IRI on real libvirtd/QEMU; prints one JSON line.

- ``create_to_running``: CreateMachine from the tiny image with power on; the RPC returns once the
  domain is running (guest boot excluded). Each machine is deleted (untimed) before the next
  create, so only one TCG guest runs at a time on a small host.
- ``list_200``: ListMachines with 200 machines defined (created powered off: a defined, stopped
  domain costs no memory or CPU), all of them and by label selector.
- ``status``: Status with those 200 machines defined.

Usage: python bench/iri_runtime.py [--creates 10] [--machines 200] [--keep-workdir]
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import grpc
from ironpool.iri.gen.machine.v1alpha1 import api_pb2 as mpb
from ironpool.iri.gen.machine.v1alpha1 import api_pb2_grpc as mgrpc

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # for tests.helpers

REPO = Path(__file__).resolve().parents[1]
CLASSES = """\
- apiVersion: compute.ironcore.dev/v1alpha1
  kind: MachineClass
  metadata: {name: tiny}
  capabilities: {cpu: "1", memory: 128Mi}
"""


def _ms(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {
        "p50_ms": round(statistics.median(ordered) * 1000, 2),
        "p90_ms": round(ordered[min(len(ordered) - 1, int(len(ordered) * 0.9))] * 1000, 2),
        "max_ms": round(ordered[-1] * 1000, 2),
        "n": len(ordered),
    }


def _timed(fn: Callable[[], object], n: int) -> list[float]:
    out = []
    for _ in range(n):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return out


def _request(label: str, power: int, idx: int) -> mpb.CreateMachineRequest:
    spec = mpb.MachineSpec(power=power)  # type: ignore[arg-type]
    spec.volumes.add(name="root", device="oda", local_disk=mpb.LocalDisk(image=mpb.ImageSpec(image="tiny")))
    setattr(spec, "class", "tiny")
    machine = mpb.Machine(spec=spec)
    machine.metadata.labels.update({"ironpool.dev/bench": label, "idx": str(idx), "group": str(idx % 10)})
    return mpb.CreateMachineRequest(machine=machine)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--creates", type=int, default=10)
    parser.add_argument("--machines", type=int, default=200)
    parser.add_argument("--keep-workdir", action="store_true", help="keep the runtime's files and log")
    parser.add_argument("--runtime-log-level", default="warning", choices=["debug", "info", "warning"])
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="ibench-"))
    images = Path(os.environ.get("IRONPOOL_TEST_IMAGES", "/var/cache/ironpool/test-images"))
    subprocess.run(
        ["bash", str(REPO / "scripts" / "build-tiny-image.sh"), str(images)],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    (workdir / "classes.yaml").write_text(CLASSES)
    sock = workdir / "m.sock"
    log = open(workdir / "runtime.log", "wb")  # noqa: SIM115 - handed to the child
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ironpool.cli.main",
            "libvirt-runtime",
            "--classes",
            str(workdir / "classes.yaml"),
            "--images",
            str(images),
            "--state-dir",
            str(workdir / "state"),
            "--address",
            f"unix://{sock}",
            "--streaming-address",
            "127.0.0.1:0",
            "--shutdown-timeout",
            "1",
            "--log-level",
            args.runtime_log_level,
        ],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    channel = grpc.insecure_channel(f"unix:{sock}")
    stub = mgrpc.MachineRuntimeStub(channel)
    label = secrets.token_hex(4)
    result: dict[str, object] = {
        "bench": "iri_runtime",
        "host_cpus": os.cpu_count(),
        "loadavg_1m": os.getloadavg()[0],
    }
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                stub.Version(mpb.VersionRequest(), timeout=1)
                break
            except grpc.RpcError:
                if time.monotonic() > deadline or proc.poll() is not None:
                    raise SystemExit((workdir / "runtime.log").read_text()[-2000:]) from None
                time.sleep(0.05)

        # CreateMachine -> domain running (guest boot excluded), deleted right after.
        create: list[float] = []
        for i in range(args.creates):
            t = time.perf_counter()
            m = stub.CreateMachine(_request(label, mpb.POWER_ON, -1 - i)).machine
            create.append(time.perf_counter() - t)
            if m.status.state != mpb.MACHINE_RUNNING:
                raise SystemExit(f"machine {m.metadata.id} is {m.status.state}, not running")
            stub.DeleteMachine(mpb.DeleteMachineRequest(machine_id=m.metadata.id))
            # Not timed: let the teardown finish so the next create does not share the CPUs with it.
            one = mpb.ListMachinesRequest(filter=mpb.MachineFilter(id=m.metadata.id))
            while stub.ListMachines(one).machines:
                time.sleep(0.05)
        result["create_to_running"] = _ms(create)

        # 200 machines defined, powered off.
        t = time.perf_counter()
        ids = [
            stub.CreateMachine(_request(label, mpb.POWER_OFF, i)).machine.metadata.id
            for i in range(args.machines)
        ]
        result["define_powered_off"] = {"n": len(ids), "total_s": round(time.perf_counter() - t, 2)}
        all_req = mpb.ListMachinesRequest(
            filter=mpb.MachineFilter(label_selector={"ironpool.dev/bench": label})
        )
        listed = stub.ListMachines(all_req).machines
        assert len(listed) >= args.machines, len(listed)
        result[f"list_{args.machines}"] = _ms(
            _timed(lambda: stub.ListMachines(mpb.ListMachinesRequest()), 30)
        )
        group_req = mpb.ListMachinesRequest(filter=mpb.MachineFilter(label_selector={"group": "3"}))
        result[f"list_{args.machines}_by_label"] = _ms(_timed(lambda: stub.ListMachines(group_req), 30))
        result["status"] = _ms(_timed(lambda: stub.Status(mpb.StatusRequest()), 50))

        t = time.perf_counter()
        for mid in ids:
            stub.DeleteMachine(mpb.DeleteMachineRequest(machine_id=mid))
        while stub.ListMachines(all_req).machines:
            time.sleep(0.1)
        result["delete_all_s"] = round(time.perf_counter() - t, 2)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
        log.close()
        channel.close()
        _cleanup(label)
        if not args.keep_workdir:
            shutil.rmtree(workdir, ignore_errors=True)
    if args.keep_workdir:
        result["workdir"] = str(workdir)
    print(json.dumps(result))


def _cleanup(label: str) -> None:
    """Remove any domain this run left behind (only ours: matched by the bench label)."""
    from tests.helpers.runtimes import labelled_domains, remove_domains

    remove_domains(labelled_domains("ironpool.dev/bench", label))


if __name__ == "__main__":
    main()
