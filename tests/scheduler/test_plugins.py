"""Pure unit tests of the framework's plugins: the Bind plugin, volume binding across a Machine and its
new Volumes, and the wake-ups every rejection carries (no apiserver: a recording fake client)."""

from __future__ import annotations

from typing import Any

import pytest
from ironpool.api.errors import Conflict
from ironpool.api.meta import Taint as ApiTaint
from ironpool.api.meta import Toleration as ApiToleration
from ironpool.api.meta import tolerates_taints
from ironpool.scheduler import SchedulerCore, parse_config
from ironpool.scheduler.cache import Placement
from ironpool.scheduler.config import ConfigError
from ironpool.scheduler.framework.events import ActionType, ClusterEvent, EventResource
from ironpool.scheduler.framework.interface import Code, CycleState, FilterPlugin, PreFilterPlugin, Status
from ironpool.scheduler.model import Taint, Toleration, pool_from_json, request_from_json
from ironpool.scheduler.plugins import DEFAULT_PLUGINS, REGISTRY
from ironpool.scheduler.plugins.default_binder import DefaultBinder

from tests.scheduler.sched_docs import machine, machine_class, machine_pool, volume, volume_class, volume_pool


class FakeClient:
    """Records bindings as the AsyncClient would post them; ``fail`` maps object names to errors."""

    def __init__(self, fail: dict[str, Exception] | None = None) -> None:
        self.bindings: list[tuple[str, str, str, str, str | None, str | None]] = []
        self.fail = dict(fail or {})

    async def bind_raw(self, info: Any, name: str, target_kind: str, target: str,
                       namespace: str | None = None, resource_version: str | None = None) -> dict[str, Any]:
        if name in self.fail:
            raise self.fail[name]
        self.bindings.append((info.kind, name, target_kind, target, namespace, resource_version))
        return {"kind": "Status", "status": "Success", "metadata": {"resourceVersion": "8"}}


def hosts_core() -> SchedulerCore:
    """host-a: much cpu, too little disk; host-b: small, with room for a 50Gi volume."""
    core = SchedulerCore(parse_config({}))
    core.set_class("machine", machine_class("x", 2, "2Gi"))
    core.set_class("volume", volume_class("local"))
    core.set_pool("machine", machine_pool("host-a", 64, "64Gi", classes=["x"]))
    core.set_pool("volume", volume_pool("host-a", "10Gi", classes=["local"]))
    core.set_pool("machine", machine_pool("host-b", 4, "4Gi", classes=["x"]))
    core.set_pool("volume", volume_pool("host-b", "100Gi", classes=["local"]))
    return core


async def test_default_binder_writes_the_pool_ref_with_the_decided_resource_version() -> None:
    core = hosts_core()
    req = request_from_json("machine", machine("m", "x", rv="7"))
    state = CycleState(core.cache)
    client = FakeClient()
    status = await DefaultBinder().bind(client, state, req, "host-a")  # type: ignore[arg-type]
    assert status.ok
    assert client.bindings == [("Machine", "m", "MachinePool", "host-a", "default", "7")]
    # The object as now stored, for the Scheduled condition: the decided one, bound, at the new version.
    assert state.bound is not None and state.bound["metadata"]["resourceVersion"] == "8"
    assert state.bound["spec"]["machinePoolRef"] == {"name": "host-a"}
    assert state.bound["metadata"]["uid"] == req.uid


async def test_default_binder_returns_the_error_as_its_status() -> None:
    core = hosts_core()
    req = request_from_json("machine", machine("m", "x"))
    lost = Conflict("the object has been modified")
    status = await DefaultBinder().bind(FakeClient({"m": lost}), CycleState(core.cache), req, "host-a")  # type: ignore[arg-type]
    assert status.code is Code.ERROR and status.error is lost and status.plugin == "DefaultBinder"


