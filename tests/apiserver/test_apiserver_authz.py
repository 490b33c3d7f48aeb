"""Authorization of pool identities against a real apiserver process (and a real machinepoollet)."""

from __future__ import annotations

import asyncio
import os
import secrets
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from ironpool.poollet.keys import MACHINE_FINALIZER

from tests.conftest import ApiServer, start_apiserver, stop_apiserver

sys.path.insert(0, str(Path(__file__).parents[1] / "poollet"))
from fake_iri import FakeIriServer, FakeMachineRuntime, FakeVolumeRuntime

COMPUTE = "/apis/compute.ironcore.dev/v1alpha1"
STORAGE = "/apis/storage.ironcore.dev/v1alpha1"
MACHINES = f"{COMPUTE}/namespaces/default/machines"
VOLUMES = f"{STORAGE}/namespaces/default/volumes"
SECRETS = "/api/v1/namespaces/default/secrets"
MERGE = {"Content-Type": "application/merge-patch+json"}
MP_USER = "compute.ironcore.dev:system:machinepool:pool-a"
VP_USER = "storage.ironcore.dev:system:volumepool:vpool-a"


class Server:
    """The apiserver with tokens for admin, alice, two machine pools, a volume pool and a group member."""

    def __init__(self, api: ApiServer, tokens: dict[str, str]) -> None:
        self.api = api
        self.tokens = tokens

    def client(self, who: str) -> httpx.Client:
        fixed = {"admin": self.api.admin_token, "alice": self.api.user_token}
        token = fixed[who] if who in fixed else self.tokens[who]
        return httpx.Client(base_url=self.api.url, headers={"Authorization": f"Bearer {token}"}, timeout=10)


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    tokens = {k: secrets.token_hex(16) for k in ("pool-a", "pool-b", "vpool-a", "group-only")}
    admin, alice = secrets.token_hex(16), secrets.token_hex(16)
    (tmp_path / "tokens.csv").write_text(
        f'{admin},admin,1,"system:masters"\n{alice},alice,2,"developers"\n'
        f'{tokens["pool-a"]},{MP_USER},3,"compute.ironcore.dev:system:machinepools"\n'
        f'{tokens["pool-b"]},compute.ironcore.dev:system:machinepool:pool-b,4\n'
        f'{tokens["vpool-a"]},{VP_USER},5,"storage.ironcore.dev:system:volumepools"\n'
        f'{tokens["group-only"]},somebody,6,"compute.ironcore.dev:system:machinepools"\n'
    )
    api = start_apiserver(tmp_path)
    try:
        yield Server(api, tokens)
    finally:
        stop_apiserver(api)


def ok(response: httpx.Response, code: int = 200) -> dict[str, Any]:
    assert response.status_code == code, response.text
    return response.json()


def refused(response: httpx.Response, message: str) -> dict[str, Any]:
    """A 403 Status in Kubernetes' wording starting with ``message``."""
    assert response.status_code == 403, response.text
    status = response.json()
    assert (status["kind"], status["reason"], status["code"]) == ("Status", "Forbidden", 403)
    assert status["message"].startswith(message), status["message"]
    return status


def machine(name: str, pool: str | None) -> dict[str, Any]:
    spec: dict[str, Any] = {"machineClassRef": {"name": "small"}}
    if pool:
        spec["machinePoolRef"] = {"name": pool}
    return {"metadata": {"name": name, "namespace": "default"}, "spec": spec}


def seed(s: Server) -> None:
    with s.client("admin") as admin:
        ok(admin.post(f"{COMPUTE}/machineclasses", json={
            "metadata": {"name": "small"}, "capabilities": {"cpu": "1", "memory": "1Gi"}}), 201)
        for pool in ("pool-a", "pool-b"):
            ok(admin.post(f"{COMPUTE}/machinepools", json={"metadata": {"name": pool}}), 201)
            ok(admin.patch(f"{COMPUTE}/machinepools/{pool}/status", headers=MERGE,
                           json={"status": {"allocatable": {"cpu": "8", "memory": "16Gi"}}}))
        for name, bound in (("ma", "pool-a"), ("mb", "pool-b"), ("free", None)):
            ok(admin.post(MACHINES, json=machine(name, bound)), 201)


