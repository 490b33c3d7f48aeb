#!/usr/bin/python
# Copyright: ironpool contributors
# SPDX-License-Identifier: Apache-2.0
"""ironpool.iaas.volume_info: list Volumes, optionally waiting for them."""

from __future__ import annotations

DOCUMENTATION = r"""
module: volume_info
short_description: List ironpool Volumes
version_added: 0.1.0
description:
  - Lists Volumes by name, labels, fields and namespace, and can wait until they are scheduled,
    available or meet a status condition.
author:
  - ironpool engineers (!UNKNOWN)
options:
  all_namespaces:
    description: List the Volumes of every namespace instead of O(namespace).
    type: bool
    default: false
  wait_for:
    description:
      - With O(wait=true), wait until every listed Volume is V(scheduled) (bound to a pool) or
        V(available) (C(Available) at its requested size).
    type: str
    choices: [available, scheduled]
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
- name: Wait for the data volume
  ironpool.iaas.volume_info:
    name: web-data
    wait: true
    wait_for: available
  register: data
"""

RETURN = r"""
volumes:
  description: The matching Volumes as the apiserver holds them.
  returned: always
  type: list
  elements: dict
  sample:
    - apiVersion: storage.ironcore.dev/v1alpha1
      kind: Volume
      metadata: {name: web-data, namespace: default}
      spec: {volumeClassRef: {name: fast}, resources: {storage: 1Gi}, volumePoolRef: {name: host-1}}
      status: {state: Available}
"""

from ansible_collections.ironpool.iaas.plugins.module_utils.info import InfoModule, info_argument_spec


class VolumeInfoModule(InfoModule):
    """Lists Volumes."""

    api_version = "storage.ironcore.dev/v1alpha1"
    kind = "Volume"
    result_key = "volumes"
    argument_spec = info_argument_spec(["available", "scheduled"], namespaced=True)


def main() -> None:
    VolumeInfoModule().execute()


if __name__ == "__main__":
    main()
