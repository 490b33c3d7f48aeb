"""End to end on real libvirtd: a second host joins an ``ironpool up`` with the command
``ironpool join-token create`` prints (a bootstrap token and the CA's hash), runs on client
certificates the control plane signs and renews them (short-lived here), keeps working once its
token is revoked, a Machine the scheduler places there runs as that host's domain, and ``ironpool
down --purge`` on the joined data dir removes what the host made."""

from __future__ import annotations

import shlex
import ssl
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import httpx
import libvirt
import pytest
from cryptography import x509
from ironpool.certificates.bootstrap import load_certificate
from up_harness import UpInstance, machine_domain, wait_for

from tests.helpers.guests import GUEST_SECONDS
from tests.helpers.runtimes import LIBVIRT_URI

pytestmark = [pytest.mark.libvirt, pytest.mark.slow]

MACHINE = """apiVersion: compute.ironcore.dev/v1alpha1
kind: Machine
metadata: {name: joined-vm}
spec:
  machineClassRef: {name: x-small}
  power: "On"
  volumes:
    - name: root
      localDisk: {image: tiny, sizeLimit: 1Gi}
"""


def test_a_host_joins_ironpool_up_and_runs_what_is_scheduled_there(
        make_up: Callable[..., UpInstance], tiny_images: Path, tmp_path: Path) -> None:
    # Nothing fits up's own pool; the joined host's certificates last 20 s, so it renews them in the test.
    up = make_up(extra_args=["--capacity-memory", "1Mi", "--cluster-signing-duration", "20"])
    up.start()
    pool = f"joined-{up.tag}"
    created = up.cli("join-token", "create", "--pool", pool, "--data-dir", str(up.data_dir))
    argv = shlex.split(created.stdout.strip())
    assert argv[:3] == ["ironpool", "join", up.url] and argv[argv.index("--pool") + 1] == pool
    assert "--discovery-token-ca-cert-hash" in argv and "--ca-data" not in argv  # the CA is discovered
    token = argv[argv.index("--token") + 1]

    # Under up's work folder, which QEMU can reach and the harness removes: pytest's own temp root
    # loses its search permission whenever another pytest run starts meanwhile.
    data_dir = up.workdir / "h"
    out = open(tmp_path / "join.out", "wb")  # noqa: SIM115 - handed to the child
    join = subprocess.Popen([sys.executable, "-m", "ironpool.cli.main", *argv[1:], "--data-dir",
                             str(data_dir), "--images", str(tiny_images), "--no-tiny-image",
                             "--heartbeat-interval", "2"], stdout=out, stderr=subprocess.STDOUT)
    out.close()
    output = (tmp_path / "join.out").read_text
    conn = libvirt.open(LIBVIRT_URI)
    try:
        wait_for(lambda: f"pool {pool} joined (" in output() or join.poll() is not None, 60, "the join")
        assert join.poll() is None, output()
        pair = data_dir / "pki" / "machinepool-client.pem"
        first = load_certificate(pair)
        assert first is not None and oct(pair.stat().st_mode & 0o777) == "0o600"
        first.verify_directly_issued_by(x509.load_pem_x509_certificate(up.ca_file.read_bytes()))
        assert "token" not in (data_dir / "machinepool.yaml").read_text()  # the poollet runs on it

        # Revoked, the token can no longer join (401); the host goes on with its certificates.
        up.cli("join-token", "delete", "--pool", pool, "--data-dir", str(up.data_dir))
        csrs = f"{up.url}/apis/certificates.k8s.io/v1/certificatesigningrequests"
        wait_for(lambda: httpx.post(csrs, json={}, headers={"Authorization": f"Bearer {token}"},
                                    verify=ssl.create_default_context(cafile=up.ca_file),
                                    timeout=5).status_code == 401, 10, "the revoked token refused")

        (tmp_path / "m.yaml").write_text(MACHINE)
        up.cli("apply", "-f", str(tmp_path / "m.yaml"))
        with up.client() as c:
            from ironpool.api.resources import resolve

            machines = resolve("machines")

            def running() -> dict | None:  # type: ignore[type-arg]
                m = c.get_raw(machines, "joined-vm", "default")
                return m if (m.get("status") or {}).get("state") == "Running" else None

            machine = wait_for(running, GUEST_SECONDS, "joined-vm running")
            assert machine["spec"]["machinePoolRef"]["name"] == pool
            _, domain = machine_domain(machine["status"]["machineID"])
            assert str(data_dir / "machine-runtime") in conn.lookupByName(domain).XMLDesc(0)
            # Renewed (at 70-90 % of 20 s) by the join process; the poollet then removes the domain.
            wait_for(lambda: (load_certificate(pair) or first).serial_number != first.serial_number, 60,
                     "the client certificate renewed")
            c.delete_raw(machines, "joined-vm", "default")
            wait_for(lambda: not [m for m in c.list_raw(machines, "default").items], 60, "joined-vm gone")

        down = subprocess.run([sys.executable, "-m", "ironpool.cli.main", "down", "--purge", "--yes",
                               "--data-dir", str(data_dir)], capture_output=True, text=True, timeout=120)
        assert down.returncode == 0, down.stdout + down.stderr
        assert "stopped ironpool join" in down.stdout and "removed storage pool" in down.stdout, down.stdout
        assert join.wait(10) == 0 and "ironpool join stopped." in output()
        assert not data_dir.exists()
    finally:
        if join.poll() is None:
            join.kill()
            join.wait()
        if data_dir.exists():
            subprocess.run([sys.executable, "-m", "ironpool.cli.main", "down", "--purge", "--yes",
                            "--data-dir", str(data_dir)], capture_output=True, timeout=120)
        conn.close()