def test_machine_pool_identity_is_refused_outside_its_pool(server: Server) -> None:
    seed(server)
    with server.client("pool-a") as c:
        refused(c.patch(f"{COMPUTE}/machinepools/pool-b/status", headers=MERGE,
                        json={"status": {"state": "Ready"}}),
                f'machinepools.compute.ironcore.dev "pool-b" is forbidden: User "{MP_USER}" cannot patch '
                'resource "machinepools/status" in API group "compute.ironcore.dev" at the cluster scope')
        refused(c.get(f"{COMPUTE}/machinepools/pool-b"), 'machinepools.compute.ironcore.dev "pool-b"')
        refused(c.post(f"{COMPUTE}/machinepools", json={"metadata": {"name": "pool-z"}}),
                "machinepools.compute.ironcore.dev is forbidden")
        # A Machine bound to another pool: neither its status nor its metadata.
        status = refused(
            c.patch(f"{MACHINES}/mb/status", headers=MERGE, json={"status": {"state": "Running"}}),
            f'machines.compute.ironcore.dev "mb" is forbidden: User "{MP_USER}" cannot patch resource '
            '"machines/status" in API group "compute.ironcore.dev" in the namespace "default": '
            'the machine is bound to machine pool "pool-b"')
        assert status["details"] == {"name": "mb", "group": "compute.ironcore.dev", "kind": "machines"}
        refused(c.patch(f"{MACHINES}/mb", headers=MERGE, json={"metadata": {"finalizers": ["x"]}}),
                'machines.compute.ironcore.dev "mb" is forbidden')
        # Taking a Machine: moving it off another pool, or binding an unscheduled one to itself.
        mb = ok(c.get(f"{MACHINES}/mb"))
        mb["spec"]["machinePoolRef"] = {"name": "pool-a"}
        refused(c.put(f"{MACHINES}/mb", json=mb),
                f'machines.compute.ironcore.dev "mb" is forbidden: User "{MP_USER}" cannot update resource '
                '"machines" in API group "compute.ironcore.dev" in the namespace "default"')
        refused(c.patch(f"{MACHINES}/free", headers=MERGE,
                        json={"spec": {"machinePoolRef": {"name": "pool-a"}}}),
                'machines.compute.ironcore.dev "free" is forbidden')
        # ... or re-pointing its own Machine (or changing its spec at all).
        refused(c.patch(f"{MACHINES}/ma", headers=MERGE,
                        json={"spec": {"machinePoolRef": {"name": "pool-b"}}}),
                'machines.compute.ironcore.dev "ma" is forbidden')
        refused(c.patch(f"{MACHINES}/ma", headers=MERGE, json={"spec": {"power": "Off"}}),
                'machines.compute.ironcore.dev "ma" is forbidden')
        refused(c.delete(f"{COMPUTE}/machineclasses/small"),
                f'machineclasses.compute.ironcore.dev "small" is forbidden: User "{MP_USER}" cannot delete')
        refused(c.post(MACHINES, json=machine("new", "pool-a")),
                f'machines.compute.ironcore.dev is forbidden: User "{MP_USER}" cannot create resource '
                '"machines" in API group "compute.ironcore.dev" in the namespace "default"')
        refused(c.delete(f"{MACHINES}/ma"), 'machines.compute.ironcore.dev "ma" is forbidden')
        refused(c.get(MACHINES), "machines.compute.ironcore.dev is forbidden")
        refused(c.get(MACHINES, params={"fieldSelector": "spec.machinePoolRef.name=pool-b"}),
                "machines.compute.ironcore.dev is forbidden")
        refused(c.post(f"{STORAGE}/volumeclasses", json={"metadata": {"name": "v"}}),
                "volumeclasses.storage.ironcore.dev is forbidden")
    with server.client("admin") as admin:
        after = ok(admin.get(f"{MACHINES}/mb"))
        assert after["spec"]["machinePoolRef"] == {"name": "pool-b"} and "status" not in after
        assert ok(admin.get(f"{MACHINES}/free"))["spec"].get("machinePoolRef") is None
        assert ok(admin.get(f"{MACHINES}/ma"))["spec"]["machinePoolRef"] == {"name": "pool-a"}
        assert ok(admin.get(f"{COMPUTE}/machineclasses/small"))["metadata"]["name"] == "small"


