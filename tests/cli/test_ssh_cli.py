"""``ironpool ssh``: a command run through the SSH endpoint a Machine's annotation names, against a
real sshd on 127.0.0.1 standing in for a guest (the Machines of ``ironpool up`` are tested end to end
with the host side)."""

from __future__ import annotations

import getpass
import os
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.cli.conftest import Run
from tests.conftest import ApiServer
from tests.helpers.net import free_port
from tests.helpers.runtimes import stop_process, wait_serving

SSHD = "/usr/sbin/sshd"
MACHINES = "/apis/compute.ironcore.dev/v1alpha1/namespaces/default/machines"
ANNOTATION = "machinepoollet.ironpool.dev/ssh-endpoint"


@pytest.fixture
def sshd(tmp_path: Path) -> Iterator[tuple[int, Path]]:
    """A real sshd on 127.0.0.1 that lets this user in with a new key: (port, private key)."""
    if not os.path.exists(SSHD):
        pytest.fail(f"{SSHD} missing: run scripts/setup-host.sh (Debian openssh-server)")
    for key in ("host", "client"):
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / key)], check=True)
    (tmp_path / "authorized_keys").write_text((tmp_path / "client.pub").read_text())
    port = free_port()
    (tmp_path / "sshd_config").write_text(
        f"Port {port}\nListenAddress 127.0.0.1\nHostKey {tmp_path}/host\nPidFile {tmp_path}/sshd.pid\n"
        f"AuthorizedKeysFile {tmp_path}/authorized_keys\nPasswordAuthentication no\n"
        "KbdInteractiveAuthentication no\nPermitRootLogin prohibit-password\nStrictModes no\nUsePAM no\n")
    os.makedirs("/run/sshd", mode=0o755, exist_ok=True)
    log = tmp_path / "sshd.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(tmp_path / "sshd_config")],
                                stdout=out, stderr=out)

    def banner() -> bool:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
                return s.recv(8).startswith(b"SSH-2.0")
        except OSError:
            return False

    wait_serving(proc, banner, log, f"sshd on port {port}", timeout=15)
    try:
        yield port, tmp_path / "client"
    finally:
        stop_process(proc, timeout=10)


def test_ssh_runs_a_command_through_the_reported_endpoint(
    ironpool: Run, apiserver: ApiServer, sshd: tuple[int, Path], tmp_path: Path,
) -> None:
    port, key = sshd
    with httpx.Client(base_url=apiserver.url, headers=apiserver.headers(), timeout=10) as c:
        for name, annotations in (("web", {ANNOTATION: f"127.0.0.1:{port}"}), ("db", {})):
            body = {"metadata": {"name": name, "annotations": annotations},
                    "spec": {"machineClassRef": {"name": "small"}}}
            r = c.post(MACHINES, json=body)
            assert r.status_code == 201, r.text
        uid = c.get(f"{MACHINES}/web").json()["metadata"]["uid"]
    known = tmp_path / "known_hosts"
    options = ["-o", f"UserKnownHostsFile={known}", "-o", "BatchMode=yes", "-o", "LogLevel=ERROR"]
    done = ironpool("ssh", "web", "-l", getpass.getuser(), "-i", str(key), *options, "--", "echo", "hello")
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "hello"
    remembered = subprocess.run(["ssh-keygen", "-F", f"ironpool-default-web-{uid}", "-f", str(known)],
                                capture_output=True, text=True, check=False)
    assert remembered.returncode == 0, "the host key is remembered under the Machine's alias"
    failed = ironpool("ssh", "web", "-l", getpass.getuser(), "-i", str(key), *options, "--", "exit", "3")
    assert failed.returncode == 3  # ssh's own exit status

    printed = ironpool("ssh", "web", "--print-command", "uname", "-a")
    alias = f"HostKeyAlias=ironpool-default-web-{uid}"
    assert printed.stdout.split() == ["ssh", "-p", str(port), "-o", alias, "-o",
                                      "StrictHostKeyChecking=accept-new", "-l", "root", "127.0.0.1", "--",
                                      "uname", "-a"]
    pending = ironpool("ssh", "db")
    assert pending.returncode == 1
    assert pending.stderr.strip().startswith('error: machine "db" has no SSH endpoint yet (state Pending;')
    missing = ironpool("ssh", "nope")
    assert missing.returncode == 1 and "not found" in missing.stderr
