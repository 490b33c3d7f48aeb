#!/usr/bin/python
# Copyright: ironpool contributors
# SPDX-License-Identifier: Apache-2.0
"""ironpool.iaas.reservation: hold capacity for a set of Machines, all of it or none."""

from __future__ import annotations

DOCUMENTATION = r"""
module: reservation
short_description: Hold room for a set of ironpool Machines, all of it or none
version_added: 0.1.0
description:
  - Creates, updates or deletes a Reservation (C(compute.ironcore.dev/v1alpha1), IronCore's IEP-11),
    which holds room for Machines yet to come. The scheduler plans the whole set at once; the
    Reservation is held when every pool of the plan has accepted its part, or refused whole, naming
    what is short, and then holds nothing.
  - A play reserves first and fails fast - before any Machine is made - when the set does not fit;
    its Machines then name the Reservation
    (O(ironpool.iaas.machine#module:reservation)) and are placed only within it.
  - A Reservation that was refused or expired is asked for again by the next run. What it holds
    cannot change (but O(ttl)); a change fails naming the option unless O(force=true), which deletes
    and recreates it.
author:
  - ironpool engineers (!UNKNOWN)
options:
  name:
    description: Name of the Reservation (a DNS label).
    type: str
    required: true
  state:
    description: Whether the Reservation should exist.
    type: str
    choices: [present, absent]
    default: present
  machines:
    description:
      - "Whole machines to hold, per MachineClass, for example C({x-small: 10})."
    type: dict
  cpu:
    description: A block of cpu to hold besides whole machines, for example V(4).
    type: str
  memory:
    description: A block of memory to hold with O(cpu), for example V(8Gi).
    type: str
  pools:
    description: Only these MachinePools may hold it; any pool when not given.
    type: list
    elements: str
  pool_selector:
    description: Only pools carrying all these labels may hold it.
    type: dict
  zone_spread:
    description:
      - Spread the machines over the pools' zones (C(topology.ironcore.dev/zone)) so that no zone
        holds more than this many beyond the zone that holds the fewest.
    type: int
  ttl:
    description:
      - Seconds after its creation at which the Reservation releases what no Machine uses yet.
      - May change on an existing Reservation.
    type: int
  labels:
    description: Labels to set on the Reservation.
    type: dict
  force:
    description: Delete and recreate the Reservation when what it holds differs.
    type: bool
    default: false
  wait:
    description:
      - Wait until every pool accepted its part; a refusal fails the task at once with the
        scheduler's account of what is short, and the refused Reservation is removed.
      - Never waits in check mode.
    type: bool
    default: true
  wait_timeout:
    description: Seconds to wait with O(wait=true).
    type: int
    default: 300
extends_documentation_fragment:
  - ironpool.iaas.connection
attributes:
  check_mode:
    support: full
    description:
      - Predicts the change and asks the scheduler whether the set would fit now (a dry run, which
        holds nothing); a set that would not fit fails the task as the real run would.
  diff_mode:
    support: full
    description: Before and after of the Reservation's declared fields.
"""

EXAMPLES = r"""
- name: Room for the whole web tier, or nothing
  ironpool.iaas.reservation:
    name: web
    machines:
      x-small: 10
    ttl: 1800

- name: The machines, placed within it
  ironpool.iaas.machine:
    name: "web-{{ item }}"
    machine_class: x-small
    image: tiny
    reservation: web
  loop: "{{ range(10) | list }}"

- name: Release what is left
  ironpool.iaas.reservation:
    name: web
    state: absent
"""