def test_machine_pool_identity_may_do_what_its_poollet_needs(server: Server) -> None:
    seed(server)
    with server.client("pool-a") as c:
        selector = {"fieldSelector": "spec.machinePoolRef.name=pool-a"}
        assert [m["metadata"]["name"] for m in ok(c.get(MACHINES, params=selector))["items"]] == ["ma"]
        with c.stream("GET", MACHINES, params={**selector, "watch": "true", "timeoutSeconds": "1"}) as w:
            assert w.status_code == 200
            first = next(w.iter_lines())
            assert '"name":"ma"' in first and '"type":"ADDED"' in first
        assert ok(c.get(f"{MACHINES}/mb"))["metadata"]["name"] == "mb"  # get by name (garbage collection)
        for path in (f"{COMPUTE}/machineclasses", "/api/v1/namespaces", VOLUMES):
            ok(c.get(path))
        refused(c.get(SECRETS), 'secrets is forbidden: User "compute.ironcore.dev:system:machinepool:pool-a" '
                'cannot list resource "secrets"')  # Secrets only one at a time, along the pool graph
        ok(c.get(f"{COMPUTE}/machinepools/pool-a"))
        ok(c.get(f"{COMPUTE}/machinepools", params={"fieldSelector": "metadata.name=pool-a"}))
        ok(c.patch(f"{COMPUTE}/machinepools/pool-a", headers=MERGE,
                   json={"metadata": {"labels": {"topology.ironcore.dev/zone": "z1"}},
                         "spec": {"providerID": "fake://pool-a"}}))
        ok(c.patch(f"{COMPUTE}/machinepools/pool-a/status", headers=MERGE,
                   json={"status": {"state": "Ready"}}))
        ma = ok(c.get(f"{MACHINES}/ma"))
        ma["metadata"]["finalizers"] = [MACHINE_FINALIZER]
        updated = ok(c.put(f"{MACHINES}/ma", json=ma))
        assert updated["metadata"]["generation"] == 1
        ok(c.patch(f"{MACHINES}/ma/status", headers=MERGE, json={"status": {"state": "Running"}}))
        ok(c.post("/api/v1/namespaces/default/events", json={
            "metadata": {"name": "ma.1", "namespace": "default"},
            "involvedObject": {"kind": "Machine", "name": "ma", "namespace": "default"},
            "reason": "Created", "message": "m", "type": "Normal"}), 201)
    with server.client("admin") as admin:
        got = ok(admin.get(f"{MACHINES}/ma"))
        assert got["status"]["state"] == "Running"
        assert got["metadata"]["finalizers"] == [MACHINE_FINALIZER]


def test_machine_pool_claims_volumes_only_for_its_own_machines(server: Server) -> None:
    seed(server)
    with server.client("admin") as admin:
        for name in ("v1", "v2", "unreferenced"):
            ok(admin.post(VOLUMES, json={"metadata": {"name": name, "namespace": "default"},
                                         "spec": {}}), 201)
        for name, volume in (("ma", "v1"), ("mb", "v2")):
            ok(admin.patch(f"{MACHINES}/{name}", headers=MERGE, json={"spec": {"volumes": [
                {"name": "data", "volumeRef": {"name": volume}}]}}))
        uid_a = ok(admin.get(f"{MACHINES}/ma"))["metadata"]["uid"]
        uid_b = ok(admin.get(f"{MACHINES}/mb"))["metadata"]["uid"]
    with server.client("pool-a") as c:
        # A volume none of its machines references: no get, and no claim either (the same graph).
        refused(c.get(f"{VOLUMES}/unreferenced"), 'volumes.storage.ironcore.dev "unreferenced" is forbidden')
        refused(c.patch(f"{VOLUMES}/unreferenced", headers=MERGE,
                        json={"spec": {"claimRef": {"name": "ma", "uid": uid_a}}}),
                'volumes.storage.ironcore.dev "unreferenced" is forbidden: User '
                f'"{MP_USER}" cannot patch resource "volumes" in API group "storage.ironcore.dev" in the '
                'namespace "default": machine "ma" is not a live machine bound to pool "pool-a" that '
                "references this volume")
        ok(c.patch(f"{VOLUMES}/v1", headers=MERGE, json={"spec": {"claimRef": {"name": "ma", "uid": uid_a}}}))
        ok(c.patch(f"{VOLUMES}/v1", headers=MERGE, json={"spec": {"claimRef": None}}))
        refused(c.patch(f"{VOLUMES}/v1", headers=MERGE,
                        json={"spec": {"claimRef": {"name": "mb", "uid": uid_b}}}),
                'volumes.storage.ironcore.dev "v1" is forbidden')
        refused(c.patch(f"{VOLUMES}/v1", headers=MERGE, json={"spec": {"unclaimable": True}}),
                'volumes.storage.ironcore.dev "v1" is forbidden')
    with server.client("pool-b") as c:
        ok(c.patch(f"{VOLUMES}/v2", headers=MERGE, json={"spec": {"claimRef": {"name": "mb", "uid": uid_b}}}))
    with server.client("pool-a") as c:  # a live claim of another pool's machine stays
        refused(c.patch(f"{VOLUMES}/v2", headers=MERGE, json={"spec": {"claimRef": None}}),
                'volumes.storage.ironcore.dev "v2" is forbidden')
    with server.client("admin") as admin:
        ok(admin.patch(f"{MACHINES}/mb", headers=MERGE, json={"metadata": {"finalizers": None}}))
        ok(admin.delete(f"{MACHINES}/mb"))
    with server.client("pool-a") as c:  # ... but a stale one (its machine is gone) may be cleared
        ok(c.patch(f"{VOLUMES}/v2", headers=MERGE, json={"spec": {"claimRef": None}}))


