"""Real etcd servers for tests and benchmarks: one member or a cluster of several, on loopback ports.

Debian's ``etcd-server`` package provides ``etcd`` (``scripts/setup-host.sh`` installs it). Each
member gets its own data dir and client and peer ports; ``tls`` serves the client port over TLS with
certificates from a throwaway CA (client certificates required). Data dirs go to ``/dev/shm`` when
asked (``fast``): fsync there costs nothing, which keeps tests quick; benchmarks use a real disk.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import grpc
import pytest

from tests.helpers.net import free_port

ETCD = shutil.which("etcd") or "/usr/bin/etcd"


def require_etcd() -> None:
    """Skip without an ``etcd`` binary on a developer box; fail in CI, where setup-host.sh installs it."""
    if Path(ETCD).exists():
        return
    message = "etcd not installed (run scripts/setup-host.sh: Debian package etcd-server)"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


@dataclass(frozen=True)
class EtcdTlsFiles:
    """The CA, and a client certificate and key, of a TLS-serving cluster."""

    ca: Path
    cert: Path
    key: Path


@dataclass
class EtcdMember:
    """One etcd process of a cluster."""

    name: str
    client_port: int
    peer_port: int
    data_dir: Path
    log_path: Path
    process: subprocess.Popen[bytes] | None = None

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.client_port}"

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None


@dataclass
class EtcdCluster:
    """A running etcd cluster of ``len(members)`` members on loopback ports."""

    members: list[EtcdMember]
    tls: EtcdTlsFiles | None = None
    _serving: dict[str, tuple[Path, Path]] = field(default_factory=dict)

    @property
    def endpoints(self) -> str:
        """``host:port,host:port,...``: what follows ``etcd://`` in a store URL."""
        return ",".join(m.endpoint for m in self.members)

    def url(self, root: str = "") -> str:
        """The store URL of this cluster, with an optional key prefix (``/test-1``)."""
        return f"etcd://{self.endpoints}{root}"

    def _argv(self, member: EtcdMember, state: str) -> list[str]:
        scheme = "https" if self.tls else "http"
        cluster = ",".join(f"{m.name}=http://127.0.0.1:{m.peer_port}" for m in self.members)
        argv = [
            ETCD, "--name", member.name, "--data-dir", str(member.data_dir),
            "--listen-client-urls", f"{scheme}://127.0.0.1:{member.client_port}",
            "--advertise-client-urls", f"{scheme}://127.0.0.1:{member.client_port}",
            "--listen-peer-urls", f"http://127.0.0.1:{member.peer_port}",
            "--initial-advertise-peer-urls", f"http://127.0.0.1:{member.peer_port}",
            "--initial-cluster", cluster, "--initial-cluster-state", state,
            "--initial-cluster-token", "ironpool-test",
            # Elections in about a second, so a test that kills the leader waits little.
            "--heartbeat-interval", "50", "--election-timeout", "500",
            "--logger", "zap", "--log-level", "warn",
        ]  # fmt: skip
        if self.tls:
            cert, key = self._serving[member.name]
            argv += ["--cert-file", str(cert), "--key-file", str(key), "--client-cert-auth",
                     "--trusted-ca-file", str(self.tls.ca)]
        return argv

    def start(self, member: EtcdMember, state: str = "new") -> None:
        """(Re)start one member; its data dir is kept across restarts."""
        with open(member.log_path, "ab") as log:
            member.process = subprocess.Popen(self._argv(member, state), stdout=log, stderr=subprocess.STDOUT)

    def kill(self, member: EtcdMember) -> None:
        """SIGKILL one member (as a crash would)."""
        if member.process is not None and member.process.poll() is None:
            member.process.kill()
            member.process.wait()

    def _status(self, member: EtcdMember) -> tuple[int, int]:
        """``(this member's id, the leader's id)`` as ``member`` reports them."""
        from aetcd import rpc

        channel = _channel(member.endpoint, self.tls)
        try:
            status = rpc.MaintenanceStub(channel).Status(rpc.StatusRequest(), timeout=2.0)
            return int(status.header.member_id), int(status.leader)
        finally:
            channel.close()

    def make_leader(self, member: EtcdMember, timeout: float = 15.0) -> None:
        """Hand the raft leadership to ``member`` (etcd's MoveLeader, sent to the current leader)."""
        from aetcd import rpc

        target, _ = self._status(member)
        deadline = time.monotonic() + timeout
        while True:
            ids = {self._status(m)[0]: m for m in self.members if m.alive}
            leader = ids.get(self._status(member)[1])
            if leader is member:
                return
            if leader is not None:
                channel = _channel(leader.endpoint, self.tls)
                try:
                    request = rpc.MoveLeaderRequest(targetID=target)
                    rpc.MaintenanceStub(channel).MoveLeader(request, timeout=5.0)
                except grpc.RpcError:
                    pass  # an election in between: look again
                finally:
                    channel.close()
            if time.monotonic() > deadline:
                pytest.fail(f"etcd {member.name} did not become the leader within {timeout}s")
            time.sleep(0.1)

    def wait_ready(self, timeout: float = 30.0) -> None:
        """Until every live member answers a linearizable read (the cluster has a leader)."""
        from aetcd import rpc

        deadline = time.monotonic() + timeout
        started = [m for m in self.members if m.alive]
        for member in started:
            while True:
                # Any member that exits fails the wait at once: the others would wait for it in vain.
                for other in started:
                    if not other.alive:
                        pytest.fail(f"etcd {other.name} exited: {other.log_path.read_text()[-2000:]}")
                if _answers(rpc, member.endpoint, self.tls):
                    break
                if time.monotonic() > deadline:
                    pytest.fail(f"etcd {member.name} not ready after {timeout}s: "
                                f"{member.log_path.read_text()[-2000:]}")
                time.sleep(0.05)

    def stop(self) -> None:
        for member in self.members:
            if member.process is not None and member.process.poll() is None:
                member.process.kill()  # throwaway data: no graceful leader hand-over to wait for
        for member in self.members:
            if member.process is not None:
                try:
                    member.process.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    member.process.kill()
                    member.process.wait()


