"""Pool identities narrowed like Kubernetes' Node authorizer, on SQLite and on a real etcd: a pool
gets a Secret, Volume or NetworkInterface only while a Machine (or Volume) bound to it references it,
never lists or watches Secrets, cannot patch another pool's Machines nor change the spec of its own.

On etcd two apiservers share the store: the objects are written through one and the pool asks the
other, whose graph and RBAC index follow the store by watch."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from ironpool.apiserver.app import build_app
from ironpool.apiserver.auth.authentication import Authenticator, parse_token_file
from ironpool.store.etcd import EtcdStore
from ironpool.store.interface import Store
from ironpool.store.sqlite import SQLiteStore

from tests.helpers.etcd import EtcdCluster, etcd_cluster, require_etcd
from tests.helpers.wait import eventually

COMPUTE = "/apis/compute.ironcore.dev/v1alpha1"
STORAGE = "/apis/storage.ironcore.dev/v1alpha1"
NETWORKING = "/apis/networking.ironcore.dev/v1alpha1"
MACHINES = f"{COMPUTE}/namespaces/default/machines"
SECRETS = "/api/v1/namespaces/default/secrets"
VOLUMES = f"{STORAGE}/namespaces/default/volumes"
NICS = f"{NETWORKING}/namespaces/default/networkinterfaces"
RBAC = "/apis/rbac.authorization.k8s.io/v1"
MERGE = {"Content-Type": "application/merge-patch+json"}
MP = "compute.ironcore.dev:system:machinepool:"
VP = "storage.ironcore.dev:system:volumepool:"
TOKENS = (f'admin,admin,1,"system:masters"\nalice,alice,2\n'
          f'pool-a,{MP}pool-a,3,"compute.ironcore.dev:system:machinepools"\npool-b,{MP}pool-b,4\n'
          f'vpool-a,{VP}vpool-a,5,"storage.ironcore.dev:system:volumepools"\n')


def code(r: httpx.Response, expected: int) -> dict[str, Any]:
    assert r.status_code == expected, r.text
    return r.json()


def refused(r: httpx.Response, words: str) -> None:
    assert code(r, 403)["message"].find(words) >= 0, r.text


@pytest.fixture(scope="module")
def etcd() -> Iterator[EtcdCluster]:
    require_etcd()
    with etcd_cluster(1) as cluster:
        yield cluster


class Servers:
    """``writer`` (the admin's apiserver) and ``reader`` (the pools'): one app on SQLite, two apps on
    one etcd."""

    def __init__(self, apps: list[Any], stores: list[Store]) -> None:
        self.apps, self.stores = apps, stores
        self.transports = [httpx.ASGITransport(app=a) for a in apps]
        self.clients: list[httpx.AsyncClient] = []

    def client(self, who: str, reader: bool = True) -> httpx.AsyncClient:
        c = httpx.AsyncClient(transport=self.transports[-1 if reader else 0], base_url="http://test",
                              headers={"Authorization": f"Bearer {who}"})
        self.clients.append(c)
        return c

    async def close(self) -> None:
        for c in self.clients:
            await c.aclose()
        for a, s in zip(self.apps, self.stores, strict=True):
            await a.state.apiserver.authorize.stop()
            await s.close()


@pytest.fixture(params=["sqlite", "etcd"])
async def servers(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Servers]:
    stores: list[Store]
    if request.param == "sqlite":
        stores = [SQLiteStore(str(tmp_path / "graph.db"))]
    else:
        cluster: EtcdCluster = request.getfixturevalue("etcd")
        root = f"/t-{uuid.uuid4().hex[:8]}"
        stores = [EtcdStore(cluster.endpoints + root, compaction_interval=0) for _ in range(2)]
    apps = [build_app(s, Authenticator(parse_token_file(TOKENS))) for s in stores]
    s = Servers(apps, stores)
    yield s
    await s.close()


async def seed(admin: httpx.AsyncClient) -> None:
    code(await admin.post(f"{COMPUTE}/machineclasses", json={
        "metadata": {"name": "small"}, "capabilities": {"cpu": "1", "memory": "1Gi"}}), 201)
    for pool in ("pool-a", "pool-b"):
        code(await admin.post(f"{COMPUTE}/machinepools", json={"metadata": {"name": pool}}), 201)
        code(await admin.patch(f"{COMPUTE}/machinepools/{pool}/status", headers=MERGE,
                               json={"status": {"allocatable": {"cpu": "8", "memory": "16Gi"}}}), 200)
    for name in ("ign-a", "ign-b", "key-a", "key-b", "pull-a", "pull-b"):
        code(await admin.post(SECRETS, json={"metadata": {"name": name}, "type": "Opaque",
                                             "stringData": {"ignition": "{}", "encryptionKey": "k"}}), 201)
    code(await admin.post(f"{STORAGE}/volumeclasses", json={
        "metadata": {"name": "fast"}, "capabilities": {"tps": "100Mi", "iops": "100"}}), 201)
    for name, key in (("vol-a", "key-a"), ("vol-b", "key-b")):
        code(await admin.post(VOLUMES, json={"metadata": {"name": name}, "spec": {
            "volumeClassRef": {"name": "fast"},
            "volumePoolRef": {"name": "vpool-a" if name == "vol-a" else "x"},
            "resources": {"storage": "1Gi"}, "encryption": {"secretRef": {"name": key}}}}), 201)
    code(await admin.post(f"{NETWORKING}/namespaces/default/networks",
                          json={"metadata": {"name": "lab"}}), 201)
    code(await admin.post("/apis/ipam.ironcore.dev/v1alpha1/namespaces/default/prefixes", json={
        "metadata": {"name": "lab-v4"}, "spec": {"prefix": "10.0.0.0/24"}}), 201)
    for name in ("nic-a", "nic-b"):
        code(await admin.post(NICS, json={"metadata": {"name": name}, "spec": {
            "networkRef": {"name": "lab"}, "ipFamilies": ["IPv4"],
            "ips": [{"ephemeral": {"prefixTemplate": {"spec": {"parentRef": {"name": "lab-v4"}}}}}]}}), 201)
    for name, pool in (("ma", "pool-a"), ("mb", "pool-b")):
        suffix = name[-1]
        code(await admin.post(MACHINES, json={"metadata": {"name": name}, "spec": {
            "machineClassRef": {"name": "small"}, "machinePoolRef": {"name": pool},
            "ignitionRef": {"name": f"ign-{suffix}"}, "imagePullSecret": {"name": f"pull-{suffix}"},
            "volumes": [{"name": "data", "volumeRef": {"name": f"vol-{suffix}"}}],
            "networkInterfaces": [{"name": "eth0", "networkInterfaceRef": {"name": f"nic-{suffix}"}}],
        }}), 201)


async def test_pool_reads_only_along_its_graph(servers: Servers) -> None:
    await seed(servers.client("admin", reader=False))
    pool = servers.client("pool-a")
    # its own Machine's Secret, Volume and NIC (the reader apiserver may hear of them a moment later)
    await eventually(lambda: _status(pool.get(f"{SECRETS}/ign-a"), 200), message="graph on the reader")
    code(await pool.get(f"{VOLUMES}/vol-a"), 200)
    code(await pool.get(f"{NICS}/nic-a"), 200)
    code(await pool.get(f"{SECRETS}/pull-a"), 200)  # its image pull secret
    refused(await pool.get(f"{SECRETS}/pull-b"), "no machine bound")
    # another pool's
    refused(await pool.get(f"{SECRETS}/ign-b"),
            f'secrets "ign-b" is forbidden: User "{MP}pool-a" cannot get resource "secrets" in API group "" '
            'in the namespace "default": no machine bound to machine pool "pool-a" references it')
    refused(await pool.get(f"{VOLUMES}/vol-b"), 'volumes.storage.ironcore.dev "vol-b" is forbidden')
    refused(await pool.get(f"{NICS}/nic-b"), 'networkinterfaces.networking.ironcore.dev "nic-b" is forbidden')
    refused(await pool.get(f"{SECRETS}/key-a"), "no machine bound")  # not referenced by a Machine
    # no lists or watches of Secrets at all
    for path, params in ((SECRETS, {}), ("/api/v1/secrets", {}), (SECRETS, {"watch": "true"}),
                         (SECRETS, {"fieldSelector": "metadata.name=ign-a"})):
        refused(await pool.get(path, params=params), 'secrets is forbidden: User "compute.ironcore.dev')
    # the existing pool rules, on this store too
    refused(await pool.patch(f"{MACHINES}/mb", headers=MERGE, json={"metadata": {"labels": {"x": "y"}}}),
            'the machine is bound to machine pool "pool-b"')
    refused(await pool.patch(f"{MACHINES}/ma", headers=MERGE, json={"spec": {"power": "Off"}}),
            "may change only the finalizers, labels and annotations")
    # the edge goes with the reference: the Machine deleted, its Secret is out of reach
    admin = servers.client("admin", reader=False)
    code(await admin.delete(f"{MACHINES}/ma"), 200)
    await eventually(lambda: _status(pool.get(f"{SECRETS}/ign-a"), 403), message="edge removed on the reader")
    # a volume pool: the encryption Secret of its own Volume, not of another pool's
    vpool = servers.client("vpool-a")
    code(await vpool.get(f"{SECRETS}/key-a"), 200)
    refused(await vpool.get(f"{SECRETS}/key-b"), 'no volume bound to volume pool "vpool-a" references it')
    refused(await vpool.get(f"{NICS}/nic-a"), "networkinterfaces.networking.ironcore.dev")
    refused(await vpool.get(SECRETS), "secrets is forbidden")


async def test_bindings_of_the_other_apiserver_authorize(servers: Servers) -> None:
    admin, alice = servers.client("admin", reader=False), servers.client("alice")
    refused(await alice.get(MACHINES), 'User "alice" cannot list resource "machines"')
    code(await admin.post(f"{RBAC}/namespaces/default/rolebindings", json={
        "metadata": {"name": "alice-view"}, "subjects": [{"kind": "User", "name": "alice"}],
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"}}), 201)
    await eventually(lambda: _status(alice.get(MACHINES), 200), message="binding on the reader")
    refused(await alice.post(MACHINES, json={"metadata": {"name": "m"}, "spec": {}}), "cannot create")


async def _status(request: Any, expected: int) -> bool:
    return bool((await request).status_code == expected)


async def test_a_pool_writes_only_its_part_of_a_reservation(servers: Servers) -> None:
    admin, pool = servers.client("admin", reader=False), servers.client("pool-a")
    await seed(admin)
    rsv = f"{COMPUTE}/namespaces/default/reservations"
    code(await admin.post(rsv, json={"metadata": {"name": "web"},
                                     "spec": {"resources": {"class/machine.small": "2"}}}), 201)
    entries = [{"ref": "pool-a", "state": "Pending", "resources": {"class/machine.small": "1"}},
               {"ref": "pool-b", "state": "Pending", "resources": {"class/machine.small": "1"}}]
    code(await admin.patch(f"{rsv}/web/status", headers=MERGE, json={"status": {"pools": entries}}), 200)
    await eventually(lambda: _status(pool.get(f"{rsv}/web"), 200), message="the reader to know web")
    code(await pool.get(rsv), 200)  # its informer lists every Reservation

    def states(a: str, b: str) -> dict[str, Any]:
        return {"status": {"pools": [{**entries[0], "state": a}, {**entries[1], "state": b}]}}

    code(await pool.patch(f"{rsv}/web/status", headers=MERGE, json=states("Accepted", "Pending")), 200)
    refused(await pool.patch(f"{rsv}/web/status", headers=MERGE, json=states("Accepted", "Rejected")),
            'only the state of pool "pool-a"')
    bigger = {"status": {"pools": [{**entries[0], "state": "Accepted",
                                    "resources": {"class/machine.small": "2"}}, entries[1]]}}
    refused(await pool.patch(f"{rsv}/web/status", headers=MERGE, json=bigger),
            'only the state of pool "pool-a"')
    own = "machinepoollet.ironcore.dev/reservation-pool-a"
    code(await pool.patch(f"{rsv}/web", headers=MERGE, json={"metadata": {"finalizers": [own]}}), 200)
    refused(await pool.patch(f"{rsv}/web", headers=MERGE,
                             json={"metadata": {"finalizers": [own, own.replace("-a", "-b")]}}),
            f'only add or remove its finalizer "{own}"')
    refused(await pool.patch(f"{rsv}/web", headers=MERGE, json={"spec": {"ttlSecondsAfterCreation": 5}}),
            "only add or remove its finalizer")
    refused(await servers.client("vpool-a").get(rsv), "")
