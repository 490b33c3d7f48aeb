"""SSH into test guests: a throwaway key pair, an Ignition config that authorises it for root, and a
command run through a forwarded port on 127.0.0.1 (the only place tests send traffic to)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.helpers.wait import wait_for

SSH_OPTIONS = ["-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "BatchMode=yes",
               "-o", "ConnectTimeout=5", "-o", "LogLevel=ERROR"]


def keypair(directory: Path) -> tuple[Path, str]:
    """``(private key file, public key line)`` of a new ed25519 key in ``directory``."""
    key = directory / "id_ed25519"
    if not key.exists():
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "ironpool-test", "-f", str(key)],
                       check=True, timeout=30)
    return key, key.with_suffix(".pub").read_text().strip()


def ignition(public_key: str) -> bytes:
    """An Ignition config that gives root the key (``passwd.users[].sshAuthorizedKeys``)."""
    return json.dumps({"ignition": {"version": "3.4.0"},
                       "passwd": {"users": [{"name": "root", "sshAuthorizedKeys": [public_key]}]}}).encode()


def run(endpoint: str, key: Path, command: str, timeout: float = 30.0) -> subprocess.CompletedProcess[str]:
    """``ssh -p PORT root@HOST COMMAND`` for an endpoint ``HOST:PORT``, which must be on loopback."""
    host, _, port = endpoint.rpartition(":")
    assert host.startswith("127."), f"tests only talk to loopback, not {host}"
    return subprocess.run(["ssh", *SSH_OPTIONS, "-i", str(key), "-p", port, f"root@{host}", command],
                          capture_output=True, text=True, timeout=timeout, check=False)


def wait_run(endpoint: str, key: Path, command: str, timeout: float, what: str) -> str:
    """Retry :func:`run` until it succeeds (the guest's SSH server may still be starting); its stdout."""

    def attempt() -> subprocess.CompletedProcess[str] | None:
        proc = run(endpoint, key, command)
        return proc if proc.returncode == 0 else None

    # A guest still booting may accept the connection and answer slowly: that is "not yet" too.
    return wait_for(attempt, timeout, what, interval=0.5, retry_on=(subprocess.TimeoutExpired,)).stdout
