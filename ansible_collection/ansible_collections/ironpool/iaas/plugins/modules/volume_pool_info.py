#!/usr/bin/python
# Copyright: ironpool contributors
# SPDX-License-Identifier: Apache-2.0
"""ironpool.iaas.volume_pool_info: list VolumePools with their capacity and what is free per class."""

from __future__ import annotations

DOCUMENTATION = r"""
module: volume_pool_info
short_description: List ironpool VolumePools and their free capacity
version_added: 0.1.0
description:
  - Lists VolumePools (a libvirt storage pool on each host) with their capacity, what is allocatable,
    and the storage still free for each VolumeClass.
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
- name: Free storage per volume class
  ironpool.iaas.volume_pool_info:
  register: pools
"""

RETURN = r"""
volume_pools:
  description: The matching VolumePools.
  returned: always
  type: list
  elements: dict
  contains:
    name:
      description: Name of the pool.
      type: str
      sample: host-1
    state:
      description: C(Available), C(Pending) or C(Unavailable).
      type: str
      sample: Available
    labels:
      description: Labels of the pool.
      type: dict
      sample: {}
    available_classes:
      description: The VolumeClasses the pool offers.
      type: list
      elements: str
      sample: [fast]
    capacity:
      description: The pool's shared resources (C(storage)).
      type: dict
      sample: {storage: 241019856Ki}
    allocatable:
      description: What of the capacity is for Volumes.
      type: dict
      sample: {storage: 241019856Ki}
    free:
      description: Class name to the storage still free for Volumes of that class.
      type: dict
      sample: {fast: 241019856Ki}
    volume_pool:
      description: The VolumePool object as the apiserver holds it.
      type: dict
"""

from typing import Any

from ansible_collections.ironpool.iaas.plugins.module_utils.info import InfoModule, info_argument_spec
from ansible_collections.ironpool.iaas.plugins.module_utils.views import pool_summary


class VolumePoolInfoModule(InfoModule):
    """Lists VolumePools."""

    api_version = "storage.ironcore.dev/v1alpha1"
    kind = "VolumePool"
    result_key = "volume_pools"
    argument_spec = info_argument_spec(["ready"], namespaced=False)

    def shown(self, obj: dict[str, Any]) -> dict[str, Any]:
        return pool_summary(obj, "class/volume.", "volume_pool", counts=False)


def main() -> None:
    VolumePoolInfoModule().execute()


if __name__ == "__main__":
    main()
