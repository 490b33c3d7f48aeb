#!/usr/bin/python
# Copyright: ironpool contributors
# SPDX-License-Identifier: Apache-2.0
"""ironpool.iaas.machine_pool_info: list MachinePools with their capacity and what is free per class."""

from __future__ import annotations

DOCUMENTATION = r"""
module: machine_pool_info
short_description: List ironpool MachinePools and their free capacity
version_added: 0.1.0
description:
  - Lists MachinePools (one per libvirt host) with their capacity, what is allocatable, and how many
    more Machines of each class still fit.
author:
  - ironpool engineers (!UNKNOWN)
options:
  wait_for:
    description: With O(wait=true), wait until every listed pool is V(ready) (its C(Ready)
      condition is C(True), as the scheduler judges it).
    type: str
    choices: [ready]
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
- name: How many more x-small machines fit, per pool
  ironpool.iaas.machine_pool_info:
  register: pools

- name: Show it
  ansible.builtin.debug:
    msg: "{{ item.name }}: {{ item.free['x-small'] | default(0) }} x-small free"
  loop: "{{ pools.machine_pools }}"
"""

RETURN = r"""
machine_pools:
  description: The matching MachinePools.
  returned: always
  type: list
  elements: dict
  contains:
    name:
      description: Name of the pool.
      type: str
      sample: host-1
    state:
      description: C(Ready), C(Pending), C(Error) or C(Offline).
      type: str
      sample: Ready
    labels:
      description: Labels of the pool (what O(label_selectors) and a Machine's C(pool_selector) match).
      type: dict
      sample: {topology.ironpool.dev/host: host-1}
    available_classes:
      description: The MachineClasses the pool offers.
      type: list
      elements: str
      sample: [small, x-small]
    capacity:
      description: The pool's shared resources (C(cpu), C(memory)).
      type: dict
      sample: {cpu: "2", memory: 24684096Ki}
    allocatable:
      description: What of the capacity is for Machines.
      type: dict
      sample: {cpu: "2", memory: 24684096Ki}
    free:
      description: Class name to how many more Machines of that class fit now.
      type: dict
      sample: {small: 1, x-small: 2}
    machine_pool:
      description: The MachinePool object as the apiserver holds it.
      type: dict
"""

from typing import Any

from ansible_collections.ironpool.iaas.plugins.module_utils.info import InfoModule, info_argument_spec
from ansible_collections.ironpool.iaas.plugins.module_utils.views import pool_summary


class MachinePoolInfoModule(InfoModule):
    """Lists MachinePools."""

    api_version = "compute.ironcore.dev/v1alpha1"
    kind = "MachinePool"
    result_key = "machine_pools"
    argument_spec = info_argument_spec(["ready"], namespaced=False)

    def shown(self, obj: dict[str, Any]) -> dict[str, Any]:
        return pool_summary(obj, "class/machine.", "machine_pool", counts=True)


def main() -> None:
    MachinePoolInfoModule().execute()


if __name__ == "__main__":
    main()
