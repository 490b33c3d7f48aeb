#!/usr/bin/python
# Copyright: ironpool contributors
# SPDX-License-Identifier: Apache-2.0
"""ironpool.iaas.volume: declare an ironpool Volume (a qcow2 volume in a pool's libvirt storage pool)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: volume
short_description: Declare an ironpool Volume
version_added: 0.1.0
description:
  - Creates, grows or deletes a Volume (C(storage.ironcore.dev/v1alpha1)). The scheduler binds it to
    a VolumePool (a Volume that a Machine uses lands beside that Machine), whose poollet creates it as
    a qcow2 volume in that host's libvirt storage pool.
  - O(size) grows the Volume in place when its VolumeClass has resize policy C(ExpandOnly). A
    smaller O(size) is an error naming O(size); a Volume never shrinks.
  - O(volume_class), O(image) and O(snapshot) cannot change on an existing Volume; such a change fails
    naming the option unless O(force=true), which deletes the Volume (and its data) and creates it again.
  - Labels and annotations are merged into the ones the Volume has.
  - In check mode nothing is written; a new Volume reports the pool the scheduler would pick now.
author:
  - ironpool engineers (!UNKNOWN)
options:
  name:
    description: Name of the Volume.
    type: str
    required: true
  state:
    description: Whether the Volume should exist.
    type: str
    choices: [present, absent]
    default: present
  volume_class:
    description: The VolumeClass of the Volume. Required to create one.
    type: str
  size:
    description: Size of the Volume, for example V(10Gi). Required to create one.
    type: str
  image:
    description: Fill the new Volume from this image of the pool's image catalog.
    type: str
  snapshot:
    description:
      - Restore the new Volume from this VolumeSnapshot of the namespace (see
        M(ironpool.iaas.volume_snapshot)). The Volume is made in the pool that holds the snapshot;
        O(size) must be at least the snapshot's. Mutually exclusive with O(image).
    type: str
  pool:
    description: Bind the Volume to this VolumePool instead of letting the scheduler choose.
    type: str
  pool_selector:
    description: Only volume pools carrying all these labels are candidates.
    type: dict
  labels:
    description: Labels to set on the Volume.
    type: dict
  annotations:
    description: Annotations to set on the Volume.
    type: dict
  wait_for:
    description:
      - What O(wait=true) waits for with state V(present).
      - V(scheduled) - the scheduler bound the Volume to a pool.
      - V(available) - the Volume is C(Available) at its requested size (after a grow, too).
    type: str
    choices: [scheduled, available]
    default: available
  force:
    description: Delete and recreate the Volume when O(volume_class) or O(image) differ.
    type: bool
    default: false
extends_documentation_fragment:
  - ironpool.iaas.connection
  - ironpool.iaas.wait
attributes:
  check_mode:
    support: full
    description: Predicts the change, the diff and the pool a new Volume would land on.
  diff_mode:
    support: full
    description: Before and after of the Volume's declared fields.
"""

EXAMPLES = r"""
- name: A 1Gi data volume
  ironpool.iaas.volume:
    name: web-data
    volume_class: fast
    size: 1Gi
    wait: true

- name: Grow it in place
  ironpool.iaas.volume:
    name: web-data
    size: 2Gi
    wait: true

- name: Delete it
  ironpool.iaas.volume:
    name: web-data
    state: absent
    wait: true
"""

RETURN = r"""
volume:
  description:
    - The Volume as the apiserver holds it after the task (in check mode, as it would be).
    - With state V(absent), the Volume as it was before deletion, or empty when it did not exist.
  returned: always
  type: dict
  sample:
    apiVersion: storage.ironcore.dev/v1alpha1
    kind: Volume
    metadata: {name: web-data, namespace: default}
    spec: {volumeClassRef: {name: fast}, resources: {storage: 1Gi}, volumePoolRef: {name: host-1}}
    status: {state: Available, resources: {storage: 1Gi}}
pool:
  description:
    - The VolumePool the Volume is bound to; empty while it is not scheduled.
    - In check mode, for a Volume not bound yet, the pool the scheduler would pick now.
  returned: state is present
  type: str
  sample: host-1
placement_reason:
  description: Check mode only, for a Volume not bound yet - why the preview chose the pool or none.
  returned: check mode, state is present
  type: str
  sample: fits
state:
  description: The Volume's C(status.state) (C(Pending), C(Available), C(Error)); empty before its
    poollet reported.
  returned: state is present
  type: str
  sample: Available
size:
  description: The size the pool reports the Volume has (C(status.resources.storage)).
  returned: state is present
  type: str
  sample: 1Gi
action:
  description: What the task did (or would do) - C(created), C(updated), C(recreated), C(unchanged),
    C(deleted), C(terminating) or C(absent).
  returned: always
  type: str
  sample: updated
"""

import contextlib
from typing import Any

from ansible_collections.ironpool.iaas.plugins.module_utils.base import IronpoolModule
from ansible_collections.ironpool.iaas.plugins.module_utils.checks import check_quantity, require_class
from ansible_collections.ironpool.iaas.plugins.module_utils.client import wait_argument_spec
from ansible_collections.ironpool.iaas.plugins.module_utils.errors import OptionError, cause_text
from ansible_collections.ironpool.iaas.plugins.module_utils.kinds import resource
from ansible_collections.ironpool.iaas.plugins.module_utils.resource import TaskDeclarer, declared_metadata
from ansible_collections.ironpool.iaas.plugins.module_utils.views import volume_summary

