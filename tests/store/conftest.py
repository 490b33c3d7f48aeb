"""The etcd cluster the store tests share (one member, data in /dev/shm), started once per session."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.helpers.etcd import EtcdCluster, etcd_cluster


@pytest.fixture(scope="session", name="etcd_cluster")
def etcd_cluster_fixture() -> Iterator[EtcdCluster]:
    with etcd_cluster(1) as cluster:
        yield cluster
