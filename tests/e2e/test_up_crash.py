"""Crash safety of ``ironpool up``: kill -9 and restart keeps the same machines, none duplicated; a
domain whose Machine was deleted while everything was down is garbage-collected after the restart."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable

import httpx
import libvirt
import pytest
import yaml
from ironpool.api.resources import resolve
from up_harness import UpInstance, machine_domain, wait_for

from tests.helpers.guests import GUEST_SECONDS
from tests.helpers.net import free_port

pytestmark = [pytest.mark.libvirt, pytest.mark.slow]

MACHINES = resolve("machines")


def machine_manifest(name: str) -> dict:  # type: ignore[type-arg]
    return {
        "apiVersion": "compute.ironcore.dev/v1alpha1", "kind": "Machine",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"machineClassRef": {"name": "x-small"}, "power": "On",
                 "volumes": [{"name": "root", "localDisk": {"image": "tiny", "sizeLimit": "1Gi"}}]},
    }


def running_ids(client: object, names: list[str]) -> dict[str, str] | None:
    out = {}
    for n in names:
        m = client.get_raw(MACHINES, n, "default")  # type: ignore[attr-defined]
        if (m.get("status") or {}).get("state") != "Running":
            return None
        out[n] = m["status"]["machineID"]
    return out


def force_delete_offline(up: UpInstance, name: str) -> None:
    """With ``up`` down: serve the same database with a bare apiserver and remove Machine ``name``
    for good (finalizer dropped), as an administrator cleaning up a dead host would."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "ironpool.cli.main", "apiserver", "--store", f"sqlite:///{up.data_dir}/ironpool.db",
         "--listen", f"127.0.0.1:{port}", "--token-file", str(up.data_dir / "tokens.csv")],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        wait_for(lambda: httpx.get(f"{url}/readyz", timeout=1).status_code == 200, 30, "bare apiserver")
        from ironpool.client import Client, ClientConfig

        with Client(ClientConfig(server=url, token=up.token())) as c:
            c.patch_raw(MACHINES, name, {"metadata": {"finalizers": None}}, "default")
            c.delete_raw(MACHINES, name, "default")
            assert not [m for m in c.list_raw(MACHINES, "default").items if m["metadata"]["name"] == name]
    finally:
        proc.terminate()
        proc.wait(10)


def test_kill9_restart_keeps_machines_and_collects_orphans(make_up: Callable[..., UpInstance]) -> None:
    up = make_up(extra_args=["--gc-grace", "0"])  # collect orphans after two relists, not 5 minutes
    up.start()
    client = up.client()
    names = ["crash-a", "crash-b"]
    manifest = up.workdir / "machines.yaml"
    manifest.write_text(yaml.safe_dump_all([machine_manifest(n) for n in names]))
    up.cli("apply", "-f", str(manifest))
    before = wait_for(lambda: running_ids(client, names), GUEST_SECONDS, "both machines Running")
    domains = {machine_domain(mid)[1] for mid in before.values()}
    assert set(up.domains()) == domains

    # kill -9 and restart: the same machines, the same domains, nothing duplicated, still controlled.
    up.kill9()
    up.start()
    client = up.client()
    wait_for(lambda: running_ids(client, names) == before, 30, "the same machines Running after the restart")
    client.patch_raw(MACHINES, "crash-a", {"spec": {"power": "Off"}}, "default")
    wait_for(lambda: client.get_raw(MACHINES, "crash-a", "default")["status"].get("state") == "Shutdown", 60,
             "crash-a to shut down after the restart")
    current = up.domains()
    assert set(current) == domains, f"domains after restart {sorted(current)} != {sorted(domains)}"
    assert current[machine_domain(before["crash-a"])[1]] == libvirt.VIR_DOMAIN_SHUTOFF
    assert current[machine_domain(before["crash-b"])[1]] == libvirt.VIR_DOMAIN_RUNNING
    assert running_ids(client, ["crash-b"]) == {"crash-b": before["crash-b"]}

    # Down again; crash-b vanishes from the API meanwhile; after the restart its domain is removed.
    up.kill9()
    force_delete_offline(up, "crash-b")
    up.start()
    orphan = machine_domain(before["crash-b"])[1]
    wait_for(lambda: orphan not in up.domains(), 30, f"orphaned domain {orphan} to be garbage-collected")
    assert set(up.domains()) == {machine_domain(before["crash-a"])[1]}
    assert up.stop() == 0