def test_volume_pool_identity(server: Server) -> None:
    with server.client("admin") as admin:
        ok(admin.post(f"{STORAGE}/volumeclasses", json={
            "metadata": {"name": "fast"}, "capabilities": {"tps": "100Mi", "iops": "100"}}), 201)
        for name, pool in (("va", "vpool-a"), ("vb", "vpool-b")):
            ok(admin.post(VOLUMES, json={"metadata": {"name": name, "namespace": "default"}, "spec": {
                "volumeClassRef": {"name": "fast"}, "volumePoolRef": {"name": pool},
                "resources": {"storage": "1Gi"}}}), 201)
        uids = {n: ok(admin.get(f"{VOLUMES}/{n}"))["metadata"]["uid"] for n in ("va", "vb")}

    def secret(name: str, volume: str) -> dict[str, Any]:
        return {"metadata": {"name": name, "namespace": "default", "ownerReferences": [
            {"apiVersion": "storage.ironcore.dev/v1alpha1", "kind": "Volume", "name": volume,
             "uid": uids[volume], "controller": True}]}, "data": {"k": "dg=="}}

    with server.client("vpool-a") as c:
        ok(c.post(f"{STORAGE}/volumepools", json={"metadata": {"name": "vpool-a"}}), 201)
        ok(c.get(VOLUMES, params={"fieldSelector": "spec.volumePoolRef.name=vpool-a"}))
        refused(c.get(VOLUMES), "volumes.storage.ironcore.dev is forbidden")
        ok(c.patch(f"{VOLUMES}/va/status", headers=MERGE, json={"status": {"state": "Available"}}))
        refused(c.patch(f"{VOLUMES}/vb/status", headers=MERGE, json={"status": {"state": "Available"}}),
                f'volumes.storage.ironcore.dev "vb" is forbidden: User "{VP_USER}" cannot patch resource '
                '"volumes/status" in API group "storage.ironcore.dev" in the namespace "default"')
        ok(c.post(SECRETS, json=secret("sa", "va")), 201)
        ok(c.patch(f"{SECRETS}/sa", headers=MERGE, json={"data": {"k": "dw=="}}))
        refused(c.patch(f"{SECRETS}/sa", headers=MERGE, json={"metadata": {"ownerReferences": None}}),
                'secrets "sa" is forbidden')
        refused(c.post(SECRETS, json=secret("sb", "vb")),
                f'secrets is forbidden: User "{VP_USER}" cannot create resource "secrets" in API group ""')
        refused(c.delete(f"{SECRETS}/sa"), 'secrets "sa" is forbidden')
        refused(c.get(MACHINES), "machines.compute.ironcore.dev is forbidden")
    # A claim may be released by the volume pool only once its machine is gone.
    with server.client("admin") as admin:
        ok(admin.post(f"{COMPUTE}/machineclasses", json={
            "metadata": {"name": "small"}, "capabilities": {"cpu": "1", "memory": "1Gi"}}), 201)
        uid = ok(admin.post(MACHINES, json=machine("m1", None)), 201)["metadata"]["uid"]
        ok(admin.patch(f"{VOLUMES}/va", headers=MERGE,
                       json={"spec": {"claimRef": {"name": "m1", "uid": uid}}}))
    with server.client("vpool-a") as c:
        refused(c.patch(f"{VOLUMES}/va", headers=MERGE, json={"spec": {"claimRef": None}}),
                'volumes.storage.ironcore.dev "va" is forbidden')
        with server.client("admin") as admin:
            ok(admin.delete(f"{MACHINES}/m1"))
        ok(c.patch(f"{VOLUMES}/va", headers=MERGE, json={"spec": {"claimRef": None}}))
        refused(c.patch(f"{VOLUMES}/va", headers=MERGE, json={"spec": {"resources": {"storage": "2Gi"}}}),
                'volumes.storage.ironcore.dev "va" is forbidden')
    with server.client("admin") as admin:
        assert ok(admin.get(f"{SECRETS}/sa"))["data"] == {"k": "dw=="}
        assert ok(admin.get(f"{VOLUMES}/vb")).get("status") is None


