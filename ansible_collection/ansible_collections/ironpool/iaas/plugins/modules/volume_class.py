#!/usr/bin/python
# Copyright: ironpool contributors
# SPDX-License-Identifier: Apache-2.0
"""ironpool.iaas.volume_class: declare a VolumeClass (a volume flavour: throughput, IOPS, resize policy)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: volume_class
short_description: Declare an ironpool VolumeClass
version_added: 0.1.0
description:
  - Creates, updates or deletes a VolumeClass (C(storage.ironcore.dev/v1alpha1)), the flavour a
    Volume names in its C(volume_class). Its C(tps) and C(iops) become libvirt I/O limits.
  - A pool offers a class only when its volume runtime knows it (C(ironpool up) seeds the classes of
    its C(--classes) files into both).
  - The capabilities cannot change; a change fails naming the option unless O(force=true), which
    deletes and recreates the class. O(resize_policy) changes in place.
author:
  - ironpool engineers (!UNKNOWN)
options:
  name:
    description: Name of the class.
    type: str
    required: true
  state:
    description: Whether the class should exist.
    type: str
    choices: [present, absent]
    default: present
  tps:
    description: Throughput limit in bytes per second, for example V(100Mi). Required to create one.
    type: str
  iops:
    description: I/O operations per second, for example V(1000). Required to create one.
    type: str
  capabilities:
    description: Further capabilities (name to quantity) besides O(tps) and O(iops).
    type: dict
  resize_policy:
    description:
      - V(ExpandOnly) lets Volumes of this class grow; V(Static) fixes their size.
      - When creating a class without this option it is V(Static).
    type: str
    choices: [Static, ExpandOnly]
  labels:
    description: Labels to set on the class.
    type: dict
  force:
    description: Delete and recreate the class when its capabilities differ.
    type: bool
    default: false
extends_documentation_fragment:
  - ironpool.iaas.connection
attributes:
  check_mode:
    support: full
    description: Predicts the change and its diff without writing.
  diff_mode:
    support: full
    description: Before and after of the object's declared fields.
"""

EXAMPLES = r"""
- name: The class of the example data volumes
  ironpool.iaas.volume_class:
    name: fast
    tps: 100Mi
    iops: 1000
    resize_policy: ExpandOnly
"""

RETURN = r"""
volume_class:
  description: The VolumeClass after the task (before deletion with state V(absent); empty when absent).
  returned: always
  type: dict
  sample: {apiVersion: storage.ironcore.dev/v1alpha1, kind: VolumeClass, metadata: {name: fast},
           capabilities: {tps: 100Mi, iops: "1k"}, resizePolicy: ExpandOnly}
action:
  description: What the task did (or would do) - C(created), C(updated), C(recreated), C(unchanged),
    C(deleted), C(terminating) or C(absent).
  returned: always
  type: str
  sample: created
"""

from typing import Any

from ansible_collections.ironpool.iaas.plugins.module_utils.checks import check_quantity
from ansible_collections.ironpool.iaas.plugins.module_utils.declarative import DeclarativeModule
from ansible_collections.ironpool.iaas.plugins.module_utils.resource import declared_metadata


class VolumeClassModule(DeclarativeModule):
    """Declares one VolumeClass."""

    api_version = "storage.ironcore.dev/v1alpha1"
    kind = "VolumeClass"
    immutable = (("capabilities", "tps"), ("capabilities", "iops"))
    result_key = "volume_class"
    argument_spec = {
        "name": {"type": "str", "required": True},
        "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
        "tps": {"type": "str"},
        "iops": {"type": "str"},
        "capabilities": {"type": "dict"},
        "resize_policy": {"type": "str", "choices": ["Static", "ExpandOnly"]},
        "labels": {"type": "dict"},
        "force": {"type": "bool", "default": False},
    }
    module_kwargs = {"required_if": [["state", "present", ["tps", "iops"]]]}
    fields = {
        "metadata.name": "name",
        "metadata.labels": "labels",
        "capabilities.tps": "tps",
        "capabilities.iops": "iops",
        "capabilities": "tps/iops/capabilities",
        "resizePolicy": "resize_policy",
    }

    def desired(self, current: dict[str, Any] | None) -> dict[str, Any]:
        p = self.params
        caps = {k: check_quantity(f"capabilities.{k}", v) for k, v in (p["capabilities"] or {}).items()}
        caps["tps"] = check_quantity("tps", p["tps"])
        caps["iops"] = check_quantity("iops", p["iops"])
        meta = declared_metadata(p)
        out: dict[str, Any] = {"metadata": meta, "capabilities": caps}
        if p["resize_policy"]:
            out["resizePolicy"] = p["resize_policy"]
        return out


def main() -> None:
    VolumeClassModule().execute()


if __name__ == "__main__":
    main()
