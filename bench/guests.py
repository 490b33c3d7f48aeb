"""Benchmark real guests: CreateMachine of a Debian machine (``--image``, debian-12) to SSH answering
with the key its cloud-init user data handed over; prints one JSON line.

- ``one``: one machine at a time (``--runs`` of them, each deleted before the next): p50 and max
  of create -> ``ssh root@127.0.0.1 -p PORT true`` succeeding (target p50 <= 30 s);
- ``ten_at_once``: ``--at-once`` machines created together: when the last answered (target <= 180 s);
  the runtime boots at most ``--max-booting`` of them at once (the host's CPUs unless told; 0: all
  at once) and starts each of the others when an earlier guest's boot settled, so the later ones
  wait for a slot, counted from their CreateMachine like the rest. A machine that does not answer
  by ``--timeout`` is listed with its serial console's last lines (where its boot stopped), the
  others' figures are still printed, and the exit status is 1;
- ``domain_type``: ``kvm`` or ``qemu`` (TCG): guests here are emulated, where KVM works the figures
  are bound by the guest's boot instead;
- ``boot``: for the first machine of ``one``, the guest's own view (``systemd-analyze``): kernel and
  userspace time, and when cloud-init's stages finished;
- ``qemu_cpu_s``: the CPU its QEMU process used, for the first machine of ``one`` when SSH answered
  and when cloud-init had finished, and for ``ten_at_once`` per machine (mean) when the last answered,
  with ``host_busy_pct``, the host's CPU busy over that phase: where it is near 100, the figure is
  bound by CPU (emulated guests sharing the host's cores), not by waits.

- ``build``: ``ironpool image build IMAGE`` into the catalog (instant when its recipe is
  unchanged: ``cached``); with ``--build-cold``, first into an empty folder with an empty package
  cache (everything downloaded from Debian's mirror), then once more there (target: <= 90 s, and
  not repeated when cached).

The image comes from that catalog. Each machine has a user-mode NIC with an address of
its own (from 198.18.0.0/15, which nothing routes) and SSH forwarded on 127.0.0.1, the only address
this talks to.

Usage: python bench/guests.py [--image debian-12] [--runs 3] [--at-once 10] [--memory 512Mi] [--build-cold]
                              [--keep-workdir] [--vcpu-slice-ms 0] [--max-booting 0]
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
import threading
import time
import xml.etree.ElementTree as ET
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import grpc
from ironpool.iri.gen.machine.v1alpha1 import api_pb2 as mpb
from ironpool.iri.gen.machine.v1alpha1 import api_pb2_grpc as mgrpc
from ironpool.runtime.machine import vcpu_slice

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # for tests.helpers

LABEL = "ironpool.dev/bench"
STOP = threading.Event()  # set by SIGTERM: the waiting threads give up, so cleanup runs at once
SSH = ["ssh", "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "BatchMode=yes",
       "-o", "LogLevel=ERROR"]
# QEMU's port forward accepts the TCP connection at once whatever the guest does, so ssh's
# ConnectTimeout bounds the wait for sshd's banner. While the guest has no address yet nothing ever
# answers: short probes keep the figure fine-grained. Once a probe is refused at once, the guest's
# network is up and sshd is next; on an emulated CPU shared with nine other guests its banner can take
# many seconds, so from then on a probe waits that long.
EARLY_CONNECT_TIMEOUT, LATE_CONNECT_TIMEOUT = 3, 60


def _classes(memory: str) -> str:
    return ("- apiVersion: compute.ironcore.dev/v1alpha1\n  kind: MachineClass\n  metadata: {name: debian}\n"
            f"  capabilities: {{cpu: \"1\", memory: {memory}}}\n")


def _request(label: str, idx: int, public_key: str, image: str) -> mpb.CreateMachineRequest:
    spec = mpb.MachineSpec(power=mpb.POWER_ON)
    setattr(spec, "class", "debian")
    spec.volumes.add(name="root", device="oda",
                     local_disk=mpb.LocalDisk(image=mpb.ImageSpec(image=image)))
    address = f"198.18.{20 + idx // 200}.{10 + idx % 200}/24"
    spec.network_interfaces.add(name="eth0", network_id="bench://guests", ips=[address.split("/")[0]],
                                attributes={"addresses": json.dumps([address])})
    spec.ignition_data = ("#cloud-config\ndisable_root: false\n"
                          f"ssh_authorized_keys: [{json.dumps(public_key)}]\n").encode()
    spec.guest_config.hostname = f"bench-{idx}"
    machine = mpb.Machine(spec=spec)
    machine.metadata.labels.update({LABEL: label})
    return mpb.CreateMachineRequest(machine=machine)


def _ssh(endpoint: str, key: Path, command: str, timeout: float = 20,
         connect_timeout: int = LATE_CONNECT_TIMEOUT) -> subprocess.CompletedProcess[str]:
    host, _, port = endpoint.rpartition(":")
    assert host.startswith("127."), host
    return subprocess.run([*SSH, "-o", f"ConnectTimeout={connect_timeout}", "-i", str(key), "-p", port,
                           f"root@{host}", command],
                          capture_output=True, text=True, timeout=timeout, check=False)


def _endpoint(stub: mgrpc.MachineRuntimeStub, machine_id: str) -> str:
    req = mpb.ListMachinesRequest(filter=mpb.MachineFilter(id=machine_id))
    while not STOP.is_set():
        found = stub.ListMachines(req).machines
        if found and found[0].status.network_interfaces and found[0].status.network_interfaces[0].handle:
            return found[0].status.network_interfaces[0].handle.removeprefix("user://")
        # Gently: a machine waiting for a boot slot has none for a minute or more, and ten asking
        # ten times a second would take CPU from the guests booting.
        time.sleep(0.5)
    raise SystemExit("stopped")


def _create_until_ssh(stub: mgrpc.MachineRuntimeStub, label: str, idx: int, key: Path, public: str,
                      image: str, deadline: float) -> tuple[str, float | None]:
    """``(machine id, seconds from CreateMachine to SSH answering)``; None: not by the deadline."""
    t0 = time.monotonic()
    mid = stub.CreateMachine(_request(label, idx, public, image)).machine.metadata.id
    endpoint = _endpoint(stub, mid)
    connect = EARLY_CONNECT_TIMEOUT
    while time.monotonic() < deadline and not STOP.is_set():
        started = time.monotonic()
        try:
            if _ssh(endpoint, key, "true", timeout=connect + 30, connect_timeout=connect).returncode == 0:
                return mid, time.monotonic() - t0
            if time.monotonic() - started < connect:
                connect = LATE_CONNECT_TIMEOUT
        except subprocess.TimeoutExpired:
            pass
        time.sleep(0.5)
    if STOP.is_set():
        raise SystemExit("stopped")
    print(f"machine {mid} ({endpoint}) did not answer SSH in time", file=sys.stderr, flush=True)
    return mid, None


def _console_tail(state: Path, mid: str, lines: int = 8) -> list[str]:
    """The last lines a machine wrote to its serial console: where a boot that never answered stopped."""
    log = state / "machines" / mid / "console.log"
    text = log.read_text(errors="replace") if log.exists() else ""
    return [line.rstrip() for line in text.splitlines() if line.strip()][-lines:]


def _delete_all(stub: mgrpc.MachineRuntimeStub, ids: list[str]) -> None:
    for mid in ids:
        stub.DeleteMachine(mpb.DeleteMachineRequest(machine_id=mid))
    for mid in ids:
        one = mpb.ListMachinesRequest(filter=mpb.MachineFilter(id=mid))
        while stub.ListMachines(one).machines:
            time.sleep(0.2)


def _boot_figures(stub: mgrpc.MachineRuntimeStub, mid: str, key: Path) -> dict[str, object]:
    """The guest's own account of its boot, once it has finished."""
    endpoint = _endpoint(stub, mid)
    out = _ssh(endpoint, key, "cloud-init status --wait >/dev/null; systemd-analyze; "
               "systemd-analyze blame | head -n 8; echo; "
               "systemd-analyze critical-chain ssh.service | tail -n +4",
               timeout=300)
    head, _, chain = out.stdout.partition("\n\n")
    lines = [line.strip() for line in head.splitlines() if line.strip()]
    # critical-chain draws its tree with box-drawing characters: the units and their times without them
    ssh_chain = [line.strip(" \u2514\u2500") for line in chain.splitlines() if line.strip()]
    return {"systemd_analyze": lines[:2], "slowest_units": lines[2:10], "ssh_critical_chain": ssh_chain}