def test_users_admins_and_nameless_group_members(server: Server) -> None:
    seed(server)
    with server.client("alice") as c:  # RBAC: nothing without a binding
        refused(c.post(MACHINES, json=machine("by-alice", "pool-b")),
                'machines.compute.ironcore.dev is forbidden: User "alice" cannot create resource "machines"')
    with server.client("admin") as admin:
        ok(admin.post("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", json={
            "metadata": {"name": "alice-admin"}, "subjects": [{"kind": "User", "name": "alice"}],
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                        "name": "cluster-admin"}}), 201)
    for who in ("alice", "admin"):
        with server.client(who) as c:
            ok(c.post(MACHINES, json=machine(f"by-{who}", "pool-b")), 201)
            ok(c.patch(f"{MACHINES}/by-{who}/status", headers=MERGE, json={"status": {"state": "Running"}}))
            ok(c.patch(f"{COMPUTE}/machinepools/pool-a/status", headers=MERGE,
                       json={"status": {"state": "Ready"}}))
            ok(c.get(MACHINES))
            ok(c.delete(f"{MACHINES}/by-{who}"))
    with server.client("alice") as c:
        ok(c.delete(f"{COMPUTE}/machineclasses/small"))
    with server.client("group-only") as c:  # in the pools group but no pool in its name: read only
        ok(c.get(f"{COMPUTE}/machineclasses"))
        refused(c.get(f"{COMPUTE}/machinepools/pool-a"),
                'machinepools.compute.ironcore.dev "pool-a" is forbidden: User "somebody" cannot get')


class PoolletProcess:
    """``ironpool <command>`` as a child process with a pool identity's token, against a fake IRI."""

    def __init__(self, server: Server, tmp_path: Path, who: str, command: str, runtime: Any,
                 *args: str) -> None:
        self.server, self.tmp_path, self.who, self.command = server, tmp_path, who, command
        self.runtime, self.args = runtime, args
        self.log_path = tmp_path / f"{command}.log"
        self.admin = httpx.AsyncClient(base_url=server.api.url, headers=server.api.headers(), timeout=10)

    async def __aenter__(self) -> PoolletProcess:
        self.sock_dir = tempfile.mkdtemp(prefix="iri-")  # unix socket paths are limited to 108 bytes
        self.iri = FakeIriServer(os.path.join(self.sock_dir, "iri.sock"), [self.runtime])
        await self.iri.start()
        token = self.tmp_path / f"{self.who}.token"
        token.write_text(self.server.tokens[self.who] + "\n")
        self.log = open(self.log_path, "ab")  # noqa: SIM115 - handed to the child
        self.proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "ironpool.cli.main", self.command, "--pool", self.who,
            "--provider-id", f"fake://{self.who}", "--iri", self.iri.endpoint,
            "--server", self.server.api.url,
            "--token-file", str(token), "--relist-period", "0.2", "--heartbeat-interval", "1", *self.args,
            stdout=self.log, stderr=self.log)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.admin.aclose()
        if self.proc.returncode is None:
            self.proc.terminate()
            await self.proc.wait()
        self.log.close()
        await self.iri.stop()
        shutil.rmtree(self.sock_dir, ignore_errors=True)

    async def until(self, predicate: Any, what: str, timeout: float = 30) -> Any:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            assert self.proc.returncode is None, self.log_path.read_text()[-3000:]
            result = await predicate()
            if result:
                return result
            await asyncio.sleep(0.05)
        pytest.fail(f"timed out waiting for {what}; {self.command} log: {self.log_path.read_text()[-3000:]}")

    async def get(self, path: str) -> Any:
        return (await self.admin.get(path)).json()

    async def pool_ready(self, pools: str) -> bool:
        p = await self.get(f"{pools}/{self.who}")
        conds = (p.get("status") or {}).get("conditions") or []
        return (p.get("spec") or {}).get("providerID") == f"fake://{self.who}" and any(
            c["type"] == "Ready" and c["status"] == "True" for c in conds)

    async def gone(self, path: str) -> bool:
        return (await self.admin.get(path)).status_code == 404

    def assert_never_refused(self) -> None:
        assert "forbidden" not in self.log_path.read_text().lower()