async def test_volume_binding_places_binds_and_confirms_a_machines_new_volume() -> None:
    core = hosts_core()
    core.set_pending(request_from_json("volume", volume("disk", "local", "50Gi")))
    req = request_from_json("machine", machine("vm", "x", volumes=["disk"]))
    # The Volume waits for its Machine (PreEnqueue) ...
    core.set_pending(req)
    vol_req = core.cache.volume_requests["default/disk"]
    gate = core.pre_enqueue(vol_req)
    assert gate.code is Code.UNSCHEDULABLE and gate.plugin == "VolumeBinding"
    assert gate.reason == "waiting for Machine default/vm (placed together)"
    # ... while the Machine goes where its Volume fits too (host-a has more cpu but too little disk).
    decision = core.schedule(req)
    assert decision.pool == "host-b"
    assert core.cache.placements[("volume", "default/disk")].pool == "host-b"  # Reserve assumed it
    client = FakeClient()
    status = await core.framework_for(req).bind(client, decision)  # type: ignore[arg-type]
    assert status.ok
    # PreBind bound the Volume first, then the Bind plugin the Machine
    assert [b[:4] for b in client.bindings] == [
        ("Volume", "disk", "VolumePool", "host-b"),
        ("Machine", "vm", "MachinePool", "host-b"),
    ]
    core.framework_for(req).post_bind(decision)  # PostBind: the Volume's assume timer runs
    assert core.cache.placements[("volume", "default/disk")].deadline is not None
    # Once the Machine is bound, nothing waits for the Volume any more: its wake-up event fires.
    events = core.set_object("machine", machine("vm", "x", volumes=["disk"], pool="host-b"))
    assert events == [ClusterEvent(EventResource.CONSUMER, ActionType.DELETE)]
    assert any(w.wakes(vol_req, events[0]) for w in gate.wakeups)
    other = request_from_json("volume", volume("other", "local", "1Gi"))
    assert not any(w.wakes(other, events[0]) for w in gate.wakeups)
    assert core.pre_enqueue(vol_req).ok


async def test_volume_binding_prebind_failure_stops_before_the_machine_and_unreserves() -> None:
    core = hosts_core()
    core.set_pending(request_from_json("volume", volume("disk", "local", "50Gi")))
    req = request_from_json("machine", machine("vm", "x", volumes=["disk"]))
    decision = core.schedule(req)
    client = FakeClient({"disk": Conflict("volume changed")})
    status = await core.framework_for(req).bind(client, decision)  # type: ignore[arg-type]
    assert status.code is Code.ERROR and status.plugin == "VolumeBinding"
    assert client.bindings == []  # the Machine was not bound
    core.unreserve(decision)
    assert ("volume", "default/disk") not in core.cache.placements
    assert ("machine", "default/vm") not in core.cache.placements
    assert core.cache.pools[("volume", "host-b")].used == {"storage": 0}


def test_volume_binding_refuses_hosts_without_room_and_names_its_wake_ups() -> None:
    core = hosts_core()
    core.set_pending(request_from_json("volume", volume("huge", "local", "500Gi")))
    d = core.schedule(request_from_json("machine", machine("vm", "x", volumes=["huge"])))
    assert d.pool is None
    assert d.message == "0/2 pools: 2 have no volume pool beside them that takes the machine's new volumes"
    assert d.rejectors == {"VolumeBinding"}
    # storage freed on some volume pool may help; a Machine leaving its pool does not
    storage_freed = ClusterEvent(EventResource.PLACEMENT, ActionType.DELETE,
                                 Placement("volume", "default/gone", "host-b", "local", {}))
    machine_freed = ClusterEvent(EventResource.PLACEMENT, ActionType.DELETE,
                                 Placement("machine", "default/gone", "host-b", "x", {}))
    assert any(w.wakes(d.request, storage_freed) for w in d.wakeups)
    assert not any(w.wakes(d.request, machine_freed) for w in d.wakeups)


def test_machine_without_pending_volumes_skips_volume_filters() -> None:
    core = hosts_core()
    fw = core.framework_for(request_from_json("machine", machine("m", "x")))
    state = CycleState(core.cache)
    req = request_from_json("machine", machine("m", "x"))
    skipped = {p.name for p in fw.pre_filters if p.pre_filter(state, req).code is Code.SKIP}
    assert {"VolumeLocality", "VolumeBinding", "PoolSelector", "TopologySpread"} <= skipped


