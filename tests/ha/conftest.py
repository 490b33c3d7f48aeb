"""Several apiservers over one etcd: the clusters and apiserver processes the HA tests share."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.conftest import ApiServer, start_apiserver, stop_apiserver
from tests.helpers.etcd import EtcdCluster, etcd_cluster

_ROOTS = itertools.count()


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
    plane = ControlPlane(cluster, f"/ha-{next(_ROOTS)}", [])
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
