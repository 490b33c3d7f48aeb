"""Networking benchmark on real libvirtd/QEMU with ``ironpool up`` (network mode ``user``). Prints one
JSON line.

One Machine at a time, each with one ephemeral NIC on a Network and root's SSH key in its Ignition,
each deleted before the next (an idle host), seconds from the create call returning to:

* ``running``: ``status.state`` Running with the NIC attached (its address in the status);
* ``endpoint``: the SSH endpoint annotation set (the port its host forwards on 127.0.0.1);
* ``console_address``: the guest printing its address on the serial console (DHCP done);
* ``ssh``: ``ssh -p PORT root@127.0.0.1 true`` succeeding through that endpoint: create → SSH
  reachable, the figure the issue asks for (p50, p90, max).

    .venv/bin/python bench/networking.py [--samples 5]
"""

from __future__ import annotations

import argparse
import base64
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))  # for tests.helpers
sys.path.insert(0, str(ROOT / "tests" / "e2e"))

from ironpool.api.machine_access import SSH_ENDPOINT_ANNOTATION, ssh_endpoint  # noqa: E402
from ironpool.api.resources import resolve  # noqa: E402
from up_harness import UpInstance, machine_domain, wait_for  # noqa: E402

from tests.helpers import ssh  # noqa: E402
from tests.helpers.runtimes import build_tiny_image  # noqa: E402

MACHINES, NETWORKS, PREFIXES, SECRETS = (resolve(k) for k in ("machines", "networks", "prefixes", "secrets"))
NS = "default"


def machine(name: str) -> dict[str, Any]:
    ips = [{"ephemeral": {"prefixTemplate": {"spec": {"parentRef": {"name": "bench-v4"}}}}}]
    nic = {"name": "primary", "ephemeral": {"networkInterfaceTemplate": {
        "spec": {"networkRef": {"name": "bench"}, "ipFamilies": ["IPv4"], "ips": ips}}}}
    return {"metadata": {"name": name, "namespace": NS}, "spec": {
        "machineClassRef": {"name": "x-small"}, "ignitionRef": {"name": "bench-ssh"},
        "volumes": [{"name": "root", "localDisk": {"image": "tiny"}}], "networkInterfaces": [nic]}}


def summary(values: list[float]) -> dict[str, float]:
    ordered = sorted(values)
    p90 = ordered[min(len(ordered) - 1, int(0.9 * len(ordered)))]
    return {"p50": round(statistics.median(values), 2), "p90": round(p90, 2), "max": round(max(values), 2)}


def one(up: UpInstance, client: Any, key: Path, name: str) -> dict[str, float]:
    client.create_raw(MACHINES, machine(name), NS)
    t0 = time.perf_counter()
    marks: dict[str, float] = {}

    def running() -> dict[str, Any] | None:
        m = client.get_raw(MACHINES, name, NS)
        status = m.get("status") or {}
        nics = status.get("networkInterfaces") or []
        return m if status.get("state") == "Running" and nics and nics[0].get("ips") else None

    def forwarded() -> dict[str, Any] | None:
        m = client.get_raw(MACHINES, name, NS)
        return m if SSH_ENDPOINT_ANNOTATION in (m["metadata"].get("annotations") or {}) else None

    wait_for(running, 120, f"{name} running with its address", interval=0.02)
    marks["running"] = time.perf_counter() - t0
    m = wait_for(forwarded, 60, f"{name}'s SSH endpoint", interval=0.02)
    marks["endpoint"] = time.perf_counter() - t0
    iri_id = machine_domain(m["status"]["machineID"])[0]
    address = m["status"]["networkInterfaces"][0]["ips"][0]
    wait_for(lambda: f"eth0 address {address}/" in up.console_log(iri_id), 120, f"{name}'s console",
             interval=0.02)
    marks["console_address"] = time.perf_counter() - t0
    endpoint = str(ssh_endpoint(m))
    wait_for(lambda: ssh.run(endpoint, key, "true", timeout=10).returncode == 0, 120, f"SSH into {name}",
             interval=0.1)
    marks["ssh"] = time.perf_counter() - t0
    client.delete_raw(MACHINES, name, NS)
    wait_for(lambda: not client.list_raw(MACHINES, NS).items, 120, f"{name} deleted", interval=0.1)
    return marks


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=5)
    args = parser.parse_args()
    up = UpInstance(images=build_tiny_image())
    try:
        up.start()
        client = up.client()
        key, public = ssh.keypair(Path(tempfile.mkdtemp(prefix="bench-ssh-")))
        client.create_raw(NETWORKS, {"metadata": {"name": "bench", "namespace": NS}}, NS)
        client.create_raw(PREFIXES, {"metadata": {"name": "bench-v4", "namespace": NS},
                                     "spec": {"prefix": "10.30.0.0/24"}}, NS)
        data = {"ignition.yaml": base64.b64encode(ssh.ignition(public)).decode()}
        client.create_raw(SECRETS, {"metadata": {"name": "bench-ssh", "namespace": NS}, "data": data}, NS)
        runs = [one(up, client, key, f"net-{i}") for i in range(args.samples)]
        print(json.dumps({
            "benchmark": "networking", "network_mode": "user", "samples": args.samples,
            "create_to_seconds": {k: summary([r[k] for r in runs])
                                  for k in ("running", "endpoint", "console_address", "ssh")},
        }))
    finally:
        up.cleanup()


if __name__ == "__main__":
    main()
