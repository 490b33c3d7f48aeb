"""Runs ``ironpool up`` as a subprocess for end-to-end tests and the e2e benchmark.

Every instance gets its own data directory, pool name and libvirt storage pool, so parallel or
leftover runs never collide (``default_names=True`` leaves pool and storage-pool names to ``ironpool
up``, as a user's installations do); :meth:`UpInstance.cleanup` removes every domain, volume and
storage pool the instance made, whatever state the test left it in.
"""

from __future__ import annotations

import contextlib
import os
import re
import secrets
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import httpx

from tests.helpers.guests import GUEST_SECONDS
from tests.helpers.net import free_port
from tests.helpers.qemu_dirs import qemu_tmpdir
from tests.helpers.runtimes import LIBVIRT_URI, REPO, destroy_storage_pool, owned_domains, remove_domains
from tests.helpers.wait import wait_for as _wait_for

T = TypeVar("T")


def wait_for(fn: Callable[[], T | None], timeout: float, what: str, interval: float = 0.1) -> T:
    """:func:`tests.helpers.wait.wait_for`, counting HTTP and socket errors as "not yet": the
    server may be restarting."""
    return _wait_for(fn, timeout, what, interval, retry_on=(httpx.HTTPError, OSError))


@dataclass
class UpInstance:
    """One ``ironpool up`` with a private data dir, pool and storage pool; restartable."""

    images: Path
    classes: list[Path] = field(default_factory=lambda: [REPO / "examples" / "classes"])
    extra_args: list[str] = field(default_factory=list)
    default_names: bool = False
    python: str = sys.executable  # another environment's interpreter runs its own installed ironpool
    build_tiny: bool = False  # let `up` run its packaged image build (a no-op when --images is current)
    environment: dict[str, str] = field(default_factory=dict)  # more for `up` (e.g. SSL_CERT_FILE)
    tag: str = field(default_factory=lambda: secrets.token_hex(4))
    process: subprocess.Popen[bytes] | None = None
    port: int = field(default_factory=free_port)
    starts: int = 0

    def __post_init__(self) -> None:
        # Short paths: unix socket paths must stay under 108 bytes.
        self.workdir = qemu_tmpdir(f"ipe2e-{self.tag}-")
        self.data_dir = self.workdir / "d"
        # The client configuration in a folder of its own, as ~/.config/ironpool is: the example
        # playbook makes the folder beside it (its SSH key's) private, which the data dir's must not be.
        self.config_path = self.workdir / "client" / "config.yaml"
        if self.default_names:
            from ironpool.allinone.datadir import default_pool_name, default_storage_pool

            self.pool, self.storage_pool = default_pool_name(), default_storage_pool(self.data_dir)
        else:
            self.pool, self.storage_pool = f"e2e-{self.tag}", f"ironpool-e2e-{self.tag}"

    # -- process -----------------------------------------------------------------------------

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    @property
    def ca_file(self) -> Path:
        """The CA ``ironpool up`` made; clients verify the server with it."""
        return self.data_dir / "pki" / "ca.crt"

    @property
    def kubeconfig(self) -> Path:
        return self.data_dir / "kubeconfig"

    @property
    def log_path(self) -> Path:
        return self.workdir / f"up-{self.starts}.out"

    @property
    def env(self) -> dict[str, str]:
        return {**os.environ, **self.environment, "IRONPOOL_CONFIG": str(self.config_path),
                "PYTHONUNBUFFERED": "1"}

    def command(self) -> list[str]:
        cmd = [self.python, "-m", "ironpool.cli.main", "up", "--data-dir", str(self.data_dir),
               "--listen", f"127.0.0.1:{self.port}", "--images", str(self.images),
               "--tiny-image" if self.build_tiny else "--no-tiny-image", "--heartbeat-interval", "2"]
        if not self.default_names:
            cmd += ["--pool", self.pool, "--storage-pool", self.storage_pool]
        for c in self.classes:
            cmd += ["--classes", str(c)]
        return cmd + self.extra_args

    def start(self, timeout: float = 60.0) -> None:
        self.starts += 1
        out = open(self.log_path, "wb")  # noqa: SIM115 - handed to the child
        self.process = subprocess.Popen(self.command(), stdout=out, stderr=subprocess.STDOUT, env=self.env)
        out.close()

        def up() -> bool:
            assert self.process is not None
            if self.process.poll() is not None:
                raise AssertionError(f"ironpool up exited with {self.process.returncode}:\n{self.output()}")
            return "ironpool is up" in self.output()

        wait_for(up, timeout, "ironpool up to print its summary")

    def output(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def stop(self, timeout: float = 30.0) -> int:
        """SIGINT, as Ctrl-C does; returns the exit code."""
        if self.process is None or self.process.poll() is not None:
            return self.process.returncode if self.process else 0
        self.process.send_signal(signal.SIGINT)
        try:
            return self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
            raise AssertionError(f"ironpool up did not stop within {timeout}s after SIGINT") from None

    def kill9(self) -> None:
        assert self.process is not None
        self.process.send_signal(signal.SIGKILL)
        self.process.wait()

    def token(self) -> str:
        for line in (self.data_dir / "tokens.csv").read_text().splitlines():
            if line and not line.startswith("#"):
                return line.split(",")[0]
        raise AssertionError("no token in tokens.csv")

    def client(self) -> Any:
        """A client configured by the file ``ironpool up`` wrote, as a user's is."""
        from ironpool.client import Client, ClientConfig

        config = ClientConfig.from_file(self.config_path)
        assert config.server == self.url and config.ca_file == str(self.ca_file), config
        return Client(config)

    def cli(self, *args: str, check: bool = True, timeout: float = 120.0) -> subprocess.CompletedProcess[str]:
        """Run ``ironpool ARGS`` the way a user does: configured only by the file ``up`` wrote."""
        proc = subprocess.run([self.python, "-m", "ironpool.cli.main", *args], env=self.env,
                              capture_output=True, text=True, timeout=timeout, check=False)
        if check and proc.returncode != 0:
            raise AssertionError(f"ironpool {' '.join(args)} failed ({proc.returncode}):\n"
                                 f"{proc.stdout}\n{proc.stderr}")
        return proc

    def wait(self, target: str, condition: str,
             seconds: float = GUEST_SECONDS) -> subprocess.CompletedProcess[str]:
        """``ironpool wait TARGET --for=CONDITION`` with a deadline of ``seconds`` (a guest's, unless
        told), and a little more for the command itself, which must end first to say what it saw."""
        return self.cli("wait", target, f"--for={condition}", f"--timeout={seconds:.0f}s",
                        timeout=seconds + 30)

    # -- libvirt views -----------------------------------------------------------------------

    def domains(self) -> dict[str, int]:
        """This instance's domains by name, with their libvirt state (those of its machine runtime)."""
        return owned_domains(self.data_dir / "machine-runtime")

    def storage_volumes(self) -> list[str]:
        """Names of the volumes in this instance's storage pool (without the runtime's meta folder)."""
        import libvirt

        conn = libvirt.open(LIBVIRT_URI)
        try:
            pool = conn.storagePoolLookupByName(self.storage_pool)
            pool.refresh(0)
            return [v for v in pool.listVolumes() if not v.startswith(".")]
        finally:
            conn.close()

    def console_log(self, machine_id: str) -> str:
        path = self.data_dir / "machine-runtime" / "machines" / machine_id / "console.log"
        return path.read_text(errors="replace") if path.exists() else ""

    # -- cleanup -----------------------------------------------------------------------------

    def cleanup(self) -> None:
        """Stop the process and remove every domain, volume and storage pool of this instance."""
        import libvirt

        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()
        with contextlib.suppress(libvirt.libvirtError):
            remove_domains(self.domains())
        with contextlib.suppress(libvirt.libvirtError):
            destroy_storage_pool(self.storage_pool)
        shutil.rmtree(self.workdir, ignore_errors=True)


def machine_domain(machine_id: str) -> tuple[str, str]:
    """``(iri id, domain name)`` of a ``status.machineID`` like ``ironpool-libvirt-runtime://<id>``."""
    iri_id = re.sub(r"^.*://", "", machine_id)
    return iri_id, f"ironpool-{iri_id}"
