#!/usr/bin/python
# Copyright: ironpool contributors
# SPDX-License-Identifier: Apache-2.0
"""ironpool.iaas.machine: declare an ironpool Machine (a QEMU domain on the pool the scheduler picks)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: machine
short_description: Declare an ironpool Machine
version_added: 0.1.0
description:
  - Creates, updates or deletes a Machine (C(compute.ironcore.dev/v1alpha1)). The ironpool
    scheduler binds a new Machine to a MachinePool, whose poollet boots it as a QEMU domain on that
    pool's libvirt host.
  - Updates are made in place where the API allows it (O(power), O(labels), O(annotations),
    O(volumes) other than the boot disk, O(network_interfaces), O(tolerations), O(pool_selector)).
    O(machine_class), the boot disk's O(image), and O(pool) once the Machine is scheduled cannot
    change; such a change fails naming the option unless O(force=true), which deletes the Machine
    and creates it again.
  - Labels and annotations are merged into the ones the Machine has; keys not given are kept,
    except a label this module set in an earlier run that O(labels) no longer lists, which is
    removed. The module records the label keys it manages in the annotation
    C(iaas.ironpool.dev/managed-labels) (as C(kubectl apply) records what it applied), so labels set
    by others, or set before the module recorded them, are never removed.
  - In check mode nothing is written. A new Machine reports the pool the scheduler would pick now
    (RV(pool)); with C(--diff) the diff's header names it. The scheduler answers for the new Machines of
    the whole run together (this one and those earlier tasks of the run would create, also in a loop),
    so the Machine that would not fit beside the others says so (RV(placement_reason)).
  - With O(reservation) the Machine is placed only within that Reservation (see
    M(ironpool.iaas.reservation)), on a pool that holds room for it.
author:
  - ironpool engineers (!UNKNOWN)
options:
  name:
    description: Name of the Machine (a DNS label).
    type: str
    required: true
  state:
    description: Whether the Machine should exist.
    type: str
    choices: [present, absent]
    default: present
  machine_class:
    description:
      - The MachineClass (CPU and memory) of the Machine. Required to create one.
      - Cannot change on an existing Machine (see O(force)).
    type: str
  pool:
    description:
      - Bind the Machine to this MachinePool instead of letting the scheduler choose.
      - Cannot change once the Machine is bound.
    type: str
  pool_selector:
    description: Only pools carrying all these labels are candidates.
    type: dict
  power:
    description:
      - Power state of the Machine. V(off) shuts the domain off; V(on) starts it.
      - When creating a Machine without this option it is powered on.
    type: str
    choices: ['on', 'off']
  image:
    description:
      - Boot from a local disk (volume C(root)) filled from this image of the pool's image catalog,
        for example V(tiny).
      - Cannot change on an existing Machine (see O(force)).
    type: str
  disk_size:
    description: Size of the boot disk, for example V(1Gi). Needs O(image).
    type: str
  volumes:
    description:
      - Further disks, after the boot disk. Given, this list replaces the Machine's further disks.
    type: list
    elements: dict
    suboptions:
      name:
        description: Name of the disk within the Machine.
        type: str
        required: true
      volume:
        description: Attach this Volume (see M(ironpool.iaas.volume)); it lands on the Machine's host.
        type: str
      size:
        description: An empty scratch disk of this size, for example V(512Mi), instead of a Volume.
        type: str
      device:
        description: Device name in the guest (C(oda), C(odb), ...); the API assigns one when unset.
        type: str
  network_interfaces:
    description:
      - Network interfaces of the Machine. Given, this list replaces the Machine's interfaces.
    type: list
    elements: dict
    suboptions:
      name:
        description: Name of the interface within the Machine.
        type: str
        required: true
      network_interface:
        description: Use this existing NetworkInterface.
        type: str
      ephemeral:
        description: The spec of a NetworkInterface created and deleted with the Machine.
        type: dict
  ignition:
    description:
      - The guest's boot configuration. An Ignition config is handed over through QEMU's fw_cfg;
        cloud-init user data (C(#cloud-config), a script starting with C(#!), or a MIME multipart
        message) as a NoCloud seed disk with the Machine's hostname and the addresses of its network
        interfaces, for images such as the one C(ironpool image build debian-12) makes.
      - Stored in the Secret C(<name>-ignition), which the module creates, updates and deletes with
        the Machine. The guest reads it when its domain is created, so a running Machine keeps the
        configuration it booted with.
      - Never logged or returned.
    type: str
  ignition_secret:
    description: Use the C(ignition.yaml) key of this existing Secret instead of O(ignition).
    type: str
  labels:
    description:
      - Labels to set on the Machine.
      - A label listed in an earlier run of this module and left out now is removed; V({}) removes
        all of them. Without this option the labels are left as they are.
    type: dict
  annotations:
    description: Annotations to set on the Machine.
    type: dict
  tolerations:
    description: Taints of pools this Machine tolerates. Given, this list replaces the Machine's.
    type: list
    elements: dict
    suboptions:
      key:
        description: Taint key; empty with O(tolerations[].operator=Exists) tolerates every taint.
        type: str
      operator:
        description: How O(tolerations[].value) is compared.
        type: str
        choices: [Equal, Exists]
      value:
        description: Taint value to match (with V(Equal)).
        type: str
      effect:
        description: Taint effect to match; unset matches every effect.
        type: str
        choices: [NoSchedule, NoExecute]
  wait_for:
    description:
      - What O(wait=true) waits for with state V(present).
      - V(scheduled) - the scheduler bound the Machine to a pool.
      - V(running) - the Machine's poollet has acted on its current spec (C(status.observedGeneration)),
        the domain is in the Machine's power state (C(Running) when on, C(Shutdown) when off), and its
        volumes and network interfaces are attached, the interfaces' addresses and SSH endpoint
        reported (see the P(ironpool.iaas.machines#inventory) inventory). C(ironpool wait --for=running)
        and the Pulumi provider's C(wait_for="running") mean the same.
    type: str
    choices: [scheduled, running]
    default: running
  force:
    description:
      - When a field that cannot change in place differs, delete the Machine (and its domain and
        local disks) and create it again instead of failing.
    type: bool
    default: false
  reservation:
    description:
      - Place the Machine within this Reservation of its namespace (the label
        C(compute.ironcore.dev/reservation)); it waits while the Reservation holds no room for it.
      - Cannot change once the Machine is bound to a pool.
    type: str
  predict_with:
    description:
      - Not for playbooks - the collection's action plugin sets it in check mode to the Machines
        earlier tasks of the run would create, so the scheduler predicts them together with this one.
    type: list
    elements: dict
extends_documentation_fragment:
  - ironpool.iaas.connection
  - ironpool.iaas.wait
attributes:
  check_mode:
    support: full
    description: Predicts the change, the diff and the pool a new Machine would land on.
  diff_mode:
    support: full
    description: Before and after of the Machine's declared fields (and of its Ignition Secret, redacted).
"""

