"""Where the scheduler would place a new Machine now: the answer ``pulumi preview`` shows.

One plugin process serves one ``pulumi preview`` or ``up``: the new Machines it checked so far are the
run's set, and each Machine is asked about together with them (:func:`ironpool.client.predict`: the
scheduler answers one dry-run Reservation of the set), so the Machine that would not fit beside the
others says so. A Machine whose class this run declares but has not created yet cannot be asked
about until the class exists.
"""

from __future__ import annotations

import threading
from typing import Any

from ironpool.api.errors import NotFound
from ironpool.api.resources import resolve
from ironpool.client import Client
from ironpool.client.predict import Prediction, PredictionUnavailable, predict_machines

from ironpool_pulumi import declared

MACHINE_CLASSES, MACHINES = resolve("machineclasses"), resolve("machines")
_lock = threading.Lock()
_run: dict[str, dict[str, Any]] = {}  # namespace/name -> manifest, the new Machines checked so far


def predict(client: Client, machine: dict[str, Any], namespace: str) -> Prediction:
    """The scheduler's answer for the new Machine ``machine`` (a manifest), beside the run's others."""
    meta = machine.get("metadata") or {}
    key = f"{meta.get('namespace') or namespace}/{meta.get('name')}"
    cls = str(((machine.get("spec") or {}).get("machineClassRef") or {}).get("name") or "")
    try:
        client.get_raw(MACHINE_CLASSES, cls)
    except NotFound:
        if declared.declared("MachineClass", cls) is not None:
            return Prediction(key, None, f"class {cls} is made by this run: its machines are placed once it "
                                         f"exists")
    with _lock:
        _run[key] = machine
        members = [m for k, m in _run.items() if k != key] + [machine]
    try:
        return predict_machines(client, namespace, members)[-1]
    except PredictionUnavailable as exc:
        return Prediction(key, None, str(exc))
