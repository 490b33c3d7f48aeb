"""OS image benchmark on this host: a real registry (docker-registry on loopback), real skopeo pulls,
the real machine runtime on libvirtd. Prints one JSON line.

* ``first_pull``: pulling a 1 GiB disk image (random bytes, so nothing compresses) from the loopback
  registry into an empty cache: seconds and MB/s (target: at least 200 MB/s). Includes what the
  runtime does around skopeo: the manifest, the space check, the disk check (qemu-img), moving the
  verified blob into the cache.
* ``skopeo_alone``: the same copy by skopeo by itself, right after: what the tool costs here, so the
  difference is the runtime's own.
* ``root_disk``: creating a root disk from a cached base (a qcow2 overlay, backing format recorded),
  p50 and max over ``--disks`` disks, for the 1 GiB base and a 64 MiB one (target: at most 0.2 s
  whatever the image size: an overlay, not a copy).
* ``ten_machines``: ten Machines (CreateMachine, power Off so nothing boots and writes) from the
  1 GiB image through the machine runtime: how long each create took, and the disk used per extra
  Machine (its overlay and its folder) against the base's size.

    .venv/bin/python bench/images.py [--size-mib 1024] [--disks 20] [--machines 10]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # for tests.*

from ironpool.allinone.registry import LocalRegistry  # noqa: E402
from ironpool.iri.gen.machine.v1alpha1 import api_pb2 as mpb  # noqa: E402
from ironpool.runtime.images import open_resolver  # noqa: E402
from ironpool.runtime.images.publish import ImageFiles, push  # noqa: E402
from ironpool.runtime.machine import disks  # noqa: E402

from tests.helpers.qemu_dirs import qemu_tmpdir  # noqa: E402

MiB = 1 << 20


def make_disk(path: Path, size_mib: int) -> None:
    """A raw disk of random bytes (incompressible, every block allocated)."""
    with open(path, "wb") as f:
        for _ in range(size_mib):
            f.write(os.urandom(MiB))


def used(path: Path) -> int:
    """Bytes on disk under ``path`` (allocated blocks, as du counts them)."""
    if path.is_file():
        return path.stat().st_blocks * 512
    return sum(p.stat().st_blocks * 512 for p in path.rglob("*") if p.is_file())


def root_disks(base: Path, fmt: str, size: int, count: int, work: Path) -> dict[str, float]:
    times = []
    for i in range(count):
        t = time.perf_counter()
        disks.create_overlay(work / f"o{i}.qcow2", base, fmt, size)
        times.append(time.perf_counter() - t)
    return {"p50_s": round(statistics.median(times), 4), "max_s": round(max(times), 4)}


def ten_machines(resolver: Any, ref: str, count: int, work: Path) -> dict[str, Any]:
    from ironpool.runtime import libvirt_util
    from ironpool.runtime.machine.classes import MachineClassSpec
    from ironpool.runtime.machine.domain_xml import DomainOptions
    from ironpool.runtime.machine.driver import MachineDriver
    from ironpool.runtime.machine.host import Host

    host = Host("qemu:///system")
    dtype = libvirt_util.choose_domain_type(host.conn, "auto")
    driver = MachineDriver(host, {"c": MachineClassSpec("c", {"cpu": 1, "memory": 128 * MiB})}, resolver,
                           work / "state", options=DomainOptions(domain_type=dtype))
    driver.start()
    ids: list[str] = []
    times = []
    try:
        for _ in range(count):
            spec = mpb.MachineSpec(power=mpb.POWER_OFF)
            setattr(spec, "class", "c")
            spec.volumes.add(name="root", device="oda",
                             local_disk=mpb.LocalDisk(size_bytes=2 << 30, image=mpb.ImageSpec(image=ref)))
            machine = mpb.Machine(spec=spec)
            machine.metadata.labels["ironpool.dev/bench"] = "images"
            t = time.perf_counter()
            ids.append(driver.create_machine(machine).rec.id)
            times.append(time.perf_counter() - t)
        per_machine = [used(driver.machine_dir(i)) for i in ids]
        return {"domain_type": dtype, "create_p50_s": round(statistics.median(times), 3),
                "create_max_s": round(max(times), 3),
                "disk_used_per_extra_machine_bytes": int(statistics.median(per_machine[1:])),
                "disk_used_all_machines_bytes": sum(per_machine)}
    finally:
        for i in ids:
            driver.delete_machine(i)
        deadline = time.monotonic() + 60
        while driver.list_machines() and time.monotonic() < deadline:
            time.sleep(0.2)
        driver.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--size-mib", type=int, default=1024)
    parser.add_argument("--disks", type=int, default=20)
    parser.add_argument("--machines", type=int, default=10)
    args = parser.parse_args()
    work = qemu_tmpdir("ipbench-img-")
    reg = LocalRegistry(Path(tempfile.mkdtemp(prefix="ipbench-reg-")))
    reg.start()
    out: dict[str, Any] = {"bench": "images", "size_mib": args.size_mib}
    try:
        big, small = work / "big.raw", work / "small.qcow2"
        make_disk(big, args.size_mib)
        subprocess.run(["qemu-img", "create", "-q", "-f", "qcow2", str(small), "64M"], check=True)
        t = time.perf_counter()
        push(f"{reg.address}/bench/big:1", ImageFiles.from_path(big))
        out["push_s"] = round(time.perf_counter() - t, 2)
        push(f"{reg.address}/bench/small:1", ImageFiles.from_path(small))
        big.unlink()
        subprocess.run(["sync"], check=True)

        resolver = open_resolver(None, work / "cache", wait=3600)
        resolver.start()
        t = time.perf_counter()
        img = resolver.resolve(f"{reg.address}/bench/big:1")
        took = time.perf_counter() - t
        out["first_pull"] = {"s": round(took, 2), "MB_per_s": round(args.size_mib * MiB / took / 1e6, 1)}
        t = time.perf_counter()
        subprocess.run(["skopeo", "copy", "-q", "--src-tls-verify=false", f"docker://{reg.address}/bench/big:1",
                        f"dir:{work / 'bare'}"], check=True)
        took = time.perf_counter() - t
        shutil.rmtree(work / "bare")
        out["skopeo_alone"] = {"s": round(took, 2), "MB_per_s": round(args.size_mib * MiB / took / 1e6, 1)}
        t = time.perf_counter()
        resolver.resolve(f"{reg.address}/bench/big:1")
        out["cached_tag_resolve_s"] = round(time.perf_counter() - t, 3)
        small_img = resolver.resolve(f"{reg.address}/bench/small:1")
        assert img.path is not None and small_img.path is not None
        (work / "o").mkdir()
        out["root_disk"] = {
            f"{args.size_mib}MiB": root_disks(img.path, img.format, 2 << 30, args.disks, work / "o"),
            "64MiB": root_disks(small_img.path, small_img.format, 2 << 30, args.disks, work / "o"),
        }
        shutil.rmtree(work / "o")
        out["base_bytes"] = used(img.path)
        out["ten_machines"] = ten_machines(resolver, f"{reg.address}/bench/big:1@{img.digest}",
                                           args.machines, work)
        resolver.close()
    finally:
        reg.stop()
        shutil.rmtree(reg.root, ignore_errors=True)
        shutil.rmtree(work, ignore_errors=True)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