def _qemu_cpu(mid: str) -> float:
    """Seconds of CPU the machine's QEMU process has used."""
    (pid,) = vcpu_slice.qemu_pids(f"ironpool-{mid}")
    fields = Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


def _host_ticks() -> tuple[int, int]:
    """``(busy, total)`` clock ticks of all the host's CPUs so far (``/proc/stat``)."""
    ticks = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle = ticks[3] + ticks[4]  # idle + iowait
    return sum(ticks) - idle, sum(ticks)


def _domain_type(mid: str) -> str:
    import libvirt

    conn = libvirt.open("qemu:///system")
    try:
        return str(ET.fromstring(conn.lookupByName(f"ironpool-{mid}").XMLDesc(0)).get("type"))
    finally:
        conn.close()


def _build(image: str, out: Path, build_cache: Path | None = None) -> dict[str, object]:
    """``ironpool image build IMAGE`` into ``out``: seconds, and whether it came from the cache."""
    cmd = [sys.executable, "-m", "ironpool.cli.main", "image", "build", image, "--images", str(out),
           "-o", "json"]
    if build_cache is not None:
        cmd += ["--build-cache", str(build_cache)]
    t0 = time.monotonic()
    done = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
    return {"s": round(time.monotonic() - t0, 1), "cached": done["cached"],
            "size_mib": done["sizeBytes"] >> 20}


