"""Where the scheduler would place a new Machine now: the answer ``pulumi preview`` shows.

One plugin process serves one ``pulumi preview`` or ``up``: the new Machines it checked so far are the
run's set, and each Machine is asked about together with them (:func:`ironpool.client.predict`: the
scheduler answers one dry-run Reservation of the set), so the Machine that would not fit beside the
others says so. A class this run declares but has not created yet is asked about as an existing class
of the same capabilities (pools offer classes by their capabilities: the poollet maps API classes to
its runtime's by shape); without one, the Machine cannot be asked about until the class exists.
"""

from __future__ import annotations

import threading
from typing import Any

from ironpool.api.errors import NotFound
from ironpool.api.quantity import parse_quantity
from ironpool.api.resources import resolve
from ironpool.client import Client
from ironpool.client.predict import Prediction, PredictionUnavailable, predict_machines

from ironpool_pulumi import declared

MACHINE_CLASSES, MACHINES = resolve("machineclasses"), resolve("machines")
_lock = threading.Lock()
_run: dict[str, dict[str, Any]] = {}  # namespace/name -> manifest, the new Machines checked so far
_unavailable: str | None = None  # why no scheduler answered, once one did not
PREDICT_TIMEOUT = 10.0  # seconds a scheduler has to answer (it takes well under one when it runs)


def predict(client: Client, machine: dict[str, Any], namespace: str) -> Prediction:
    """The scheduler's answer for the new Machine ``machine`` (a manifest), beside the run's others."""
    meta = machine.get("metadata") or {}
    key = f"{meta.get('namespace') or namespace}/{meta.get('name')}"
    cls = str(((machine.get("spec") or {}).get("machineClassRef") or {}).get("name") or "")
    try:
        client.get_raw(MACHINE_CLASSES, cls)
    except NotFound:
        made = declared.declared("MachineClass", cls)
        if made is not None:
            twin = _twin(client, made)
            if twin is None:
                return Prediction(key, None, f"class {cls} is made by this run and no class of its "
                                             f"capabilities exists yet: its machines are placed once it does")
            spec = {**(machine.get("spec") or {}), "machineClassRef": {"name": twin}}
            machine = {**machine, "spec": spec}
    global _unavailable
    with _lock:
        _run[key] = machine
        members = [m for k, m in _run.items() if k != key] + [machine]
        if _unavailable is not None:  # asked once in this run already, and no scheduler answered
            return Prediction(key, None, _unavailable)
    try:
        return predict_machines(client, namespace, members, timeout=PREDICT_TIMEOUT)[-1]
    except PredictionUnavailable as exc:
        with _lock:
            _unavailable = str(exc)
        return Prediction(key, None, str(exc))


def _shape(obj: dict[str, Any]) -> dict[str, Any]:
    return {k: parse_quantity(str(v)) for k, v in (obj.get("capabilities") or {}).items()}


def _twin(client: Client, made: dict[str, Any]) -> str | None:
    """An existing MachineClass with the capabilities of ``made`` (a class this run declares)."""
    shape = _shape(made)
    return next((str(c["metadata"]["name"]) for c in client.list_raw(MACHINE_CLASSES).items
                 if _shape(c) == shape), None)
