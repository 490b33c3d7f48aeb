"""A local OCI registry: Debian's ``docker-registry`` (the CNCF distribution registry) on a loopback
port, for ``ironpool up --registry`` and the tests.

Its storage is a folder of ours; with ``users`` it asks for HTTP Basic auth from an htpasswd file
(bcrypt, made with ``htpasswd`` from apache2-utils), as a private registry would.
"""

from __future__ import annotations

import contextlib
import ctypes
import http.client
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path

import yaml

from ironpool.ports import free_port

BINARY = "docker-registry"
PR_SET_PDEATHSIG = 1


class RegistryError(Exception):
    """The registry could not be started; the message says why."""


def _die_with_parent() -> None:
    """In the child: end with the process that started it (Linux's parent-death signal), so a
    SIGKILLed ``ironpool up`` leaves no registry behind."""
    with contextlib.suppress(OSError, AttributeError):  # not Linux: it outlives a killed parent
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)


class LocalRegistry:
    """One registry process serving ``root`` on ``host:port`` (a free port when 0)."""

    def __init__(self, root: Path, port: int = 0, host: str = "127.0.0.1",
                 users: Mapping[str, str] | None = None) -> None:
        self.root = Path(root)
        self.host = host
        self.port = port or free_port(host)
        self.users = dict(users or {})
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        """``host:port``, the registry part of image references."""
        return f"{self.host}:{self.port}"

    @property
    def log_file(self) -> Path:
        return self.root / "registry.log"

    def _config(self) -> dict[str, object]:
        config: dict[str, object] = {
            "version": 0.1,
            "log": {"level": "warn", "accesslog": {"disabled": True}},
            "storage": {"filesystem": {"rootdirectory": str(self.root / "data")},
                        "delete": {"enabled": True}},
            "http": {"addr": self.address, "headers": {"X-Content-Type-Options": ["nosniff"]}},
        }
        if self.users:
            config["auth"] = {"htpasswd": {"realm": "ironpool", "path": str(self.root / "htpasswd")}}
        return config

    def _write_htpasswd(self) -> None:
        lines = []
        for user, password in self.users.items():
            proc = subprocess.run(["htpasswd", "-Bbn", user, password], capture_output=True, text=True,
                                  check=False)
            if proc.returncode != 0:
                raise RegistryError(f"htpasswd failed: {proc.stderr.strip()}")
            lines.append(proc.stdout.strip())
        path = self.root / "htpasswd"
        path.write_text("\n".join(lines) + "\n")
        os.chmod(path, 0o600)

    def start(self, timeout: float = 30.0) -> None:
        if shutil.which(BINARY) is None:
            raise RegistryError(f"{BINARY} is not installed (Debian package docker-registry; "
                                "scripts/setup-host.sh installs it)")
        if self.users and shutil.which("htpasswd") is None:
            raise RegistryError("htpasswd is not installed (Debian package apache2-utils)")
        self.root.mkdir(parents=True, exist_ok=True)
        if self.users:
            self._write_htpasswd()
        config = self.root / "config.yml"
        config.write_text(yaml.safe_dump(self._config()))
        log = open(self.log_file, "ab")  # noqa: SIM115 - handed to the child
        try:
            self.process = subprocess.Popen([BINARY, "serve", str(config)], stdout=log,
                                            stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                            start_new_session=True, preexec_fn=_die_with_parent)
        finally:
            log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RegistryError(f"{BINARY} exited with {self.process.returncode}; see {self.log_file}")
            if self.ready():
                return
            time.sleep(0.05)
        self.stop()
        raise RegistryError(f"{BINARY} did not answer on {self.address} within {timeout:.0f}s")

    def ready(self) -> bool:
        """The registry answers ``/v2/`` (200, or 401 when it wants credentials)."""
        try:
            conn = http.client.HTTPConnection(self.host, self.port, timeout=1)
            conn.request("GET", "/v2/")
            status = conn.getresponse().status
            conn.close()
        except OSError:
            return False
        return status in (200, 401)

    def stop(self) -> None:
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None
