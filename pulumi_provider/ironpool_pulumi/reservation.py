"""``Reservation``: room held for a set of Machines, all of it or none (IronCore's IEP-11).

Creating one waits until every pool of the scheduler's plan holds its part; when the set does not
fit it is refused whole, the create fails naming what is short, and nothing is left behind — so the
Machines that depend on it (``Machine(reservation=...)``) are never created. ``pulumi preview``
shows in ``prediction`` whether it would fit now (the scheduler answers a dry run of it, which holds
nothing).

Replaced when what it holds changes (the API keeps it fixed) or when the one in the cluster was
refused or expired; ``ttl_seconds`` and ``labels`` change in place. Machines already placed within
it count first when it is made again, where they are.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import pulumi
from ironpool.api import reservation as rsv
from ironpool.api.errors import NotFound
from ironpool.api.resources import resolve
from ironpool.client import Client
from ironpool.client.predict import PredictionUnavailable, predict_reservation
from ironpool.client.readiness import Readiness, condition, reservation_accepted
from ironpool.client.wait import Unschedulable, WaitError
from pulumi.dynamic import CheckFailure, DiffResult, Resource

from ironpool_pulumi import declared
from ironpool_pulumi.base import ApiResourceProvider, Obj, Props, seconds
from ironpool_pulumi.connection import connection
from ironpool_pulumi.values import none_if_empty, without_system_keys

RESERVATIONS, MACHINE_CLASSES = resolve("reservations"), resolve("machineclasses")
RESERVATION_OUTPUTS = ("uid", "created_at", "state", "message", "held", "prediction")


class ReservationProvider(ApiResourceProvider):
    """The dynamic provider behind :class:`Reservation`."""

    info = RESERVATIONS
    replace_on = ("name", "namespace", "machines", "cpu", "memory", "pools", "pool_selector", "zone_spread")
    update_on = ("ttl_seconds", "labels")
    kept = ("wait_timeout", "prediction")
    field_properties: ClassVar[tuple[tuple[str, str], ...]] = (
        ("metadata.name", "name"), ("metadata.namespace", "namespace"), ("metadata.labels", "labels"),
        ("spec.resources.cpu", "cpu"), ("spec.resources.memory", "memory"), ("spec.resources", "machines"),
        ("spec.pools", "pools"), ("spec.poolSelector", "pool_selector"), ("spec.zoneSpread", "zone_spread"),
        ("spec.ttlSecondsAfterCreation", "ttl_seconds"),
    )

    def defaults(self, inputs: Props, failures: list[CheckFailure]) -> Props:
        inputs["wait_timeout"] = seconds(inputs.get("wait_timeout"), failures)
        machines = inputs.get("machines") or {}
        if not isinstance(machines, dict) or any(
                not isinstance(n, int) or isinstance(n, bool) or n < 1 for n in machines.values()):
            failures.append(CheckFailure("machines", "must map MachineClass names to whole numbers above 0"))
        if bool(inputs.get("cpu")) != bool(inputs.get("memory")):
            missing = "memory" if inputs.get("cpu") else "cpu"
            failures.append(CheckFailure(missing, "give cpu and memory together"))
        return inputs

    def manifest(self, inputs: Props) -> Obj:
        resources = {rsv.class_key(str(c)): str(n) for c, n in sorted((inputs.get("machines") or {}).items())}
        if inputs.get("cpu"):
            resources.update(cpu=str(inputs["cpu"]), memory=str(inputs.get("memory")))
        spec: Obj = {"resources": resources}
        if inputs.get("pools"):
            spec["pools"] = [{"name": p} for p in inputs["pools"]]
        if inputs.get("pool_selector"):
            spec["poolSelector"] = inputs["pool_selector"]
        if inputs.get("zone_spread") is not None:
            spec["zoneSpread"] = {"maxSkew": inputs["zone_spread"]}
        if inputs.get("ttl_seconds") is not None:
            spec["ttlSecondsAfterCreation"] = inputs["ttl_seconds"]
        meta = {"name": inputs["name"], "namespace": inputs.get("namespace"),
                "labels": none_if_empty(inputs.get("labels"))}
        return {"apiVersion": self.info.api_version, "kind": self.kind,
                "metadata": {k: v for k, v in meta.items() if v is not None}, "spec": spec}

    def properties(self, obj: Obj, previous: Props) -> Props:
        meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
        resources = spec.get("resources") or {}
        machines = {rsv.class_of_key(k): int(v) for k, v in resources.items() if rsv.class_of_key(k)}
        return {
            "name": meta.get("name"), "namespace": meta.get("namespace"),
            "labels": without_system_keys(meta.get("labels"), previous.get("labels")),
            "machines": none_if_empty(machines), "cpu": resources.get("cpu"),
            "memory": resources.get("memory"),
            "pools": none_if_empty([p.get("name") for p in spec.get("pools") or []]),
            "pool_selector": none_if_empty(spec.get("poolSelector")),
            "zone_spread": (spec.get("zoneSpread") or {}).get("maxSkew"),
            "ttl_seconds": spec.get("ttlSecondsAfterCreation"),
        }

    def status_outputs(self, client: Client, obj: Obj, inputs: Props) -> Props:
        scheduled = condition(obj, rsv.SCHEDULED) or {}
        return {**super().status_outputs(client, obj, inputs), "state": rsv.summary(obj),
                "message": scheduled.get("message") or "",
                "held": {str(e["ref"]): dict(e.get("resources") or {}) for e in rsv.pool_entries(obj)}}

    def check_with_server(self, client: Client, olds: Props, inputs: Props,
                          failures: list[CheckFailure]) -> Props:
        for cls in inputs.get("machines") or {}:
            try:
                client.get_raw(MACHINE_CLASSES, str(cls))
            except NotFound:
                if declared.declared("MachineClass", str(cls)) is None:
                    failures.append(CheckFailure("machines", f"MachineClass {cls!r} does not exist"))
        if olds or failures:
            return {"prediction": olds.get("prediction", "")} if olds else {}
        spec = self.manifest(inputs)["spec"]
        spec.pop("ttlSecondsAfterCreation", None)
        try:
            answer = predict_reservation(client, str(inputs.get("namespace")), spec)
        except PredictionUnavailable as exc:
            return {"prediction": f"unknown: {exc}"}
        return {"prediction": f"{'fits' if answer.fits else 'does not fit'}: {answer.message}"}

    def readiness(self, inputs: Props) -> Readiness | None:
        return reservation_accepted

    def wait_failure(self, exc: WaitError, inputs: Props) -> str:
        if isinstance(exc, Unschedulable):
            return f"was {exc.reason}"
        return super().wait_failure(exc, inputs)

    def diff(self, _id: str, olds: Props, news: Props) -> DiffResult:
        result = super().diff(_id, olds, news)
        if result.replaces:
            return result
        namespace, name = self.locate(_id)
        try:
            live = connection.client().get_raw(self.info, name, namespace)
        except NotFound:
            live = None
        if live is None or rsv.summary(live) in (rsv.REJECTED, "Expired"):
            # Refused or run out: the program still wants it held, so it is asked for again.
            return DiffResult(changes=True, replaces=["machines"], delete_before_replace=True)
        return result


@dataclass
class ReservationArgs:
    """The inputs of a :class:`Reservation`."""

    machines: pulumi.Input[dict[str, int]] | None = None
    """Whole machines to hold per MachineClass name, e.g. ``{"x-small": 10}``. Changing it replaces."""
    name: pulumi.Input[str] | None = None
    """The Reservation's name (default: the Pulumi resource name)."""
    namespace: pulumi.Input[str] | None = None
    """The namespace (default: ``ironpool:namespace``, else the client config's, else ``default``);
    its Machines must be in the same one."""
    cpu: pulumi.Input[str] | None = None
    """A block of cpu to hold besides whole machines (with ``memory``)."""
    memory: pulumi.Input[str] | None = None
    """A block of memory to hold with ``cpu``."""
    pools: pulumi.Input[list[str]] | None = None
    """Only these MachinePools may hold it (default: any)."""
    pool_selector: pulumi.Input[dict[str, str]] | None = None
    """Only pools carrying all these labels may hold it."""
    zone_spread: pulumi.Input[int] | None = None
    """Spread the machines over the zones: no zone holds more than this many beyond the fewest."""
    ttl_seconds: pulumi.Input[int] | None = None
    """Seconds after its creation at which it releases what no Machine uses; updated in place."""
    labels: pulumi.Input[dict[str, str]] | None = None
    """Labels of the Reservation; updated in place."""
    wait_timeout: pulumi.Input[int] = 600
    """Seconds a create waits for every pool to accept its part. Never causes a diff."""


