"""The scheduler against a real apiserver (SQLite): event-driven binding, conditions, Events,
two scheduler processes racing for one pool, and a preview that writes nothing."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from ironpool.api import Event, Machine, MachineClass, MachinePool, Volume, VolumeClass, VolumePool
from ironpool.client.config import ClientConfig
from ironpool.client.rest import AsyncClient, Client
from ironpool.client.wire import resource_for_model
from ironpool.scheduler.config import parse_config
from ironpool.scheduler.runner import SchedulerRunner

from tests.scheduler.sched_docs import machine, machine_class, machine_pool, volume, volume_class, volume_pool

MC, MP, M = (resource_for_model(x) for x in (MachineClass, MachinePool, Machine))
VC, VP, V = (resource_for_model(x) for x in (VolumeClass, VolumePool, Volume))
EV = resource_for_model(Event)


def sync_client(server: Any) -> Client:
    return Client(ClientConfig(server=server.url, token=server.admin_token))


def create_pool(client: Client, doc: dict[str, Any], info: Any = MP) -> None:
    """Pools are created bare, then get their status as a poollet would write it."""
    status = doc.pop("status")
    client.create_raw(info, doc)
    client.patch_raw(info, doc["metadata"]["name"], {"status": status}, subresource="status")


def condition(obj: dict[str, Any], ctype: str = "Scheduled") -> dict[str, Any] | None:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == ctype:
            return dict(c)
    return None


async def eventually(fn: Any, timeout: float, what: str, interval: float = 0.02) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = await fn()
        if value:
            return value
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(interval)


@pytest.fixture
def quiet_config() -> Any:
    # Retries only through events: backoff and the periodic flush are far beyond the test's deadlines.
    return parse_config({"queue": {"initialBackoffSeconds": 120, "maxBackoffSeconds": 120,
                                   "unschedulableFlushSeconds": 3600}})


async def test_pending_until_a_pool_offers_the_class_then_bound_by_the_event(apiserver: Any,
                                                                             quiet_config: Any) -> None:
    client = sync_client(apiserver)
    aclient = AsyncClient(ClientConfig(server=apiserver.url, token=apiserver.admin_token))
    runner = SchedulerRunner(aclient, quiet_config)
    stop = asyncio.Event()
    task = asyncio.create_task(runner.run(stop))
    try:
        await asyncio.wait_for(runner.ready.wait(), 20)
        client.create_raw(MC, machine_class("small", 2, "2Gi"))
        client.create_raw(MC, machine_class("big", 4, "8Gi"))
        client.create_raw(M, machine("web", "big", namespace="default"), "default")
        client.create_raw(MachinePoolInfo := MP, machine_pool("other", 64, "64Gi", classes=["small"]))
        client.patch_raw(MachinePoolInfo, "other", {"status": machine_pool("other", 64, "64Gi",
                                                                           classes=["small"])["status"]},
                         subresource="status")

        async def pending_with_reason() -> dict[str, Any] | None:
            c = condition(client.get_raw(M, "web", "default"))
            return c if c and "do not offer class big" in c.get("message", "") else None

        cond = await eventually(pending_with_reason, 10, "Scheduled=False naming the class")
        assert cond["status"] == "False" and cond["reason"] == "FailedScheduling"
        assert cond["message"] == "0/1 pools: 1 do not offer class big"
        assert "machinePoolRef" not in client.get_raw(M, "web", "default")["spec"]
        assert runner.queue.is_parked("machine", "default/web")

        create_pool(client, machine_pool("host-a", 16, "32Gi", classes=["small", "big"]))
        offered_at = time.monotonic()

        async def bound() -> str | None:
            ref = client.get_raw(M, "web", "default")["spec"].get("machinePoolRef")
            return ref["name"] if ref else None

        assert await eventually(bound, 5, "binding") == "host-a"
        assert time.monotonic() - offered_at < 1.0, "binding must follow the pool event, not a retry"
        await asyncio.wait_for(runner.reporter.drain(), 10) if runner.reporter else None

        async def scheduled_true() -> dict[str, Any] | None:
            c = condition(client.get_raw(M, "web", "default"))
            return c if c and c["status"] == "True" else None

        cond = await eventually(scheduled_true, 5, "Scheduled=True")
        assert cond["message"] == "Successfully assigned default/web to host-a"
        reasons = {(e["reason"], e["involvedObject"]["name"]) for e in client.list_raw(EV, "default").items}
        assert {("FailedScheduling", "web"), ("Scheduled", "web")} <= reasons
    finally:
        stop.set()
        await asyncio.wait_for(task, 15)
        await aclient.aclose()
        client.close()


async def test_volume_scheduler_places_by_storage(apiserver: Any, quiet_config: Any) -> None:
    client = sync_client(apiserver)
    aclient = AsyncClient(ClientConfig(server=apiserver.url, token=apiserver.admin_token))
    runner = SchedulerRunner(aclient, quiet_config)
    stop = asyncio.Event()
    task = asyncio.create_task(runner.run(stop))
    try:
        await asyncio.wait_for(runner.ready.wait(), 20)
        client.create_raw(VC, volume_class("fast"))
        create_pool(client, volume_pool("small-disk", "10Gi", classes=["fast"]), VP)
        create_pool(client, volume_pool("big-disk", "100Gi", classes=["fast"]), VP)
        client.create_raw(V, volume("data", "fast", "50Gi"), "default")
        client.create_raw(V, volume("huge", "fast", "500Gi"), "default")

        async def placed() -> str | None:
            ref = client.get_raw(V, "data", "default")["spec"].get("volumePoolRef")
            return ref["name"] if ref else None

        assert await eventually(placed, 10, "volume binding") == "big-disk"

        # The volume may be judged before the pool events reach the scheduler ("0/0 pools"); it is
        # judged again when they do, so wait for the verdict over both pools.
        async def refused() -> dict[str, Any] | None:
            c = condition(client.get_raw(V, "huge", "default"))
            return c if c and c["status"] == "False" and c["message"].startswith("0/2 ") else None

        cond = await eventually(refused, 10, "Scheduled=False over both pools on the huge volume")
        assert cond["message"] == "0/2 pools: 2 have too little storage"
        assert "volumePoolRef" not in client.get_raw(V, "huge", "default")["spec"]
    finally:
        stop.set()
        await asyncio.wait_for(task, 15)
        await aclient.aclose()
        client.close()


@pytest.fixture
def racing_schedulers(apiserver: Any, tmp_path: Path) -> Iterator[list[Path]]:
    """Two processes named ``default`` (racing for the same Machines) and one named ``second``
    (racing for the same pools with other Machines), without leader election; the apiserver's
    capacity admission alone prevents overcommit."""
    logs = []
    procs = []
    for i, name in enumerate(("default", "default", "second")):
        cfg = tmp_path / f"sched-{i}.yaml"
        cfg.write_text(f"schedulerName: {name}\n"
                       "queue: {initialBackoffSeconds: 0.05, maxBackoffSeconds: 0.2}\n")
        log = tmp_path / f"scheduler-{i}.log"
        logs.append(log)
        procs.append(subprocess.Popen(
            [sys.executable, "-m", "ironpool.cli.main", "scheduler", "--server", apiserver.url,
             "--token-file", str(apiserver.token_file), "--config", str(cfg), "--log-level", "INFO",
             "--no-leader-elect"],
            stdout=open(log, "wb"), stderr=subprocess.STDOUT,  # noqa: SIM115
            env={**os.environ, "PYTHONUNBUFFERED": "1"}))
    try:
        yield logs
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()


async def test_racing_scheduler_processes_never_overcommit(apiserver: Any,
                                                          racing_schedulers: list[Path]) -> None:
    client = sync_client(apiserver)
    client.create_raw(MC, machine_class("one", 1, "1Gi"))
    create_pool(client, machine_pool("tight", 10, "10Gi", classes=["one"]))
    create_pool(client, machine_pool("tiny", 2, "2Gi", classes=["one"]))

    async def both_ready() -> bool:
        return all("scheduler ready" in log.read_text() for log in racing_schedulers)

    await eventually(both_ready, 30, "the schedulers to sync", interval=0.1)

    aclient = AsyncClient(ClientConfig(server=apiserver.url, token=apiserver.admin_token))
    try:
        second = {"scheduler.ironpool.dev/scheduler-name": "second"}
        await asyncio.gather(*(aclient.create_raw(M, machine(f"m{i:02d}", "one",
                                                             annotations=second if i % 2 else None),
                                                  "default")
                               for i in range(30)))

        def settled() -> tuple[dict[str, int], int] | None:
            items = client.list_raw(M, "default").items
            per_pool: dict[str, int] = {}
            pending = 0
            for obj in items:
                ref = obj["spec"].get("machinePoolRef")
                if ref:
                    per_pool[ref["name"]] = per_pool.get(ref["name"], 0) + 1
                else:
                    c = condition(obj)
                    if c is None or c["status"] != "False":
                        return None
                    pending += 1
            overcommitted = per_pool.get("tight", 0) > 10 or per_pool.get("tiny", 0) > 2
            return (per_pool, pending) if sum(per_pool.values()) >= 12 or overcommitted else None

        async def settled_async() -> tuple[dict[str, int], int] | None:
            return settled()

        per_pool, pending = await eventually(settled_async, 30, "all 12 slots taken, the rest refused")
        assert per_pool == {"tight": 10, "tiny": 2}
        assert pending == 18
    finally:
        await aclient.aclose()
        client.close()


def test_preview_writes_nothing(apiserver: Any, tmp_path: Path) -> None:
    client = sync_client(apiserver)
    client.create_raw(MC, machine_class("half", 4, "4Gi"))
    create_pool(client, machine_pool("only", 8, "8Gi", classes=["half"]))
    client.create_raw(M, machine("existing", "half", pool="only"), "default")
    manifest = tmp_path / "set.yaml"
    manifest.write_text("\n---\n".join(json.dumps(machine(n, "half")) for n in ("a", "b")) + "\n")
    before = client.list_raw(M, None).resource_version
    pools_before = client.get_raw(MP, "only")["metadata"]["resourceVersion"]
    out = subprocess.run(
        [sys.executable, "-m", "ironpool.cli.main", "schedule", "--dry-run", "-f", str(manifest),
         "--server", apiserver.url, "--token-file", str(apiserver.token_file), "-o", "json"],
        capture_output=True, text=True, timeout=60)
    assert out.returncode == 2, out.stderr  # one of the two does not fit
    results = json.loads(out.stdout)
    assert [(r["key"], r["pool"]) for r in results] == [("default/a", "only"), ("default/b", None)]
    assert results[1]["reason"] == "0/1 pools: 1 have too little cpu"
    assert client.list_raw(M, None).resource_version == before
    assert client.get_raw(MP, "only")["metadata"]["resourceVersion"] == pools_before
    with pytest.raises(subprocess.CalledProcessError):
        subprocess.run([sys.executable, "-m", "ironpool.cli.main", "schedule", "-f", str(manifest),
                        "--server", apiserver.url], check=True, capture_output=True, timeout=60)
    client.close()


async def test_machine_and_its_new_volume_are_placed_together(apiserver: Any, quiet_config: Any) -> None:
    client = sync_client(apiserver)
    aclient = AsyncClient(ClientConfig(server=apiserver.url, token=apiserver.admin_token))
    runner = SchedulerRunner(aclient, quiet_config)
    stop = asyncio.Event()
    task = asyncio.create_task(runner.run(stop))
    try:
        client.create_raw(MC, machine_class("x", 2, "2Gi"))
        client.create_raw(VC, volume_class("local"))
        # host-a has more cpu (spreading prefers it) but too little disk for the volume
        create_pool(client, machine_pool("host-a", 64, "64Gi", classes=["x"]))
        create_pool(client, volume_pool("host-a", "10Gi", classes=["local"]), VP)
        create_pool(client, machine_pool("host-b", 4, "4Gi", classes=["x"]))
        create_pool(client, volume_pool("host-b", "100Gi", classes=["local"]), VP)
        # the Machine exists before the scheduler starts, so its Volume waits for it
        client.create_raw(M, machine("vm", "x", volumes=["disk"]), "default")
        client.create_raw(V, volume("disk", "local", "50Gi"), "default")
        await asyncio.wait_for(runner.ready.wait(), 20)

        async def both_bound() -> tuple[str, str] | None:
            m = client.get_raw(M, "vm", "default")["spec"].get("machinePoolRef")
            v = client.get_raw(V, "disk", "default")["spec"].get("volumePoolRef")
            return (m["name"], v["name"]) if m and v else None

        assert await eventually(both_bound, 10, "machine and volume bound") == ("host-b", "host-b")
    finally:
        stop.set()
        await asyncio.wait_for(task, 15)
        await aclient.aclose()
        client.close()


async def test_deleting_a_bound_machine_frees_its_room_and_binds_a_parked_one(apiserver: Any,
                                                                               quiet_config: Any) -> None:
    client = sync_client(apiserver)
    aclient = AsyncClient(ClientConfig(server=apiserver.url, token=apiserver.admin_token))
    runner = SchedulerRunner(aclient, quiet_config)
    stop = asyncio.Event()
    task = asyncio.create_task(runner.run(stop))
    try:
        await asyncio.wait_for(runner.ready.wait(), 20)
        client.create_raw(MC, machine_class("whole", 4, "4Gi"))
        create_pool(client, machine_pool("single", 4, "4Gi", classes=["whole"]))
        client.create_raw(M, machine("first", "whole"), "default")

        async def first_bound() -> bool:
            return bool(client.get_raw(M, "first", "default")["spec"].get("machinePoolRef"))

        await eventually(first_bound, 10, "first machine bound")
        client.create_raw(M, machine("second", "whole"), "default")

        async def second_refused() -> dict[str, Any] | None:
            c = condition(client.get_raw(M, "second", "default"))
            return c if c and c["status"] == "False" else None

        cond = await eventually(second_refused, 10, "second machine refused")
        assert cond["message"] == "0/1 pools: 1 have too little cpu"
        client.delete_raw(M, "first", "default")

        async def second_bound() -> bool:
            return bool(client.get_raw(M, "second", "default")["spec"].get("machinePoolRef"))

        await eventually(second_bound, 5, "second machine bound after the first is deleted")
        # no ledger on the pool: the apiserver's admission guards capacity
        annotations = client.get_raw(MP, "single")["metadata"].get("annotations") or {}
        assert "scheduler.ironpool.dev/claims" not in annotations
    finally:
        stop.set()
        await asyncio.wait_for(task, 15)
        await aclient.aclose()
        client.close()
