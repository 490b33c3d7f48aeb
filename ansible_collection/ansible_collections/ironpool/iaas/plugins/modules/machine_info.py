#!/usr/bin/python
# Copyright: ironpool contributors
# SPDX-License-Identifier: Apache-2.0
"""ironpool.iaas.machine_info: list Machines, optionally waiting for them."""

from __future__ import annotations

DOCUMENTATION = r"""
module: machine_info
short_description: List ironpool Machines
version_added: 0.1.0
description:
  - Lists Machines by name, labels, fields and namespace, and can wait until they are scheduled,
    running or meet a status condition.
author:
  - ironpool engineers (!UNKNOWN)
options:
  all_namespaces:
    description: List the Machines of every namespace instead of O(namespace).
    type: bool
    default: false
  wait_for:
    description:
      - With O(wait=true), wait until every listed Machine is V(scheduled) (bound to a pool) or
        V(running) (as O(ironpool.iaas.machine#module:wait_for=running) means - its poollet acted on its
        current spec, it is in its power state, its volumes and network interfaces are attached).
    type: str
    choices: [scheduled, running]
extends_documentation_fragment:
  - ironpool.iaas.connection
  - ironpool.iaas.info
attributes:
  check_mode:
    support: full
    description: Read-only; it runs the same in check mode.
  diff_mode:
    support: none
    description: Changes nothing, so there is nothing to diff.
"""

EXAMPLES = r"""
- name: The web machines, once all of them run
  ironpool.iaas.machine_info:
    label_selectors: [app=web]
    wait: true
    wait_for: running
  register: web

- name: Where they landed
  ansible.builtin.debug:
    msg: "{{ web.machines | map(attribute='spec.machinePoolRef.name') | list }}"

- name: The machines bound to one pool, in every namespace
  ironpool.iaas.machine_info:
    all_namespaces: true
    field_selectors: [spec.machinePoolRef.name=host-1]
"""

RETURN = r"""
machines:
  description: The matching Machines as the apiserver holds them.
  returned: always
  type: list
  elements: dict
  sample:
    - apiVersion: compute.ironcore.dev/v1alpha1
      kind: Machine
      metadata: {name: web-1, namespace: default}
      spec: {machineClassRef: {name: x-small}, machinePoolRef: {name: host-1}, power: "On"}
      status: {state: Running}
"""

from ansible_collections.ironpool.iaas.plugins.module_utils.info import InfoModule, info_argument_spec


class MachineInfoModule(InfoModule):
    """Lists Machines."""

    api_version = "compute.ironcore.dev/v1alpha1"
    kind = "Machine"
    result_key = "machines"
    argument_spec = info_argument_spec(["running", "scheduled"], namespaced=True)


def main() -> None:
    MachineInfoModule().execute()


if __name__ == "__main__":
    main()