def _builds(image: str, images: Path, cold: bool) -> dict[str, object]:
    figures: dict[str, object] = {}
    if cold:
        scratch = Path(tempfile.mkdtemp(prefix="gbench-build-", dir="/var/tmp"))
        try:
            figures["cold"] = _build(image, scratch / "images", scratch / "cache")
            print(f"image build from an empty package cache: {figures['cold']}", file=sys.stderr, flush=True)
            figures["again"] = _build(image, scratch / "images", scratch / "cache")
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    figures["catalog"] = _build(image, images)
    return figures


def _seconds(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)
    return {"p50_s": round(statistics.median(ordered), 1), "max_s": round(ordered[-1], 1), "n": len(ordered)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--image", default="debian-12", help="image to build and boot (debian-12, debian-13)")
    parser.add_argument("--runs", type=int, default=3, help="machines created one after another")
    parser.add_argument("--at-once", type=int, default=10, help="machines created together")
    parser.add_argument("--memory", default="512Mi", help="memory of each machine")
    parser.add_argument("--timeout", type=float, default=600, help="seconds to wait for a phase")
    parser.add_argument("--build-cold", action="store_true",
                        help="also time the image build from an empty package cache (downloads it all)")
    parser.add_argument("--keep-workdir", action="store_true", help="keep the runtime's files and log")
    parser.add_argument("--vcpu-slice-ms", type=float, default=vcpu_slice.DEFAULT_MS,
                        help="the runtime's --vcpu-slice-ms (emulated vCPUs' slice; 0: the kernel's)")
    parser.add_argument("--max-booting", type=int, default=None,
                        help="the runtime's --max-booting (guests booting at once; default the host's CPUs, "
                             "0: no limit)")
    args = parser.parse_args()
    # A SIGTERM (a timeout around the run) still removes the runtime and its domains.
    def stop(*_: object) -> None:
        STOP.set()
        sys.exit(143)

    signal.signal(signal.SIGTERM, stop)

    images = Path(os.environ.get("IRONPOOL_TEST_IMAGES", "/var/cache/ironpool/test-images"))
    builds = _builds(args.image, images, args.build_cold)
    workdir = Path(tempfile.mkdtemp(prefix="gbench-"))
    os.chmod(workdir, 0o711)  # QEMU's user passes through to the machines' disks
    (workdir / "classes.yaml").write_text(_classes(args.memory))
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(workdir / "key")], check=True)
    key, public = workdir / "key", (workdir / "key.pub").read_text().strip()
    sock = workdir / "m.sock"
    log = open(workdir / "runtime.log", "wb")  # noqa: SIM115 - handed to the child
    proc = subprocess.Popen(
        [sys.executable, "-m", "ironpool.cli.main", "libvirt-runtime",
         "--classes", str(workdir / "classes.yaml"), "--images", str(images),
         "--state-dir", str(workdir / "state"), "--address", f"unix://{sock}",
         "--streaming-address", "127.0.0.1:0", "--shutdown-timeout", "1", "--log-level", "warning",
         "--vcpu-slice-ms", str(args.vcpu_slice_ms),
         *(["--max-booting", str(args.max_booting)] if args.max_booting is not None else [])],
        stdout=log, stderr=subprocess.STDOUT)
    channel = grpc.insecure_channel(f"unix:{sock}")
    stub = mgrpc.MachineRuntimeStub(channel)
    label = secrets.token_hex(4)
    result: dict[str, object] = {"bench": "guests", "image": args.image, "memory": args.memory,
                                 "vcpu_slice_ms": args.vcpu_slice_ms,
                                 "max_booting": os.cpu_count() if args.max_booting is None else (
                                     args.max_booting),
                                 "host_cpus": os.cpu_count(), "loadavg_1m_start": os.getloadavg()[0],
                                 "build": builds}
    missed = False  # a machine that did not answer SSH by the deadline
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

        one: list[float] = []
        for i in range(args.runs):
            mid, took = _create_until_ssh(stub, label, i, key, public, args.image,
                                          time.monotonic() + args.timeout)
            if took is None:
                result["one_not_answered"] = {mid: _console_tail(workdir / "state", mid)}
                missed = True
                break
            one.append(took)
            print(f"one machine: SSH answered {took:.1f}s after CreateMachine", file=sys.stderr, flush=True)
            if i == 0:
                cpu = {"to_ssh": round(_qemu_cpu(mid), 1)}
                result["domain_type"] = _domain_type(mid)
                result["boot"] = _boot_figures(stub, mid, key)
                cpu["to_cloud_init_done"] = round(_qemu_cpu(mid), 1)  # with the SSH that asked
                result["qemu_cpu_s"] = cpu
            _delete_all(stub, [mid])  # not timed
        if one:
            result["one"] = _seconds(one)

        if args.at_once and not missed:
            host_before = _host_ticks()
            t0 = time.monotonic()
            deadline = t0 + args.timeout
            with ThreadPoolExecutor(max_workers=args.at_once) as pool:
                futures = [pool.submit(_create_until_ssh, stub, label, 1000 + i, key, public, args.image,
                                       deadline) for i in range(args.at_once)]
                done = [f.result() for f in futures]
            cpu_at_last = [_qemu_cpu(mid) for mid, _ in done]
            host_after = _host_ticks()
            answered = [took for _, took in done if took is not None]
            late = [mid for mid, took in done if took is None]
            missed = bool(late)
            print(f"{args.at_once} at once: {len(answered)} answered SSH, the last after "
                  f"{max(answered, default=0.0):.1f}s", file=sys.stderr, flush=True)
            figures: dict[str, object] = {
                "answered": len(answered),
                "all_reachable_s": None if late else round(time.monotonic() - t0, 1)}
            if answered:
                figures.update(_seconds(answered))
            busy, total = (after - before for after, before in zip(host_after, host_before, strict=True))
            figures["qemu_cpu_s_mean"] = round(statistics.mean(cpu_at_last), 1)
            figures["host_busy_pct"] = round(100 * busy / max(total, 1), 1)
            if late:
                figures["not_answered"] = {mid: _console_tail(workdir / "state", mid) for mid in late}
            result["ten_at_once" if args.at_once == 10 else f"at_once_{args.at_once}"] = figures
            _delete_all(stub, [mid for mid, _ in done])
        result["loadavg_1m_end"] = os.getloadavg()[0]
    finally:
        proc.terminate()
        proc.wait(timeout=60)
        log.close()
        channel.close()
        _cleanup(label)
        if not args.keep_workdir:
            shutil.rmtree(workdir, ignore_errors=True)
    if args.keep_workdir:
        result["workdir"] = str(workdir)
    print(json.dumps(result))
    if missed:
        sys.exit(1)  # the figures above say which machine did not answer, and where its boot stopped


def _cleanup(label: str) -> None:
    """Remove any domain this run left behind (only ours: matched by the bench label)."""
    from tests.helpers.runtimes import labelled_domains, remove_domains

    remove_domains(labelled_domains(LABEL, label))


if __name__ == "__main__":
    main()
