"""Several apiservers over one etcd: the clusters and apiserver processes the HA tests share."""

from __future__ import annotations

import secrets
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import ApiServer, start_apiserver, stop_apiserver
from tests.helpers.etcd import EtcdCluster, etcd_cluster
from tests.helpers.net import free_port
from tests.helpers.runtimes import start_ironpool, wait_serving


@pytest.fixture(scope="module")
def etcd() -> Iterator[EtcdCluster]:
    """One etcd member for the module (data in /dev/shm)."""
    with etcd_cluster(1) as cluster:
        yield cluster


@dataclass
class ControlPlane:
    """Apiservers over one etcd cluster, all under the key prefix ``root``."""

    etcd: EtcdCluster
    root: str
    servers: list[ApiServer]

    @property
    def store_url(self) -> str:
        return self.etcd.url(self.root)

    def stop(self) -> None:
        for server in self.servers:
            stop_apiserver(server)


def start_control_plane(cluster: EtcdCluster, tmp: Path, count: int = 2) -> ControlPlane:
    """``count`` apiservers over ``cluster`` under a fresh key prefix, sharing one token file."""
    # Random, not counted: pytest loads this file as its conftest and tests import it again as
    # tests.ha.conftest, two modules with two counters that handed out the same prefix twice (one
    # test's schedulers then planned the module's Reservations onto its pools).
    plane = ControlPlane(cluster, f"/ha-{secrets.token_hex(6)}", [])
    try:
        for _ in range(count):
            plane.servers.append(start_apiserver(tmp, store_url=plane.store_url))
    except BaseException:
        plane.stop()
        raise
    return plane


@pytest.fixture(scope="module")
def two_apiservers(etcd: EtcdCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    """Two apiservers over the module's etcd."""
    plane = start_control_plane(etcd, tmp_path_factory.mktemp("apiservers"))
    try:
        yield plane
    finally:
        plane.stop()


@dataclass
class SchedulerProcess:
    """An ``ironpool scheduler`` replica with leader election and its /metrics."""

    process: subprocess.Popen[bytes]
    log: Path
    metrics_url: str

    def metrics(self) -> dict[str, float]:
        """``name{label=value,...}`` -> value of every sample on /metrics; {} while it does not answer."""
        try:
            text = httpx.get(self.metrics_url, timeout=2).text
        except httpx.HTTPError:
            return {}
        samples: dict[str, float] = {}
        for family in text_string_to_metric_families(text):
            for s in family.samples:
                labels = ",".join(f"{k}={v}" for k, v in sorted(s.labels.items()))
                samples[f"{s.name}{{{labels}}}"] = s.value
        return samples

    @property
    def leading(self) -> bool:
        return self.metrics().get("leader_election_master_status{name=ironpool-scheduler}") == 1.0

    def holder(self) -> str | None:
        """The Lease holder this replica last saw (from ``ironpool_scheduler_leader``)."""
        for key, value in self.metrics().items():
            if key.startswith("ironpool_scheduler_leader{") and value == 1.0:
                return key.split("holder=", 1)[1].split(",")[0].rstrip("}")
        return None

    def identity(self) -> str | None:
        for key in self.metrics():
            if key.startswith("ironpool_scheduler_identity{"):
                return key.split("identity=", 1)[1].rstrip("}")
        return None


def start_scheduler(plane: ControlPlane, tmp: Path, name: str, *args: str) -> SchedulerProcess:
    """A scheduler replica given every apiserver of ``plane``, serving /metrics on a free port."""
    config = tmp / f"{name}.yaml"
    config.write_text("queue: {initialBackoffSeconds: 0.05, maxBackoffSeconds: 0.5}\n")
    port = free_port()
    servers = ",".join(s.url for s in plane.servers)
    log = tmp / f"{name}.log"
    proc = start_ironpool(["scheduler", "--server", servers, "--token-file", str(plane.servers[0].token_file),
                           "--config", str(config), "--metrics-listen", f"127.0.0.1:{port}", *args], log)
    replica = SchedulerProcess(proc, log, f"http://127.0.0.1:{port}/metrics")
    wait_serving(proc, lambda: bool(replica.metrics()), log, f"scheduler {name}")
    return replica