def test_every_rejection_names_its_plugin_and_only_registered_wake_ups() -> None:
    """Drive each filter to refuse and check the Status against the plugin's EnqueueExtensions."""
    core = SchedulerCore(parse_config({"profiles": [{"pluginArgs": {
        "TopologySpread": {"whenUnsatisfiable": "DoNotSchedule"}}}]}))
    core.set_class("machine", machine_class("x", 2, "2Gi"))
    core.set_class("volume", volume_class("local"))
    pools = [
        machine_pool("down", 8, "8Gi", classes=["x"], ready=False),
        machine_pool("tainted", 8, "8Gi", classes=["x"], taints=[{"key": "k", "effect": "NoSchedule"}]),
        machine_pool("unlabelled", 8, "8Gi", classes=["x"]),
        machine_pool("no-x", 8, "8Gi", classes=["y"], labels={"tier": "a"}),
        machine_pool("tiny", 1, "1Gi", classes=["x"], labels={"tier": "a"}),
    ]
    for doc in pools:
        core.set_pool("machine", doc)
    req = request_from_json("machine", machine("m", "x", selector={"tier": "a"}))
    fw = core.framework_for(req)
    state, refused = fw.new_cycle(req)
    assert refused is None and state.demand == {"cpu": 2000, "memory": 2 * 2**30}
    skipped = {p.name for p in fw.pre_filters if p.pre_filter(state, req).code is Code.SKIP}
    seen: dict[str, Status] = {}
    for f in (f for f in fw.filters if f.name not in skipped):
        for pool in core.cache.pools_of("machine"):
            status = f.filter(state, req, pool)
            if not status.ok:
                seen[f.name] = status
    assert set(seen) == {"PoolReady", "TaintToleration", "PoolSelector", "ClassAvailable", "ResourcesFit"}
    for name, status in seen.items():
        plugin = next(f for f in fw.filters if f.name == name)
        assert status.plugin == name and status.wakeups
        assert set(status.wakeups) <= set(plugin.events_to_register())


def test_wake_up_hints_look_at_the_changed_pool() -> None:
    core = SchedulerCore(parse_config({}))
    core.set_class("machine", machine_class("x", 2, "2Gi"))
    gpu = [{"key": "gpu", "effect": "NoSchedule"}]
    core.set_pool("machine", machine_pool("p", 8, "8Gi", classes=["x"], taints=gpu))
    plain = request_from_json("machine", machine("m", "x", selector={"tier": "a"}))
    exists = [{"key": "gpu", "operator": "Exists"}]
    tolerant = request_from_json("machine", machine("t", "x", tolerations=exists))
    fw = core.framework_for(plain)
    by_name = {f.name: f for f in fw.filters}
    taint_wake = by_name["TaintToleration"].events_to_register()[0]
    selector_wake = by_name["PoolSelector"].events_to_register()[0]
    tainted = core.cache.pools[("machine", "p")]
    labelled = pool_from_json("machine", machine_pool("p", 8, "8Gi", classes=["x"], labels={"tier": "a"}))
    retainted = ClusterEvent(EventResource.POOL, ActionType.UPDATE_TAINT, tainted)
    assert taint_wake.wakes(tolerant, retainted) and not taint_wake.wakes(plain, retainted)
    relabelled = ClusterEvent(EventResource.POOL, ActionType.UPDATE_LABEL, labelled)
    assert selector_wake.wakes(plain, relabelled)
    assert not selector_wake.wakes(plain, ClusterEvent(EventResource.POOL, ActionType.UPDATE_LABEL, tainted))
    # a hint never sees events it did not register for
    assert not selector_wake.wakes(plain, ClusterEvent(EventResource.POOL, ActionType.UPDATE_TAINT, labelled))


def test_statuses_and_registrations_for_every_default_plugin() -> None:
    for name in DEFAULT_PLUGINS:
        plugin = REGISTRY[name]()
        if isinstance(plugin, FilterPlugin | PreFilterPlugin):
            # a plugin that can refuse must say what can undo it (kube: an empty list is a misuse)
            assert plugin.events_to_register(), name


def test_scheduler_and_api_tolerations_match_through_one_function() -> None:
    taint = Taint("dedicated", "gpu", "NoSchedule")
    api_taint = ApiTaint(key="dedicated", value="gpu", effect="NoSchedule")
    cases = [
        ((Toleration("dedicated", "Equal", "gpu"),), True),
        ((Toleration("dedicated", "Equal", "cpu"),), False),
        ((Toleration("dedicated", "Exists", "", "NoExecute"),), False),
        ((Toleration("", "Exists"),), True),
        ((), False),
    ]
    for tols, expected in cases:
        api_tols = [ApiToleration(key=t.key or None, operator=t.operator,  # type: ignore[arg-type]
                                  value=t.value or None, effect=t.effect or None) for t in tols]  # type: ignore[arg-type]
        assert tolerates_taints(tols, [taint]) is expected
        assert tolerates_taints(api_tols, [api_taint]) is expected


def test_the_removed_pool_ledger_setting_is_refused_by_name() -> None:
    with pytest.raises(ConfigError, match="poolLedger was removed"):
        parse_config({"poolLedger": True})
