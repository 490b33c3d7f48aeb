"""A fleet of real parts as separate processes, as an operator runs them: one apiserver (SQLite), one
``ironpool scheduler``, and per host an ``ironpool libvirt-runtime`` and an ``ironpool machinepoollet``
under the pool's own identity, each host given its capacity outright (``--capacity-cpu``), so that
"room for N x-small" holds on this shared machine. The front-end tests (Pulumi, Ansible) declare
against it; :meth:`Fleet.add_host` grows it.

Every domain a host made is removed on close, whatever happened.
"""

from __future__ import annotations

import contextlib
import secrets
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from tests.conftest import ApiServer, start_apiserver, stop_apiserver
from tests.helpers.qemu_dirs import qemu_tmpdir
from tests.helpers.runtimes import LIBVIRT_URI, build_tiny_image, start_ironpool, stop_process
from tests.helpers.wait import wait_until

CLASSES = """\
- apiVersion: compute.ironcore.dev/v1alpha1
  kind: MachineClass
  metadata: {name: x-small}
  capabilities: {cpu: "1", memory: 256Mi}
"""
COMPUTE = "/apis/compute.ironcore.dev/v1alpha1"
POOL_LABEL = "machinepoollet.ironpool.dev/pool"


@dataclass
class FleetHost:
    pool: str
    workdir: Path
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)


@dataclass
class Fleet:
    """The running fleet; ``server`` is the apiserver (its admin token in ``server.admin_token``)."""

    tmp: Path
    server: ApiServer
    tag: str
    images: Path
    scheduler: subprocess.Popen[bytes] | None = None
    hosts: list[FleetHost] = field(default_factory=list)

    def api(self) -> httpx.Client:
        return httpx.Client(base_url=self.server.url, headers=self.server.headers(), timeout=30)

    def add_host(self, cpu: int, server_url: str | None = None,
                 poollet_args: tuple[str, ...] = ()) -> FleetHost:
        """A host with room for ``cpu`` x-small: its runtime and poollet; back once its pool offers them.
        ``server_url``: where its poollet reaches the apiserver (a proxy a test cuts); ``poollet_args``:
        more flags for it."""
        pool = f"{self.tag}-{len(self.hosts)}"
        work = qemu_tmpdir("fleet-")
        host = FleetHost(pool, work)
        self.hosts.append(host)
        (work / "classes.yaml").write_text(CLASSES)
        token = secrets.token_hex(16)
        with self.server.token_file.open("a") as f:  # the apiserver reloads its token file
            f.write(f'{token},compute.ironcore.dev:system:machinepool:{pool},{pool},'
                    f'"compute.ironcore.dev:system:machinepools"\n')
        (work / "token").write_text(token)
        sock = work / "m.sock"
        host.procs.append(start_ironpool(
            ["libvirt-runtime", "--libvirt-uri", LIBVIRT_URI, "--classes", str(work / "classes.yaml"),
             "--images", str(self.images), "--image-cache", str(work / "image-cache"),
             "--state-dir", str(work / "state"), "--address", f"unix://{sock}",
             "--streaming-address", "127.0.0.1:0", "--shutdown-timeout", "3",
             "--capacity-cpu", str(cpu), "--capacity-memory", "8Gi"], work / "runtime.log"))
        wait_until(sock.exists, timeout=60, message=f"runtime of {pool}")
        host.procs.append(start_ironpool(
            ["machinepoollet", "--pool", pool, "--provider-id", f"libvirt://{pool}", "--iri", f"unix://{sock}",
             "--server", server_url or self.server.url, "--token-file", str(work / "token"),
             "--heartbeat-interval", "1", "--capacity-cpu", str(cpu), "--capacity-memory", "8Gi",
             *poollet_args], work / "poollet.log"))
        wait_until(lambda: self._offers(pool, cpu), timeout=60, message=f"{pool} to offer {cpu} x-small")
        return host

    def _offers(self, pool: str, count: int) -> bool:
        with self.api() as c:
            r = c.get(f"{COMPUTE}/machinepools/{pool}")
        alloc = ((r.json().get("status") or {}).get("allocatable") or {}) if r.status_code == 200 else {}
        return str(alloc.get("class/machine.x-small")) == str(count)

    def machines(self, namespace: str = "default") -> list[dict[str, object]]:
        with self.api() as c:
            return list(c.get(f"{COMPUTE}/namespaces/{namespace}/machines").json()["items"])

    def close(self) -> None:
        if self.scheduler is not None:
            stop_process(self.scheduler)
        with contextlib.suppress(Exception), self.api() as c:  # Machines first: the poollets remove domains
            for m in c.get(f"{COMPUTE}/machines").json()["items"]:
                meta = m["metadata"]
                c.delete(f"{COMPUTE}/namespaces/{meta['namespace']}/machines/{meta['name']}")
            deadline = time.monotonic() + 90
            while c.get(f"{COMPUTE}/machines").json()["items"] and time.monotonic() < deadline:
                time.sleep(0.5)
        for host in self.hosts:
            for proc in reversed(host.procs):
                stop_process(proc)
            _remove_domains(host.pool)
            shutil.rmtree(host.workdir, ignore_errors=True)
        stop_apiserver(self.server)


def _remove_domains(pool: str) -> None:
    from tests.helpers.runtimes import labelled_domains, remove_domains

    remove_domains(list(labelled_domains(POOL_LABEL, pool)))


@contextlib.contextmanager
def fleet(tmp: Path, cpus: list[int]):  # type: ignore[no-untyped-def]
    """A fleet with one host per entry of ``cpus`` (its room for x-small)."""
    images = build_tiny_image()
    tmp.mkdir(parents=True, exist_ok=True)
    server = start_apiserver(tmp)
    f = Fleet(tmp, server, f"fl-{secrets.token_hex(2)}", images)
    try:
        with f.api() as c:
            r = c.post(f"{COMPUTE}/machineclasses", json={
                "apiVersion": "compute.ironcore.dev/v1alpha1", "kind": "MachineClass",
                "metadata": {"name": "x-small"}, "capabilities": {"cpu": "1", "memory": "256Mi"}})
            assert r.status_code == 201, r.text
        config = tmp / "scheduler.yaml"
        config.write_text("queue: {initialBackoffSeconds: 0.05, maxBackoffSeconds: 0.5}\n")
        f.scheduler = start_ironpool(["scheduler", "--server", server.url, "--token-file",
                                      str(server.token_file), "--config", str(config), "--no-leader-elect"],
                                     tmp / "scheduler.log")
        for cpu in cpus:
            f.add_host(cpu)
        yield f
    finally:
        f.close()
