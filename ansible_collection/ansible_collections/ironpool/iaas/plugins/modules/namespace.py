#!/usr/bin/python
# Copyright: ironpool contributors
# SPDX-License-Identifier: Apache-2.0
"""ironpool.iaas.namespace: declare a Namespace (where Machines, Volumes, Secrets and networks live)."""

from __future__ import annotations

DOCUMENTATION = r"""
module: namespace
short_description: Declare an ironpool Namespace
version_added: 0.1.0
description:
  - Creates, updates or deletes a Namespace (C(v1)), the scope of Machines, Volumes, Secrets,
    Networks and the RBAC Roles that grant access to them. Other modules put their objects in the
    namespace of their O(namespace) option.
  - Deleting a Namespace deletes everything in it first (the namespace controller does, as in
    Kubernetes); with O(wait=true) the task waits until that is done and the Namespace is gone.
  - Labels and annotations are merged into the ones the Namespace has; keys not given are kept.
author:
  - ironpool engineers (!UNKNOWN)
options:
  name:
    description: Name of the Namespace (a DNS label).
    type: str
    required: true
  state:
    description: Whether the Namespace should exist.
    type: str
    choices: [present, absent]
    default: present
  labels:
    description: Labels to set on the Namespace.
    type: dict
  annotations:
    description: Annotations to set on the Namespace.
    type: dict
  wait:
    description:
      - With state V(absent), wait until the Namespace and everything in it are gone.
      - Never waits in check mode.
    type: bool
    default: false
  wait_timeout:
    description: Seconds to wait when O(wait=true).
    type: int
    default: 300
extends_documentation_fragment:
  - ironpool.iaas.connection
attributes:
  check_mode:
    support: full
    description: Predicts the change and its diff without writing.
  diff_mode:
    support: full
    description: Before and after of the Namespace's declared fields.
"""

EXAMPLES = r"""
- name: A namespace for team A's machines
  ironpool.iaas.namespace:
    name: team-a
    labels: {team: a}

- name: A machine in it
  ironpool.iaas.machine:
    name: web-1
    namespace: team-a
    machine_class: x-small
    image: tiny

- name: Delete the namespace with everything in it, and wait until it is gone
  ironpool.iaas.namespace:
    name: team-a
    state: absent
    wait: true
"""

RETURN = r"""
namespace_object:
  description: The Namespace after the task (before deletion with state V(absent); empty when absent).
  returned: always
  type: dict
  sample: {apiVersion: v1, kind: Namespace, metadata: {name: team-a, labels: {team: a}},
           status: {phase: Active}}
action:
  description: What the task did (or would do) - C(created), C(updated), C(unchanged), C(deleted),
    C(terminating) (already being deleted) or C(absent).
  returned: always
  type: str
  sample: created
"""

from typing import Any

from ansible_collections.ironpool.iaas.plugins.module_utils.base import IronpoolModule
from ansible_collections.ironpool.iaas.plugins.module_utils.kinds import resource
from ansible_collections.ironpool.iaas.plugins.module_utils.resource import TaskDeclarer, declared_metadata


class NamespaceModule(IronpoolModule):
    """Declares one Namespace."""

    argument_spec = {
        "name": {"type": "str", "required": True},
        "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
        "labels": {"type": "dict"},
        "annotations": {"type": "dict"},
        "wait": {"type": "bool", "default": False},
        "wait_timeout": {"type": "int", "default": 300},
    }
    fields = {"metadata.name": "name", "metadata.labels": "labels", "metadata.annotations": "annotations"}

    def run(self) -> None:
        p = self.params
        namespaces = TaskDeclarer(self.client, resource("v1", "Namespace"), None, self.check_mode,
                                  self.fields, gone_timeout=p["wait_timeout"])
        current = namespaces.get(p["name"])
        if p["state"] == "absent":
            self.delete_and_wait(namespaces, current, "namespace_object",
                                 "the namespace controller deletes what is in it first")
        desired = {"metadata": declared_metadata(p)}
        if current is None:
            namespaces.validate_new(desired)
        outcome = namespaces.present(desired, current)
        result: dict[str, Any] = {"changed": outcome.changed, "action": outcome.action,
                                  "namespace_object": outcome.obj or {}}
        if self.diff_mode:
            result["diff"] = outcome.diff()
        self.exit(**result)


def main() -> None:
    NamespaceModule().execute()


if __name__ == "__main__":
    main()
