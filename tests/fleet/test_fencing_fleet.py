"""Self-fencing and exclusive volume attachment with real processes and real libvirt: an apiserver, a
scheduler and a controller-manager; two hosts (``ironpool libvirt-runtime`` + ``ironpool
machinepoollet --fence-after``), the first reaching the apiserver through a proxy the test cuts; and a
shared volume pool (``ironpool volume-runtime`` + ``volumepoollet``) whose Volume a Machine takes along.
Every Machine boots the tiny image under QEMU.

1. A short cut (longer than the fence, shorter than fence + margin): the host shuts its domains off,
   and starts them again when it reaches the apiserver; nothing moved.
2. A partition: the host's domains are off before any Machine runs elsewhere (timestamps sampled
   from libvirt), no Machine ever runs in two domains and the Volume is never open read-write by two
   running domains; the Machine that opts out (a toleration of the unreachable taint) runs on and
   stays. Healed: the pool is Ready, the old domains are gone, the moved Machines run where they
   went, the Volume attached there; the pool's conditions and Events say what was fenced.
"""

from __future__ import annotations

import secrets
import shutil
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import libvirt
import pytest
from ironpool.runtime.machine.domain_xml import parse_metadata
from ironpool.runtime.machine.model import METADATA_NS
from ironpool.runtime.machine.writers import writers

from tests.helpers.cut_proxy import CutProxy
from tests.helpers.fleet import COMPUTE, Fleet, fleet
from tests.helpers.guests import boot_deadline
from tests.helpers.qemu_dirs import qemu_tmpdir
from tests.helpers.runtimes import LIBVIRT_URI, destroy_storage_pool, start_ironpool, stop_process
from tests.helpers.wait import wait_for

pytestmark = [pytest.mark.libvirt, pytest.mark.slow, pytest.mark.guests]

FENCE_AFTER, MARGIN, GRACE = 4.0, 6.0, 10.0
STORAGE = "/apis/storage.ironcore.dev/v1alpha1"
VOLUMES = f"{STORAGE}/namespaces/default/volumes"
MACHINES = f"{COMPUTE}/namespaces/default/machines"
UID_LABEL = "machinepoollet.ironcore.dev/machine-uid"
POOL_LABEL = "machinepoollet.ironpool.dev/pool"
UNREACHABLE = "pool.ironpool.dev/unreachable"
OPT_OUT = {"key": UNREACHABLE, "operator": "Exists", "effect": "NoExecute"}