EXAMPLES = r"""
- name: A machine booting the tiny image, running before the task returns
  ironpool.iaas.machine:
    name: web-1
    machine_class: x-small
    image: tiny
    disk_size: 1Gi
    volumes:
      - name: data
        volume: web-data
    labels:
      app: web
    wait: true
    wait_for: running
  register: web

- name: Show where it landed
  ansible.builtin.debug:
    msg: "{{ web.machine.metadata.name }} runs on pool {{ web.pool }} ({{ web.state }})"

- name: Power it off
  ironpool.iaas.machine:
    name: web-1
    power: 'off'
    wait: true

- name: Move it to a bigger class (deletes and recreates it)
  ironpool.iaas.machine:
    name: web-1
    machine_class: small
    image: tiny
    force: true

- name: Delete it and wait until its domain is gone
  ironpool.iaas.machine:
    name: web-1
    state: absent
    wait: true
"""

RETURN = r"""
machine:
  description:
    - The Machine as the apiserver holds it after the task (in check mode, as it would be).
    - With state V(absent), the Machine as it was before deletion, or empty when it did not exist.
  returned: always
  type: dict
  sample:
    apiVersion: compute.ironcore.dev/v1alpha1
    kind: Machine
    metadata: {name: web-1, namespace: default, labels: {app: web}}
    spec: {machineClassRef: {name: x-small}, machinePoolRef: {name: host-1}, power: "On"}
    status: {state: Running, conditions: [{type: Ready, status: "True"}]}
pool:
  description:
    - The MachinePool the Machine is bound to; empty while it is not scheduled.
    - In check mode, for a Machine not bound yet, the pool the scheduler would pick now (empty when
      none fits; RV(placement_reason) says why).
  returned: state is present
  type: str
  sample: host-1
placement_reason:
  description: Check mode only, for a Machine not bound yet - why the preview chose the pool or none.
  returned: check mode, state is present
  type: str
  sample: fits
state:
  description: The Machine's C(status.state) (C(Pending), C(Running), C(Shutdown), ...); empty before
    its poollet reported.
  returned: state is present
  type: str
  sample: Running
conditions:
  description: The Machine's C(status.conditions) (C(Ready), C(VolumesReady), C(NetworkInterfacesReady)).
  returned: state is present
  type: list
  elements: dict
  sample: [{type: Ready, status: "True", reason: Running}]
addresses:
  description:
    - IP addresses of the Machine's network interfaces (C(status.networkInterfaces[].ips)), once the
      Machine has any; empty otherwise.
  returned: state is present
  type: list
  elements: str
  sample: []
placement_request:
  description: Check mode only, for a Machine not bound yet - what the tasks after it predict it with
    (kept by the collection's action plugin).
  returned: check mode, state is present
  type: dict
  sample: {metadata: {name: web-1, namespace: default}, spec: {machineClassRef: {name: x-small}}}
action:
  description: What the task did (or would do) - C(created), C(updated), C(recreated), C(unchanged),
    C(deleted), C(terminating) (already being deleted) or C(absent).
  returned: always
  type: str
  sample: created
"""