RETURN = r"""
reservation:
  description: The Reservation after the task (before deletion with state V(absent); empty when absent).
  returned: always
  type: dict
state:
  description: C(Accepted), C(Pending), C(Rejected) or C(Expired); in check mode C(Fits) or C(DoesNotFit).
  returned: state is present
  type: str
  sample: Accepted
fits:
  description: Whether the whole set fits (held, or in check mode would be).
  returned: state is present
  type: bool
message:
  description: The scheduler's account - where the machines go, or what is short and why.
  returned: state is present
  type: str
  sample: "10 machines on 2 pools: host-a (5 x-small), host-b (5 x-small)"
pools:
  description: Per pool, what the Reservation holds (or in check mode would hold) there.
  returned: state is present
  type: dict
  sample: {host-a: {class/machine.x-small: "5"}}
action:
  description: What the task did (or would do) - C(created), C(updated), C(recreated), C(unchanged),
    C(deleted), C(terminating) or C(absent).
  returned: always
  type: str
"""

import contextlib
import time
from typing import Any

from ansible_collections.ironpool.iaas.plugins.module_utils.base import IronpoolModule
from ansible_collections.ironpool.iaas.plugins.module_utils.checks import check_quantity, require_class
from ansible_collections.ironpool.iaas.plugins.module_utils.errors import OptionError
from ansible_collections.ironpool.iaas.plugins.module_utils.kinds import COMPUTE, resource
from ansible_collections.ironpool.iaas.plugins.module_utils.resource import TaskDeclarer, declared_metadata
from ansible_collections.ironpool.iaas.plugins.module_utils.wait import await_objects

with contextlib.suppress(ImportError):  # reported by IronpoolModule.execute
    from ironpool.api import reservation as rsv
    from ironpool.client.predict import PredictionUnavailable, predict_reservation
    from ironpool.client.readiness import reservation_accepted
    from ironpool.client.wait import Unschedulable, WaitError, wait_for_one

Obj = dict[str, Any]

FIELDS = {
    "metadata.name": "name",
    "metadata.labels": "labels",
    "spec.resources": "machines",
    "spec.pools": "pools",
    "spec.poolSelector": "pool_selector",
    "spec.zoneSpread": "zone_spread",
    "spec.ttlSecondsAfterCreation": "ttl",
}