@dataclass
class Sampler:
    """Samples libvirt every 50 ms: which ironpool domains run, for which Machine uid on which pool,
    and how many running domains have the Volume's file open read-write."""

    volume_path: str
    first_seen: dict[tuple[str, str], float] = field(default_factory=dict)  # (uid, pool) -> running since
    last_seen: dict[tuple[str, str], float] = field(default_factory=dict)
    doubles: list[str] = field(default_factory=list)
    samples: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _labels: dict[str, tuple[str, str]] = field(default_factory=dict)

    def __enter__(self) -> Sampler:
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(10)

    def _owner(self, dom: libvirt.virDomain) -> tuple[str, str]:
        name = dom.name()
        if name not in self._labels:
            rec = parse_metadata(dom.metadata(libvirt.VIR_DOMAIN_METADATA_ELEMENT, METADATA_NS, 0))
            self._labels[name] = (rec.labels.get(UID_LABEL, ""), rec.labels.get(POOL_LABEL, ""))
        return self._labels[name]

    def _run(self) -> None:
        libvirt.registerErrorHandler(lambda _c, _e: None, None)
        conn = libvirt.open(LIBVIRT_URI)
        try:
            while not self._stop.is_set():
                now = time.monotonic()
                running: dict[str, list[str]] = {}
                for dom in conn.listAllDomains(libvirt.VIR_CONNECT_LIST_DOMAINS_ACTIVE):
                    try:
                        # Only a poollet's Machines carry a uid: the domains other tests (or another
                        # checkout's suite) run on this libvirtd directly through a runtime have none.
                        if not dom.name().startswith("ironpool-") or not (owner := self._owner(dom))[0]:
                            continue
                    except (libvirt.libvirtError, ValueError, KeyError, TypeError):
                        continue
                    running.setdefault(owner[0], []).append(owner[1])
                    self.first_seen.setdefault(owner, now)
                    self.last_seen[owner] = now
                for uid, pools in running.items():
                    if len(pools) > 1:
                        self.doubles.append(f"machine {uid} running on {pools}")
                volume_writers = list(writers(conn, [self.volume_path], ""))
                if len(volume_writers) > 1:
                    self.doubles.append(f"volume written by {volume_writers}")
                self.samples += 1
                self._stop.wait(0.05)
        finally:
            conn.close()


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """The fleet: host A behind a proxy, host B, a controller-manager and the shared volume pool."""
    tmp = tmp_path_factory.mktemp("fencing")
    with fleet(tmp, []) as f:
        proxy = CutProxy(("127.0.0.1", int(f.server.url.rsplit(":", 1)[1])))
        args = ("--fence-after", str(FENCE_AFTER))
        a = f.add_host(3, server_url=proxy.url, poollet_args=args)
        b = f.add_host(3, poollet_args=args)
        (tmp / "admin.token").write_text(f.server.admin_token)
        manager = start_ironpool(
            ["controller-manager", "--server", f.server.url, "--token-file", str(tmp / "admin.token"),
             "--pool-monitor-grace-period", str(GRACE), "--pool-monitor-period", "0.5", "--fence-margin",
             str(MARGIN), "--pool-eviction-rate", "10", "--pool-eviction-burst", "3", "--no-leader-elect"],
            tmp / "controller-manager.log")
        shared = f"{f.tag}-shared"
        work = qemu_tmpdir("fencing-vol-")
        storage_pool = f"ipt-{secrets.token_hex(4)}"
        procs = []
        try:
            procs = start_volume_pool(f, shared, work, storage_pool)
            yield {"fleet": f, "proxy": proxy, "a": a.pool, "b": b.pool, "shared": shared, "tmp": tmp}
        finally:
            with f.api() as c:  # the Machines go first (fleet.close), then the Volume
                for m in c.get(MACHINES).json()["items"]:
                    c.delete(f"{MACHINES}/{m['metadata']['name']}")
                wait_for(lambda: not c.get(MACHINES).json()["items"], 120, "machines deleted")
                c.delete(f"{VOLUMES}/data")
                wait_for(lambda: c.get(f"{VOLUMES}/data").status_code == 404, 60, "volume deleted")
            stop_process(manager)
            for proc in procs:
                stop_process(proc)
            destroy_storage_pool(storage_pool)
            shutil.rmtree(work, ignore_errors=True)
            proxy.close()


def start_volume_pool(f: Fleet, pool: str, work: Path, storage_pool: str) -> list[Any]:
    (work / "vc.yaml").write_text("apiVersion: storage.ironcore.dev/v1alpha1\nkind: VolumeClass\n"
                                  "metadata: {name: fast}\ncapabilities: {tps: 100Mi, iops: \"1000\"}\n")
    token = secrets.token_hex(16)
    with f.server.token_file.open("a") as out:
        out.write(f'{token},storage.ironcore.dev:system:volumepool:{pool},{pool}v,'
                  '"storage.ironcore.dev:system:volumepools"\n')
    (work / "token").write_text(token)
    sock = work / "v.sock"
    runtime = start_ironpool(["volume-runtime", "--libvirt-uri", LIBVIRT_URI, "--storage-pool", storage_pool,
                              "--pool-path", str(work / "pool"), "--classes", str(work / "vc.yaml"),
                              "--address", f"unix://{sock}"], work / "volume-runtime.log")
    wait_for(sock.exists, 60, "the volume runtime's socket")
    poollet = start_ironpool(["volumepoollet", "--pool", pool, "--provider-id", f"libvirt://{pool}", "--iri",
                              f"unix://{sock}", "--server", f.server.url, "--token-file", str(work / "token"),
                              "--heartbeat-interval", "1"], work / "volumepoollet.log")
    with f.api() as c:
        r = c.post(f"{STORAGE}/volumeclasses", json={"apiVersion": "storage.ironcore.dev/v1alpha1",
                                                      "kind": "VolumeClass", "metadata": {"name": "fast"},
                                                      "capabilities": {"tps": "100Mi", "iops": "1000"}})
        assert r.status_code == 201, r.text
        r = c.post(VOLUMES, json={"apiVersion": "storage.ironcore.dev/v1alpha1", "kind": "Volume",
                                  "metadata": {"name": "data"},
                                  "spec": {"volumeClassRef": {"name": "fast"},
                                           "volumePoolRef": {"name": pool},
                                           "resources": {"storage": "64Mi"}}})
        assert r.status_code == 201, r.text
        wait_for(lambda: (c.get(f"{VOLUMES}/data").json().get("status") or {}).get("state") == "Available",
                 60, "the shared Volume Available")
    return [poollet, runtime]