class Reservation(Resource, module="ironpool", name="Reservation"):
    """Room held for a set of Machines, all of it or none; see the module docstring."""

    name: pulumi.Output[str]
    """The Reservation's name (what ``Machine(reservation=...)`` names)."""
    namespace: pulumi.Output[str]
    """Its namespace."""
    state: pulumi.Output[str]
    """``Accepted`` once created; ``Expired`` after its time to live."""
    message: pulumi.Output[str]
    """The scheduler's account: where the machines go."""
    held: pulumi.Output[dict[str, dict[str, str]]]
    """Per pool, what it holds there."""
    prediction: pulumi.Output[str]
    """Preview: whether it would fit now (``fits: ...`` or ``does not fit: <what is short>``)."""
    uid: pulumi.Output[str]
    """The API object's uid."""
    created_at: pulumi.Output[str]
    """When it was created (RFC 3339)."""

    def __init__(self, resource_name: str, args: ReservationArgs | None = None,
                 opts: pulumi.ResourceOptions | None = None, **kwargs: Any) -> None:
        """Declare a Reservation named ``resource_name`` with ``args`` (or the same fields as keywords)."""
        a = args if args is not None else ReservationArgs(**kwargs)
        props: dict[str, Any] = {k: None for k in RESERVATION_OUTPUTS}
        props.update({"name": a.name or resource_name, "namespace": a.namespace, "machines": a.machines,
                      "cpu": a.cpu, "memory": a.memory, "pools": a.pools, "pool_selector": a.pool_selector,
                      "zone_spread": a.zone_spread, "ttl_seconds": a.ttl_seconds, "labels": a.labels,
                      "wait_timeout": a.wait_timeout})
        super().__init__(ReservationProvider(), resource_name, props, opts)
