#!/usr/bin/python
# Copyright: ironpool contributors
# SPDX-License-Identifier: Apache-2.0
"""ironpool.iaas.machine_class: declare a MachineClass (a machine flavour: CPU and memory)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: machine_class
short_description: Declare an ironpool MachineClass
version_added: 0.1.0
description:
  - Creates or deletes a MachineClass (C(compute.ironcore.dev/v1alpha1)), the flavour a Machine
    names in its C(machine_class).
  - A pool offers a class only when its machine runtime knows it (C(ironpool up) seeds the classes of
    its C(--classes) files into both), so declare classes that match what the hosts offer.
  - The capabilities of a class cannot change (Machines were placed by them); a change fails naming
    the option unless O(force=true), which deletes and recreates the class.
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
  cpu:
    description: CPU cores of a Machine of this class, for example V(1) or V(500m). Required to create one.
    type: str
  memory:
    description: Memory of a Machine of this class, for example V(256Mi). Required to create one.
    type: str
  capabilities:
    description: Further capabilities (name to quantity) besides O(cpu) and O(memory).
    type: dict
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
- name: The class of the tiny example machines
  ironpool.iaas.machine_class:
    name: x-small
    cpu: 1
    memory: 256Mi
"""

RETURN = r"""
machine_class:
  description: The MachineClass after the task (before deletion with state V(absent); empty when absent).
  returned: always
  type: dict
  sample: {apiVersion: compute.ironcore.dev/v1alpha1, kind: MachineClass, metadata: {name: x-small},
           capabilities: {cpu: "1", memory: 256Mi}}
action:
  description: What the task did (or would do) - C(created), C(updated), C(recreated), C(unchanged),
    C(deleted), C(terminating) or C(absent).
  returned: always
  type: str
  sample: unchanged
"""

from typing import Any

from ansible_collections.ironpool.iaas.plugins.module_utils.checks import check_quantity
from ansible_collections.ironpool.iaas.plugins.module_utils.declarative import DeclarativeModule
from ansible_collections.ironpool.iaas.plugins.module_utils.resource import declared_metadata


class MachineClassModule(DeclarativeModule):
    """Declares one MachineClass."""

    api_version = "compute.ironcore.dev/v1alpha1"
    kind = "MachineClass"
    immutable = (("capabilities", "cpu"), ("capabilities", "memory"))
    result_key = "machine_class"
    argument_spec = {
        "name": {"type": "str", "required": True},
        "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
        "cpu": {"type": "str"},
        "memory": {"type": "str"},
        "capabilities": {"type": "dict"},
        "labels": {"type": "dict"},
        "force": {"type": "bool", "default": False},
    }
    module_kwargs = {"required_if": [["state", "present", ["cpu", "memory"]]]}
    fields = {
        "metadata.name": "name",
        "metadata.labels": "labels",
        "capabilities.cpu": "cpu",
        "capabilities.memory": "memory",
        "capabilities": "cpu/memory/capabilities",
    }

    def desired(self, current: dict[str, Any] | None) -> dict[str, Any]:
        p = self.params
        caps = {k: check_quantity(f"capabilities.{k}", v) for k, v in (p["capabilities"] or {}).items()}
        caps["cpu"] = check_quantity("cpu", p["cpu"])
        caps["memory"] = check_quantity("memory", p["memory"])
        meta = declared_metadata(p)
        return {"metadata": meta, "capabilities": caps}


def main() -> None:
    MachineClassModule().execute()


if __name__ == "__main__":
    main()
