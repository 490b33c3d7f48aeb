#!/usr/bin/python
# Copyright: ironpool contributors
# SPDX-License-Identifier: Apache-2.0
"""ironpool.iaas.volume_snapshot: declare an ironpool VolumeSnapshot (a point-in-time copy of a Volume)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: volume_snapshot
short_description: Declare an ironpool VolumeSnapshot
version_added: 0.1.0
description:
  - Creates or deletes a VolumeSnapshot (C(storage.ironcore.dev/v1alpha1)), a point-in-time copy of a
    Volume of the namespace. The poollet of the Volume's pool takes it, as a full qcow2 copy in the
    same libvirt storage pool; it outlives its Volume, and M(ironpool.iaas.volume) with its C(snapshot)
    option restores it into a new Volume, in that pool.
  - A snapshot of a Volume attached to a running Machine is crash-consistent (what the disk held at
    one instant, as after a power cut); stop the Machine, or quiesce the guest, for more.
  - O(volume) cannot change on an existing snapshot; such a change fails naming the option unless
    O(force=true), which deletes the snapshot and takes a new one.
  - Labels and annotations are merged into the ones the snapshot has.
  - In check mode nothing is written.
author:
  - ironpool engineers (!UNKNOWN)
options:
  name:
    description: Name of the VolumeSnapshot.
    type: str
    required: true
  state:
    description: Whether the VolumeSnapshot should exist.
    type: str
    choices: [present, absent]
    default: present
  volume:
    description: The Volume to snapshot. Required to create one.
    type: str
  labels:
    description: Labels to set on the VolumeSnapshot.
    type: dict
  annotations:
    description: Annotations to set on the VolumeSnapshot.
    type: dict
  wait_for:
    description:
      - What O(wait=true) waits for with state V(present).
      - V(ready) - the snapshot's state is C(Ready) (a C(Failed) one ends the wait at once, failing).
    type: str
    choices: [ready]
    default: ready
  force:
    description: Delete and take the snapshot again when O(volume) differs.
    type: bool
    default: false
extends_documentation_fragment:
  - ironpool.iaas.connection
  - ironpool.iaas.wait
attributes:
  check_mode:
    support: full
    description: Predicts the change and the diff.
  diff_mode:
    support: full
    description: Before and after of the snapshot's declared fields.
"""

EXAMPLES = r"""
- name: Snapshot the data volume and wait until it is Ready
  ironpool.iaas.volume_snapshot:
    name: web-data-monday
    volume: web-data
    wait: true

- name: Restore it into a new Volume (made in the snapshot's pool)
  ironpool.iaas.volume:
    name: web-data-restored
    volume_class: fast
    size: 1Gi
    snapshot: web-data-monday
    wait: true

- name: Delete the snapshot
  ironpool.iaas.volume_snapshot:
    name: web-data-monday
    state: absent
    wait: true
"""

RETURN = r"""
volume_snapshot:
  description:
    - The VolumeSnapshot as the apiserver holds it after the task (in check mode, as it would be).
    - With state V(absent), the snapshot as it was before deletion, or empty when it did not exist.
  returned: always
  type: dict
  sample:
    apiVersion: storage.ironcore.dev/v1alpha1
    kind: VolumeSnapshot
    metadata: {name: web-data-monday, namespace: default}
    spec: {volumeRef: {name: web-data}}
    status: {state: Ready, snapshotID: "ironpool-volume://1f0c...", size: "1073741824"}
state:
  description: The snapshot's C(status.state) (C(Pending), C(Ready), C(Failed)); empty before a poollet
    reported.
  returned: state is present
  type: str
  sample: Ready
size:
  description: The snapshot's size as its pool reports it (C(status.size)).
  returned: state is present
  type: str
  sample: "1073741824"
snapshot_id:
  description: The snapshot's ID at its volume runtime (C(status.snapshotID)).
  returned: state is present
  type: str
  sample: ironpool-volume://1f0c9a0e5b2d4c7f8e6a1b3c5d7e9f01
action:
  description: What the task did (or would do) - C(created), C(updated), C(recreated), C(unchanged),
    C(deleted), C(terminating) or C(absent).
  returned: always
  type: str
  sample: created
"""

from typing import Any

from ansible_collections.ironpool.iaas.plugins.module_utils.base import IronpoolModule
from ansible_collections.ironpool.iaas.plugins.module_utils.client import wait_argument_spec
from ansible_collections.ironpool.iaas.plugins.module_utils.kinds import resource
from ansible_collections.ironpool.iaas.plugins.module_utils.resource import TaskDeclarer, declared_metadata
from ansible_collections.ironpool.iaas.plugins.module_utils.views import snapshot_summary
from ansible_collections.ironpool.iaas.plugins.module_utils.wait import WaitFailed, await_objects


class VolumeSnapshotModule(IronpoolModule):
    """Declares one VolumeSnapshot; its source never changes (``force`` takes it again)."""

    argument_spec = {
        "name": {"type": "str", "required": True},
        "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
        "volume": {"type": "str"},
        "labels": {"type": "dict"},
        "annotations": {"type": "dict"},
        "wait_for": {"type": "str", "choices": ["ready"], "default": "ready"},
        "force": {"type": "bool", "default": False},
        **wait_argument_spec(),
    }
    fields = {
        "metadata.name": "name",
        "metadata.namespace": "namespace",
        "metadata.labels": "labels",
        "metadata.annotations": "annotations",
        "spec.volumeRef": "volume",
    }

    def run(self) -> None:
        p = self.params
        info = resource("storage.ironcore.dev/v1alpha1", "VolumeSnapshot")
        snapshots = TaskDeclarer(self.client, info, self.namespace, self.check_mode, self.fields,
                                 gone_timeout=p["wait_timeout"])
        current = snapshots.get(p["name"])
        if p["state"] == "absent":
            self.delete_and_wait(snapshots, current, "volume_snapshot", "its volume pool removes it first")
        if current is None and not p["volume"]:
            self.fail(f"volume: required to create VolumeSnapshot {self.namespace}/{p['name']} "
                      "(it does not exist yet)")
        spec = {"volumeRef": {"name": p["volume"]}} if p["volume"] else {}
        desired: dict[str, Any] = {"metadata": declared_metadata(p), "spec": spec}
        if current is None:
            snapshots.validate_new(desired)
        outcome = snapshots.present(desired, current, force=p["force"])
        result: dict[str, Any] = {"changed": outcome.changed, "action": outcome.action,
                                  **snapshot_summary(outcome.obj)}
        if self.diff_mode:
            result["diff"] = outcome.diff()
        if p["wait"] and not self.check_mode:
            try:
                found = await_objects(self.client, info, snapshots.namespace, [p["name"]], p["wait_for"], p)
            except WaitFailed as exc:
                result.update(snapshot_summary(exc.last.get(p["name"])))
                self.fail(str(exc), **result)
            result.update(snapshot_summary(found[p["name"]]))
        self.exit(**result)


def main() -> None:
    VolumeSnapshotModule().execute()


if __name__ == "__main__":
    main()