def tiny(name: str, pool: str, volume: bool = False, opt_out: bool = False) -> dict[str, Any]:
    volumes: list[dict[str, Any]] = [{"name": "root", "localDisk": {"image": "tiny", "sizeLimit": "1Gi"}}]
    if volume:
        volumes.append({"name": "data", "volumeRef": {"name": "data"}})
    spec: dict[str, Any] = {"machineClassRef": {"name": "x-small"}, "power": "On",
                            "machinePoolRef": {"name": pool}, "volumes": volumes}
    if opt_out:
        spec["tolerations"] = [OPT_OUT]
    return {"apiVersion": "compute.ironcore.dev/v1alpha1", "kind": "Machine", "metadata": {"name": name},
            "spec": spec}


def get(c: httpx.Client, path: str) -> dict[str, Any]:
    r = c.get(path)
    assert r.status_code == 200, r.text
    return dict(r.json())


def placed(m: dict[str, Any]) -> tuple[str | None, str | None]:
    return ((m["spec"].get("machinePoolRef") or {}).get("name"), (m.get("status") or {}).get("state"))


def domain_of(m: dict[str, Any]) -> str:
    return "ironpool-" + m["status"]["machineID"].rsplit("://", 1)[1]


def active(conn: libvirt.virConnect, name: str) -> bool:
    try:
        return bool(conn.lookupByName(name).isActive())
    except libvirt.libvirtError:
        return False


def exists(conn: libvirt.virConnect, name: str) -> bool:
    try:
        conn.lookupByName(name)
        return True
    except libvirt.libvirtError:
        return False


def condition(c: httpx.Client, pool: str, ctype: str) -> dict[str, Any]:
    conds = (get(c, f"{COMPUTE}/machinepools/{pool}").get("status") or {}).get("conditions") or []
    return next((x for x in conds if x["type"] == ctype), {})


def events(c: httpx.Client, name: str) -> list[dict[str, Any]]:
    return [e for e in get(c, "/api/v1/events")["items"] if e["involvedObject"].get("name") == name]