with contextlib.suppress(ImportError):  # reported by IronpoolModule.execute
    from ironpool.api.errors import Invalid


class VolumeModule(IronpoolModule):
    """Declares one Volume; grows it in place, never shrinks it."""

    argument_spec = {
        "name": {"type": "str", "required": True},
        "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
        "volume_class": {"type": "str"},
        "size": {"type": "str"},
        "image": {"type": "str"},
        "snapshot": {"type": "str"},
        "pool": {"type": "str"},
        "pool_selector": {"type": "dict"},
        "labels": {"type": "dict"},
        "annotations": {"type": "dict"},
        "wait_for": {"type": "str", "choices": ["scheduled", "available"], "default": "available"},
        "force": {"type": "bool", "default": False},
        **wait_argument_spec(),
    }
    module_kwargs = {"mutually_exclusive": [["image", "snapshot"]]}
    fields = {
        "metadata.name": "name",
        "metadata.namespace": "namespace",
        "metadata.labels": "labels",
        "metadata.annotations": "annotations",
        "spec.volumeClassRef": "volume_class",
        "spec.resources": "size",
        "spec.dataSource.volumeSnapshotRef": "snapshot",
        "spec.dataSource.osImage": "image",
        "spec.volumePoolRef": "pool",
        "spec.volumePoolSelector": "pool_selector",
    }

    def run(self) -> None:
        p = self.params
        info = resource("storage.ironcore.dev/v1alpha1", "Volume")
        volumes = TaskDeclarer(self.client, info, self.namespace, self.check_mode, self.fields,
                               gone_timeout=p["wait_timeout"],
                               immutable=(("spec", "dataSource", "osImage"),
                                          ("spec", "dataSource", "volumeSnapshotRef")))
        current = volumes.get(p["name"])
        if p["state"] == "absent":
            self.delete_and_wait(volumes, current, "volume", "a Machine may still use it")
        self.declare(volumes, current)

    def desired(self) -> dict[str, Any]:
        p = self.params
        meta = declared_metadata(p)
        spec: dict[str, Any] = {}
        if p["volume_class"]:
            spec["volumeClassRef"] = {"name": p["volume_class"]}
        if p["size"] is not None:
            spec["resources"] = {"storage": check_quantity("size", p["size"])}
        if p["image"]:
            spec["dataSource"] = {"osImage": {"image": p["image"]}}
        if p["snapshot"]:
            spec["dataSource"] = {"volumeSnapshotRef": {"name": p["snapshot"]}}
        if p["pool"]:
            spec["volumePoolRef"] = {"name": p["pool"]}
        if p["pool_selector"] is not None:
            spec["volumePoolSelector"] = p["pool_selector"]
        return {"metadata": meta, "spec": spec}

    def declare(self, volumes: TaskDeclarer, current: dict[str, Any] | None) -> None:
        p = self.params
        desired = self.desired()
        key = f"{self.namespace}/{p['name']}"
        if current is None:
            for option in ("volume_class", "size"):
                if not p[option]:
                    self.fail(f"{option}: required to create Volume {key} (it does not exist yet)")
        if p["volume_class"] and (current is None or p["force"]):
            require_class(self.client, "VolumeClass", p["volume_class"], "volume_class")
        if current is None:
            volumes.validate_new(desired)
        elif p["size"] is not None and not self.recreating(current):
            self.check_resize(current, desired)
        outcome = volumes.present(desired, current, force=p["force"])
        result: dict[str, Any] = {"changed": outcome.changed, "action": outcome.action,
                                  **volume_summary(outcome.obj)}
        if self.diff_mode:
            result["diff"] = outcome.diff()
        self.finish_present(volumes, outcome.obj, result, volume_summary)

    def recreating(self, current: dict[str, Any]) -> bool:
        """Whether ``force`` will replace ``current`` (so its size rules do not apply)."""
        p = self.params
        spec = current.get("spec") or {}
        has_class = (spec.get("volumeClassRef") or {}).get("name")
        source = spec.get("dataSource") or {}
        has_image = (source.get("osImage") or {}).get("image")
        has_snapshot = (source.get("volumeSnapshotRef") or {}).get("name")
        other_class = bool(p["volume_class"]) and has_class != p["volume_class"]
        other_image = bool(p["image"]) and has_image != p["image"]
        other_snapshot = bool(p["snapshot"]) and has_snapshot != p["snapshot"]
        return bool(p["force"]) and (other_class or other_image or other_snapshot)

    def check_resize(self, current: dict[str, Any], desired: dict[str, Any]) -> None:
        """IronCore's resize policy, applied before writing: grow only, and only if the class allows."""
        class_name = ((current.get("spec") or {}).get("volumeClassRef") or {}).get("name")
        volume_class = {}
        if class_name:
            volume_class = require_class(self.client, "VolumeClass", class_name, "volume_class")
        from ironpool.api.validation import validate_volume_resize  # the API's models: only on a resize

        try:
            validate_volume_resize(volume_class, current, desired)
        except Invalid as exc:
            raise OptionError("; ".join(cause_text(c.field, c.message, self.fields) for c in exc.causes)) \
                from exc


def main() -> None:
    VolumeModule().execute()


if __name__ == "__main__":
    main()