def _channel(endpoint: str, tls: EtcdTlsFiles | None) -> grpc.Channel:
    if tls is None:
        return grpc.insecure_channel(endpoint)
    creds = grpc.ssl_channel_credentials(tls.ca.read_bytes(), tls.key.read_bytes(), tls.cert.read_bytes())
    return grpc.secure_channel(endpoint, creds)


def _answers(rpc: object, endpoint: str, tls: EtcdTlsFiles | None) -> bool:
    channel = _channel(endpoint, tls)
    try:
        stub = rpc.KVStub(channel)  # type: ignore[attr-defined]
        stub.Range(rpc.RangeRequest(key=b"/", limit=1), timeout=1.0)  # type: ignore[attr-defined]
        return True
    except grpc.RpcError:
        return False
    finally:
        channel.close()


def _issue_tls(directory: Path,
               members: list[EtcdMember]) -> tuple[EtcdTlsFiles, dict[str, tuple[Path, Path]]]:
    from ironpool.apiserver.serving.certs import CertificateAuthority, CertPaths

    ca = CertificateAuthority.ensure(directory, "etcd-test-ca")
    serving: dict[str, tuple[Path, Path]] = {}
    for member in members:
        cert, key = ca.issue(member.name, ip_addresses=["127.0.0.1"], dns_names=["localhost"], server=True)
        paths = ca.write(CertPaths(directory / f"{member.name}.crt", directory / f"{member.name}.key"),
                         cert, key)
        serving[member.name] = (paths.cert, paths.key)
    cert, key = ca.issue("ironpool-apiserver")
    client = ca.write(CertPaths(directory / "client.crt", directory / "client.key"), cert, key)
    return EtcdTlsFiles(ca.paths.cert, client.cert, client.key), serving


@contextmanager
def etcd_cluster(size: int = 1, *, tls: bool = False, fast: bool = True,
                 base: Path | None = None) -> Iterator[EtcdCluster]:
    """Start ``size`` members, wait for a leader, and stop them (removing their data) afterwards."""
    require_etcd()
    root = Path(tempfile.mkdtemp(prefix="ironpool-etcd-", dir="/dev/shm" if fast else base))
    try:
        cluster = _started(root, size, tls)
        try:
            yield cluster
        finally:
            cluster.stop()
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _started(root: Path, size: int, tls: bool, attempts: int = 3) -> EtcdCluster:
    """A cluster of ``size`` members under ``root`` that has a leader. A port can still be taken by
    another process between being picked and etcd binding it: such a cluster starts anew on others."""
    attempt = 0
    while True:
        attempt += 1
        home = root / str(attempt)
        home.mkdir()
        members = [EtcdMember(f"m{i}", free_port(), free_port(), home / f"m{i}", home / f"m{i}.log")
                   for i in range(size)]
        cluster = EtcdCluster(members)
        try:
            if tls:
                cluster.tls, cluster._serving = _issue_tls(home / "pki", members)
            for member in members:
                cluster.start(member)
            cluster.wait_ready()
            return cluster
        except BaseException:
            cluster.stop()
            if attempt == attempts or not any(_lost_its_port(m) for m in members):
                raise


def _lost_its_port(member: EtcdMember) -> bool:
    return member.log_path.exists() and "address already in use" in member.log_path.read_text()