def test_a_partitioned_host_fences_itself_before_its_machines_and_volume_move(setup: dict[str, Any]) -> None:
    f: Fleet = setup["fleet"]
    proxy: CutProxy = setup["proxy"]
    a, b = setup["a"], setup["b"]
    names = {"vol": "fx-vol", "plain": "fx-plain", "stay": "fx-stay"}
    conn = libvirt.open(LIBVIRT_URI)
    with f.api() as c:
        for key, name in names.items():
            r = c.post(MACHINES, json=tiny(name, a, volume=key == "vol", opt_out=key == "stay"))
            assert r.status_code == 201, r.text

        def all_running() -> dict[str, dict[str, Any]] | None:
            now = {k: get(c, f"{MACHINES}/{n}") for k, n in names.items()}
            return now if all(placed(m) == (a, "Running") for m in now.values()) else None

        before = wait_for(all_running, boot_deadline(3), "three machines running on host A")
        uid = {k: m["metadata"]["uid"] for k, m in before.items()}
        old = {k: domain_of(m) for k, m in before.items()}
        volume = get(c, f"{VOLUMES}/data")
        assert volume["status"]["attachment"]["machineRef"] == {"name": names["vol"], "uid": uid["vol"]}
        assert volume["status"]["attachment"]["pool"] == a
        volume_path = volume["status"]["access"]["volumeAttributes"]["path"]

        # 1. A cut longer than the fence, shorter than fence + margin: off, then on again, in place.
        cut = time.monotonic()
        proxy.cut()
        try:
            wait_for(lambda: not active(conn, old["plain"]), FENCE_AFTER + 20, "host A fencing its domains")
            fenced_after = time.monotonic() - cut
            assert active(conn, old["stay"]), "the machine that opts out was fenced"
        finally:
            proxy.heal()
        wait_for(lambda: active(conn, old["plain"]) and active(conn, old["vol"]), 60,
                 "the fenced domains started again on host A")
        for n in names.values():
            assert placed(get(c, f"{MACHINES}/{n}"))[0] == a, f"{n} moved after a short cut"
        wait_for(lambda: condition(c, a, "Fenced").get("reason") == "LeaseRenewed", 30,
                 "host A's Fenced condition back to False")

        # 2. A partition: fenced, taken over, moved; never twice.
        with Sampler(volume_path) as seen:
            cut = time.monotonic()
            proxy.cut()
            try:
                def moved() -> dict[str, dict[str, Any]] | None:
                    now = {k: get(c, f"{MACHINES}/{names[k]}") for k in ("vol", "plain")}
                    return now if all(placed(m) == (b, "Running") for m in now.values()) else None

                after = wait_for(moved, GRACE + MARGIN + boot_deadline(2), "the machines of host A on host B")
                wait_for(lambda: all((uid[k], b) in seen.first_seen for k in ("vol", "plain")), 30,
                         "the sampler seeing the moved domains run")
                stay = get(c, f"{MACHINES}/{names['stay']}")
                assert placed(stay) == (a, "Running"), "the machine that opts out was evicted"
                held = get(c, f"{VOLUMES}/data")["status"]["attachment"]
                assert (held["machineRef"]["uid"], held["pool"]) == (uid["vol"], b)
                ready = condition(c, a, "Ready")
                assert ready.get("status") == "Unknown", ready
            finally:
                proxy.heal()
            wait_for(lambda: not any(exists(conn, old[k]) for k in ("vol", "plain")), 90,
                     "host A's old domains removed once it is back")
        assert seen.samples > 50 and seen.doubles == [], seen.doubles[:5]
        for k in ("vol", "plain"):
            off = seen.last_seen[(uid[k], a)]
            on = seen.first_seen[(uid[k], b)]
            assert off < on, f"{names[k]} ran on host B ({on - cut:.2f}s) before host A's domain was off " \
                             f"({off - cut:.2f}s)"
            assert after[k]["metadata"]["uid"] == uid[k]
        assert seen.last_seen[(uid["stay"], a)] > seen.first_seen[(uid["stay"], a)] + GRACE  # ran throughout
        assert active(conn, old["stay"])

        def healed() -> bool:
            taints = [t["key"] for t in get(c, f"{COMPUTE}/machinepools/{a}")["spec"].get("taints") or []]
            return condition(c, a, "Ready").get("status") == "True" and UNREACHABLE not in taints
        wait_for(healed, 60, "host A Ready again, untainted")
        for k in ("vol", "plain"):
            assert placed(get(c, f"{MACHINES}/{names[k]}")) == (b, "Running")
        fenced = [e for e in events(c, a) if e["reason"] == "Fenced"]
        assert fenced and "shut off" in fenced[-1]["message"] and names["plain"] in fenced[-1]["message"]
        assert names["stay"] not in fenced[-1]["message"]
        assert any(e["reason"] == "PoolTakenOver" for e in events(c, a))
        evicted = [e for e in events(c, names["vol"]) if e["reason"] == "Evicted"]
        assert evicted and "fenced itself" in evicted[-1]["message"]
        off_after = {k: seen.last_seen[(uid[k], a)] - cut for k in ("vol", "plain")}
        on_after = {k: seen.first_seen[(uid[k], b)] - cut for k in ("vol", "plain")}
        print(f"\nshort cut: host A fenced after {fenced_after:.1f}s (--fence-after {FENCE_AFTER:g}s); "
              f"partition: old domains last seen running {max(off_after.values()):.1f}s after the cut, "
              f"new ones first seen running {min(on_after.values()):.1f}s after it "
              f"({seen.samples} samples, grace {GRACE:g}s, margin {MARGIN:g}s)")
    conn.close()
