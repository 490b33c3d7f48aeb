"""Fixtures for the IRI wire-layer tests: fake runtimes on a unix socket + TCP, and a real sshd."""

from __future__ import annotations

import getpass
import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from iri_fakes import FakeServers, Sshd, start_fake_servers

from tests.helpers.net import free_port
from tests.helpers.runtimes import stop_process, wait_serving

SSHD = "/usr/sbin/sshd"


@pytest.fixture
def fake_servers() -> Iterator[FakeServers]:
    # A short private dir: unix socket paths are limited to 108 bytes.
    d = tempfile.mkdtemp(prefix="iri-")
    servers = start_fake_servers(os.path.join(d, "iri.sock"))
    try:
        yield servers
    finally:
        servers.stop()
        shutil.rmtree(d, ignore_errors=True)


def _keygen(path: Path) -> None:
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)


def _banner_ready(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1) as s:
            return s.recv(16).startswith(b"SSH-2.0")
    except OSError:
        return False


@pytest.fixture(scope="session")
def sshd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sshd]:
    if not os.path.exists(SSHD):
        pytest.fail(f"{SSHD} missing: run scripts/setup-host.sh (Debian openssh-server)")
    d = tmp_path_factory.mktemp("sshd")
    _keygen(d / "host_ed25519")
    _keygen(d / "client_ed25519")
    (d / "authorized_keys").write_text((d / "client_ed25519.pub").read_text())
    port = free_port()
    host_pub = " ".join((d / "host_ed25519.pub").read_text().split()[:2])
    (d / "known_hosts").write_text(f"[127.0.0.1]:{port} {host_pub}\n")
    (d / "sshd_config").write_text(
        f"""Port {port}
ListenAddress 127.0.0.1
HostKey {d}/host_ed25519
PidFile {d}/sshd.pid
AuthorizedKeysFile {d}/authorized_keys
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
StrictModes no
UsePAM no
AllowStreamLocalForwarding yes
X11Forwarding no
LogLevel VERBOSE
"""
    )
    os.makedirs("/run/sshd", mode=0o755, exist_ok=True)  # sshd's privilege-separation dir
    log = d / "sshd.log"
    with open(log, "wb") as logf:
        proc = subprocess.Popen([SSHD, "-D", "-e", "-f", str(d / "sshd_config")], stdout=logf, stderr=logf)
    wait_serving(proc, lambda: _banner_ready(port), log, f"sshd on port {port}", timeout=15)
    try:
        yield Sshd(
            "127.0.0.1", port, getpass.getuser(), d / "client_ed25519", d / "known_hosts", host_pub, log
        )
    finally:
        stop_process(proc, timeout=10)