class ReservationModule(IronpoolModule):
    """Declares one Reservation and waits until it is held, or fails naming the shortfall."""

    argument_spec = {
        "name": {"type": "str", "required": True},
        "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
        "machines": {"type": "dict"},
        "cpu": {"type": "str"},
        "memory": {"type": "str"},
        "pools": {"type": "list", "elements": "str"},
        "pool_selector": {"type": "dict"},
        "zone_spread": {"type": "int"},
        "ttl": {"type": "int"},
        "labels": {"type": "dict"},
        "force": {"type": "bool", "default": False},
        "wait": {"type": "bool", "default": True},
        "wait_timeout": {"type": "int", "default": 300},
    }
    module_kwargs = {"required_if": [["state", "present", ["machines", "cpu"], True]],
                     "required_together": [["cpu", "memory"]]}
    fields = FIELDS

    def run(self) -> None:
        p = self.params
        info = resource(COMPUTE, "Reservation")
        reservations = TaskDeclarer(self.client, info, self.namespace, self.check_mode, self.fields,
                                    gone_timeout=p["wait_timeout"])
        current = reservations.get(p["name"])
        if p["state"] == "absent":
            self.delete_and_wait(reservations, current, "reservation", "its pools release it first")
        desired = {"metadata": declared_metadata(p), "spec": self.spec()}
        again = current is not None and rsv.summary(current) in (rsv.REJECTED, "Expired")
        if again:
            # A final answer: this run asks again, as a new Reservation.
            reservations.absent(p["name"], current)
            if not self.check_mode:
                await_objects(self.client, info, self.namespace, [p["name"]], "gone", p)
            current = None
        outcome = reservations.present(desired, current, force=p["force"])
        made = outcome.action in ("created", "recreated")
        result: dict[str, Any] = {"changed": outcome.changed or again,
                                  "action": "recreated" if again and made else outcome.action}
        if self.diff_mode:
            result["diff"] = outcome.diff()
        if self.check_mode:
            self.predicted(desired["spec"], outcome.obj, result)
        self.held(outcome.obj, made, result)

    def spec(self) -> Obj:
        p = self.params
        resources: Obj = {}
        for cls, count in (p["machines"] or {}).items():
            if not isinstance(count, int) or isinstance(count, bool) or count < 1:
                raise OptionError(f"machines.{cls}: {count!r} must be a whole number of machines above 0")
            require_class(self.client, "MachineClass", str(cls), f"machines.{cls}")
            resources[rsv.class_key(str(cls))] = str(count)
        if p["cpu"]:
            resources["cpu"] = check_quantity("cpu", p["cpu"])
            resources["memory"] = check_quantity("memory", p["memory"])
        spec: Obj = {"resources": resources}
        if p["pools"]:
            spec["pools"] = [{"name": n} for n in p["pools"]]
        if p["pool_selector"]:
            spec["poolSelector"] = p["pool_selector"]
        if p["zone_spread"] is not None:
            spec["zoneSpread"] = {"maxSkew": p["zone_spread"]}
        if p["ttl"] is not None:
            spec["ttlSecondsAfterCreation"] = p["ttl"]
        return spec

    def predicted(self, spec: Obj, obj: Obj | None, result: dict[str, Any]) -> None:
        """Check mode: whether the set would fit now, as the scheduler answers a dry run of it."""
        if obj is not None and rsv.summary(obj) == rsv.ACCEPTED:
            return  # held already: nothing to predict
        held = {k: v for k, v in spec.items() if k != "ttlSecondsAfterCreation"}
        try:
            answer = predict_reservation(self.client, self.namespace, held)
        except PredictionUnavailable as exc:
            self.exit(**result, reservation=obj or {}, state="Pending", fits=False, message=str(exc),
                      pools={})
        result.update(reservation=obj or {}, state="Fits" if answer.fits else "DoesNotFit", fits=answer.fits,
                      message=answer.message, pools=answer.parts)
        if not answer.fits:
            self.fail(f"reservation {self.namespace}/{self.params['name']} would not fit: {answer.message}",
                      **result)
        self.exit(**result)

    def held(self, obj: Obj | None, made: bool, result: dict[str, Any]) -> None:
        """Wait (with ``wait``) until every pool holds its part; a refusal removes what this task
        made and fails naming the shortfall."""
        p = self.params
        info = resource(COMPUTE, "Reservation")
        if p["wait"]:
            try:
                obj = wait_for_one(self.client, info, self.namespace, p["name"], reservation_accepted,
                                   _deadline(p["wait_timeout"]), known=obj)
            except WaitError as exc:
                last = exc.last.get(p["name"]) or {}
                if isinstance(exc, Unschedulable) and made:
                    with contextlib.suppress(Exception):
                        self.client.delete_raw(info, p["name"], self.namespace)
                self.fail(_refusal(self.namespace, p["name"], exc, p["wait_timeout"], made),
                          **result, **_summary(last))
        self.exit(**result, **_summary(obj or {}))


def _deadline(seconds: float) -> float:
    return time.monotonic() + float(seconds)


def _summary(obj: Obj) -> dict[str, Any]:
    if not obj:
        return {"reservation": {}, "state": "", "fits": False, "message": "", "pools": {}}
    conditions = (obj.get("status") or {}).get("conditions") or []
    cond: Obj = next((c for c in conditions if c.get("type") == rsv.SCHEDULED), {})
    word = rsv.summary(obj)
    return {"reservation": obj, "state": word, "fits": word == rsv.ACCEPTED or cond.get("status") == "True",
            "message": str(cond.get("message") or ""),
            "pools": {str(e["ref"]): dict(e.get("resources") or {}) for e in rsv.pool_entries(obj)}}


def _refusal(namespace: str, name: str, exc: Any, timeout: float, made: bool) -> str:
    where = f"reservation {namespace}/{name}"
    if isinstance(exc, Unschedulable):
        removed = "; it was removed, holding nothing" if made else ""
        return f"{where} was {exc.reason}{removed}"
    return f"{where} is not held after {timeout}s: {exc}"


def main() -> None:
    ReservationModule().execute()


if __name__ == "__main__":
    main()