async def test_real_machinepoollet_with_a_pool_identity_runs_a_machine(
        server: Server, tmp_path: Path) -> None:
    """``ironpool machinepoollet`` with pool-a's token announces pool-a, claims the machine's volume,
    runs the Machine to Running and through deletion; the pool identity is enough for all of it."""
    with server.client("admin") as admin:
        ok(admin.post(f"{COMPUTE}/machineclasses", json={
            "metadata": {"name": "small"}, "capabilities": {"cpu": "1", "memory": "1Gi"}}), 201)
        # A volume of some volume pool, claimed by the poollet through the pool identity.
        ok(admin.post(VOLUMES, json={"metadata": {"name": "d1", "namespace": "default"}, "spec": {}}), 201)
        ok(admin.patch(f"{VOLUMES}/d1/status", headers=MERGE, json={"status": {
            "state": "Available", "resources": {"storage": "1Gi"},
            "access": {"driver": "ironpool-local", "handle": "h1", "volumeAttributes": {"path": "/h1"}}}}))
        vm1 = machine("vm1", "pool-a")
        vm1["spec"]["volumes"] = [{"name": "disk", "volumeRef": {"name": "d1"}}]
        vm1["spec"]["ignitionRef"] = {"name": "ign"}  # read by name along the pool graph
        ok(admin.post(MACHINES, json=vm1), 201)
        ok(admin.post(SECRETS, json={"metadata": {"name": "ign"}, "type": "Opaque",
                                     "stringData": {"ignition.yaml": "{ignition: {}}"}}), 201)
    runtime = FakeMachineRuntime()
    async with PoolletProcess(server, tmp_path, "pool-a", "machinepoollet", runtime,
                              "--capacity-cpu", "8", "--capacity-memory", "16Gi") as p:

        async def running() -> dict[str, Any] | None:
            m = await p.get(f"{MACHINES}/vm1")
            return m if (m.get("status") or {}).get("state") == "Running" else None

        vm = await p.until(running, "vm1 Running")
        assert vm["metadata"]["finalizers"] == [MACHINE_FINALIZER]
        created = next(c.request for c in runtime.calls if c.method == "CreateMachine")
        assert created.machine.spec.ignition_data == b"{ignition: {}}"
        claim = (await p.get(f"{VOLUMES}/d1"))["spec"].get("claimRef")
        assert claim == {"name": "vm1", "uid": vm["metadata"]["uid"]}
        await p.until(lambda: p.pool_ready(f"{COMPUTE}/machinepools"), "pool-a announced and Ready")
        ok(await p.admin.delete(f"{MACHINES}/vm1"))
        await p.until(lambda: p.gone(f"{MACHINES}/vm1"), "vm1 deleted through the poollet's finalizer")
        assert (await p.get(f"{VOLUMES}/d1"))["spec"].get("claimRef") is None
        p.assert_never_refused()


async def test_real_volumepoollet_with_a_pool_identity_provisions_a_volume(
        server: Server, tmp_path: Path) -> None:
    with server.client("admin") as admin:
        ok(admin.post(f"{STORAGE}/volumeclasses", json={
            "metadata": {"name": "fast"}, "capabilities": {"tps": "100", "iops": "1000"}}), 201)
        ok(admin.post(VOLUMES, json={"metadata": {"name": "data", "namespace": "default"}, "spec": {
            "volumeClassRef": {"name": "fast"}, "volumePoolRef": {"name": "vpool-a"},
            "resources": {"storage": "1Gi"}}}), 201)
    async with PoolletProcess(server, tmp_path, "vpool-a", "volumepoollet", FakeVolumeRuntime()) as p:

        async def available() -> dict[str, Any] | None:
            v = await p.get(f"{VOLUMES}/data")
            return v if (v.get("status") or {}).get("state") == "Available" else None

        vol = await p.until(available, "volume Available")
        assert vol["metadata"]["finalizers"]
        await p.until(lambda: p.pool_ready(f"{STORAGE}/volumepools"), "vpool-a announced and Ready")
        ok(await p.admin.delete(f"{VOLUMES}/data"))
        await p.until(lambda: p.gone(f"{VOLUMES}/data"), "volume deleted through the poollet's finalizer")
        p.assert_never_refused()