from typing import TYPE_CHECKING, Any

from ansible_collections.ironpool.iaas.plugins.module_utils.base import IronpoolModule
from ansible_collections.ironpool.iaas.plugins.module_utils.checks import require_class
from ansible_collections.ironpool.iaas.plugins.module_utils.kinds import COMPUTE, resource
from ansible_collections.ironpool.iaas.plugins.module_utils.machine_spec import (
    ARGUMENT_SPEC,
    BOOT_DISK,
    FIELDS,
    IGNITION_OF_LABEL,
    RESERVATION_LABEL,
    ignition_secret,
    ignition_secret_name,
    machine_spec,
)
from ansible_collections.ironpool.iaas.plugins.module_utils.resource import (
    TaskDeclarer,
    declared_metadata,
    with_owned_labels,
)
from ansible_collections.ironpool.iaas.plugins.module_utils.views import machine_summary, secret_diff

if TYPE_CHECKING:
    from ironpool.client.declare import Outcome


class MachineModule(IronpoolModule):
    """Declares one Machine and, with ``ignition``, the Secret holding its boot configuration."""

    argument_spec = ARGUMENT_SPEC
    module_kwargs = {
        "mutually_exclusive": [["ignition", "ignition_secret"]],
        "required_by": {"disk_size": "image"},
    }
    fields = FIELDS

    def run(self) -> None:
        p = self.params
        self.fields = dict(self.fields)
        if p["image"]:
            # The boot disk is spec.volumes[0], named root (update errors name it by name).
            self.fields.update({"spec.volumes[0]": "image", f"spec.volumes[{BOOT_DISK}]": "image"})
        if p["ignition"] is not None:
            self.fields["spec.ignitionRef"] = "ignition"
        machines = TaskDeclarer(self.client, resource(COMPUTE, "Machine"), self.namespace, self.check_mode,
                                self.fields, gone_timeout=p["wait_timeout"])
        current = machines.get(p["name"])
        if p["state"] == "absent":
            self.delete_and_wait(machines, current, "machine", "its poollet removes the domain first",
                                 then=self.remove_ignition)
        self.declare(machines, current)

    # -- present -----------------------------------------------------------------------------

    def declare(self, machines: TaskDeclarer, current: dict[str, Any] | None) -> None:
        p = self.params
        meta = declared_metadata(p)
        if p["reservation"]:
            meta["labels"] = {**(meta.get("labels") or {}), RESERVATION_LABEL: p["reservation"]}
        desired = {"metadata": with_owned_labels(meta, current), "spec": machine_spec(p)}
        if current is None and not p["machine_class"]:
            self.fail("machine_class: required to create Machine "
                      f"{self.namespace}/{p['name']} (it does not exist yet)")
        if p["machine_class"] and (current is None or p["force"]):
            require_class(self.client, "MachineClass", p["machine_class"], "machine_class")
        if current is None:
            machines.validate_new(desired)  # every bad option named before anything is written
        secret_outcome = self.declare_ignition()
        outcome = machines.present(desired, current, force=p["force"])
        result = self.result(outcome, secret_outcome)
        self.finish_present(machines, outcome.obj, result, machine_summary)

    def declare_ignition(self) -> Outcome | None:
        if self.params["ignition"] is None:
            return None
        secrets = TaskDeclarer(self.client, resource("v1", "Secret"), self.namespace, self.check_mode,
                               {"data": "ignition"})
        desired = ignition_secret(self.params)
        return secrets.present(desired, secrets.get(desired["metadata"]["name"]))

    def result(self, outcome: Outcome, secret: Outcome | None) -> dict[str, Any]:
        result: dict[str, Any] = {
            "changed": outcome.changed or bool(secret and secret.changed),
            "action": outcome.action,
            **machine_summary(outcome.obj),
        }
        if self.diff_mode:
            diffs = [outcome.diff()]
            if secret is not None and secret.changed:
                diffs.append(secret_diff(secret.before, secret.after))
            result["diff"] = diffs if len(diffs) > 1 else diffs[0]
        return result

    # -- absent ------------------------------------------------------------------------------

    def remove_ignition(self) -> bool:
        """Delete the Secret this module made for the Machine's ``ignition`` (never a user's own)."""
        secrets = TaskDeclarer(self.client, resource("v1", "Secret"), self.namespace, self.check_mode, {})
        name = ignition_secret_name(self.params)
        current = secrets.get(name)
        labels = ((current or {}).get("metadata") or {}).get("labels") or {}
        if current is None or labels.get(IGNITION_OF_LABEL) != self.params["name"]:
            return False
        return secrets.absent(name, current).changed


def main() -> None:
    MachineModule().execute()


if __name__ == "__main__":
    main()
