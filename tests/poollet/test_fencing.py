"""The machinepoollet's fence (:class:`ironpool.poollet.fencing.Fencer`) on a fake runtime and clock:
when it shuts domains off, which it leaves running, when it lets them run again, and what the pool's
``Fenced`` condition says. The real proof, with real processes and libvirt, is
tests/fleet/test_fencing_fleet.py."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ironpool.api.compute import Machine
from ironpool.iri.gen.machine.v1alpha1 import api_pb2 as mpb
from ironpool.iri.labels import FENCED_ANNOTATION
from ironpool.poollet import keys
from ironpool.poollet.fencing import Fencer
from ironpool.poollet.heartbeat import PoolHeartbeat

OPT_OUT = {"key": "pool.ironpool.dev/unreachable", "operator": "Exists", "effect": "NoExecute"}


@dataclass
class Runtime:
    machines: dict[str, mpb.Machine] = field(default_factory=dict)
    calls: list[tuple[str, str]] = field(default_factory=list)

    def add(self, iri_id: str, name: str) -> None:
        meta = mpb.Machine().metadata
        meta.id = iri_id
        meta.labels.update({keys.MACHINE_NAMESPACE_LABEL: "default", keys.MACHINE_NAME_LABEL: name,
                            keys.MACHINE_POOL_LABEL: "p", keys.MACHINE_UID_LABEL: f"uid-{name}"})
        self.machines[iri_id] = mpb.Machine(metadata=meta, spec=mpb.MachineSpec(power=mpb.POWER_ON))

    async def list_machines(self, machine_id: str = "",
                            labels: dict[str, str] | None = None) -> list[mpb.Machine]:
        found = [m for m in self.machines.values() if not machine_id or m.metadata.id == machine_id]
        return [m for m in found if all(m.metadata.labels.get(k) == v for k, v in (labels or {}).items())]

    async def update_machine_annotations(self, machine_id: str, annotations: dict[str, str]) -> None:
        self.calls.append(("annotations", machine_id))
        self.machines[machine_id].metadata.ClearField("annotations")
        self.machines[machine_id].metadata.annotations.update(annotations)

    async def update_machine_power(self, machine_id: str, power: int) -> None:
        self.calls.append(("power-off" if power == mpb.POWER_OFF else "power-on", machine_id))
        self.machines[machine_id].spec.power = power  # type: ignore[assignment]


class Machines:
    def __init__(self, *machines: Machine) -> None:
        self.by_key = {f"default/{m.metadata.name}": m for m in machines}

    def get(self, key: str) -> Machine | None:
        return self.by_key.get(key)


def machine(name: str, *tolerations: dict[str, Any]) -> Machine:
    return Machine.model_validate({"metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}"},
                                   "spec": {"machineClassRef": {"name": "x"},
                                            "tolerations": list(tolerations) or None}})


class Clock:
    now = 1000.0

    def __call__(self) -> float:
        return self.now


def fencer(runtime: Runtime, machines: Machines, clock: Clock,
           elsewhere: frozenset[str] = frozenset()) -> tuple[Fencer, PoolHeartbeat, list[str]]:
    """A Fencer; ``elsewhere``: keys of the Machines an apiserver read finds bound to another pool."""
    heartbeat = PoolHeartbeat(None, "MachinePool", "p", "p", 2, 8)  # type: ignore[arg-type]
    restored: list[str] = []

    async def still_here(key: str, uid: str) -> bool:
        return key not in elsewhere

    f = Fencer(30, heartbeat, machines, runtime, lambda: {keys.MACHINE_POOL_LABEL: "p"},  # type: ignore[arg-type]
               lambda: restored.append("restored"), still_here, clock)
    return f, heartbeat, restored


async def test_a_silent_poollet_shuts_off_its_domains_but_those_that_opt_out() -> None:
    runtime, clock = Runtime(), Clock()
    runtime.add("iri-a", "a")
    runtime.add("iri-b", "b")
    runtime.add("iri-gone", "gone")  # its Machine is not (or no longer) in the informer: fenced too
    a, b = machine("a"), machine("b", OPT_OUT)
    f, heartbeat, _ = fencer(runtime, Machines(a, b), clock)
    heartbeat.last_renewed = clock.now
    clock.now += 29.9
    await f.check_once()
    assert runtime.calls == [] and not f.holds_off(a)
    clock.now += 0.1
    await f.check_once()
    assert ("power-off", "iri-a") in runtime.calls and ("power-off", "iri-gone") in runtime.calls
    assert ("power-off", "iri-b") not in runtime.calls
    # The runtime stops a fenced domain at once: the annotation goes before the power change.
    assert runtime.calls.index(("annotations", "iri-a")) < runtime.calls.index(("power-off", "iri-a"))
    assert runtime.machines["iri-a"].metadata.annotations[FENCED_ANNOTATION] == "LeaseNotRenewed"
    assert f.holds_off(a) and not f.holds_off(b)
    cond = f.condition([], "2026-01-01T00:00:00Z")
    assert cond is not None and (cond["type"], cond["status"], cond["reason"]) == ("Fenced", "True",
                                                                                  "LeaseNotRenewed")
    assert "default/a" in cond["message"] and "default/b" not in cond["message"]
    assert "--fence-after 30s" in cond["message"]
    calls = len(runtime.calls)
    clock.now += 5
    await f.check_once()  # still cut off: nothing more to do
    assert len(runtime.calls) == calls


async def test_a_poollet_whose_lease_was_taken_over_keeps_them_off_until_the_mark_goes() -> None:
    runtime, clock = Runtime(), Clock()
    runtime.add("iri-a", "a")
    a = machine("a")
    f, heartbeat, restored = fencer(runtime, Machines(a), clock)
    heartbeat.last_renewed = clock.now
    clock.now += 31
    await f.check_once()
    assert f.holds_off(a)
    clock.now += 10
    heartbeat.last_renewed, heartbeat.taken_over = clock.now, True  # back, but the controller won
    await f.check_once()
    assert f.holds_off(a) and restored == []
    assert FENCED_ANNOTATION in runtime.machines["iri-a"].metadata.annotations
    heartbeat.taken_over = False  # the controller moved what it had to and removed its mark
    clock.now += 1
    heartbeat.last_renewed = clock.now
    await f.check_once()
    assert not f.holds_off(a) and restored == ["restored"]
    assert FENCED_ANNOTATION not in runtime.machines["iri-a"].metadata.annotations
    cond = f.condition([], "2026-01-01T00:00:00Z")
    assert cond is not None and (cond["status"], cond["reason"]) == ("False", "LeaseRenewed")
    assert "default/a" in cond["message"]


async def test_a_renewal_before_the_fence_time_fences_nothing() -> None:
    runtime, clock = Runtime(), Clock()
    runtime.add("iri-a", "a")
    f, heartbeat, _ = fencer(runtime, Machines(machine("a")), clock)
    for _ in range(10):
        heartbeat.last_renewed = clock.now
        clock.now += 20
        await f.check_once()
    assert runtime.calls == [] and f.condition([], "x") is None


async def test_a_poollet_started_under_the_mark_holds_its_machines_off_until_it_goes() -> None:
    import asyncio

    runtime, clock = Runtime(), Clock()
    runtime.add("iri-a", "a")
    a = machine("a")
    f, heartbeat, restored = fencer(runtime, Machines(a), clock)
    written: list[tuple[str, str]] = []

    async def report(type_: str, reason: str, message: str) -> bool:
        written.append((type_, reason))
        return True

    stopped = asyncio.Event()
    stopped.set()  # one pass of the loop
    heartbeat.last_renewed, heartbeat.taken_over = clock.now, True
    await f.run(stopped, report)
    assert f.holds_off(a) and restored == ["restored"] and runtime.calls == []
    cond = f.condition([], "x")
    assert cond is not None and (cond["status"], cond["reason"]) == ("True", "TakenOverByControlPlane")
    heartbeat.taken_over = False
    await f.run(stopped, report)
    assert not f.holds_off(a) and restored == ["restored", "restored"]
    cond = f.condition([], "x")
    assert cond is not None and (cond["status"], cond["reason"]) == ("False", "TakeoverEnded")


async def test_a_machine_that_moved_while_cut_off_is_not_started_again_though_the_informer_lags() -> None:
    runtime, clock = Runtime(), Clock()
    runtime.add("iri-a", "a")
    runtime.add("iri-b", "b")
    a, b = machine("a"), machine("b")  # the informer still shows both bound here
    f, heartbeat, restored = fencer(runtime, Machines(a, b), clock, elsewhere=frozenset({"default/b"}))
    heartbeat.last_renewed = clock.now
    clock.now += 31
    await f.check_once()
    clock.now += 1
    heartbeat.last_renewed = clock.now  # back, and nothing of it is taken over (any more)
    await f.check_once()
    assert restored == ["restored"] and not f.holds_off(a)
    assert f.holds_off(b), "a machine bound elsewhere would be started here again"
    assert FENCED_ANNOTATION in runtime.machines["iri-b"].metadata.annotations
    cond = f.condition([], "x")
    assert cond is not None and "default/a" in cond["message"] and "default/b" not in cond["message"]
    f.forget_gone({"uid-a", "uid-b"})
    assert f.holds_off(b)  # its old domain is still here
    f.forget_gone({"uid-a"})
    assert not f.holds_off(b)  # gone: bound here again some day, it gets a new domain
