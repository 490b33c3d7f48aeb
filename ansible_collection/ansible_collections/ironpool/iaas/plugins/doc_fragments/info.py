# Copyright: ironpool contributors
# SPDX-License-Identifier: Apache-2.0
"""Options every ``*_info`` module shares: filters and the optional wait."""

from __future__ import annotations


class ModuleDocFragment:
    """``extends_documentation_fragment: ironpool.iaas.info``."""

    DOCUMENTATION = r"""
options:
  name:
    description: Only the object of this name.
    type: str
  label_selectors:
    description:
      - Label selectors the objects must match, ANDed, for example V(app=web) or V(tier in (a,b)).
    type: list
    elements: str
    default: []
  field_selectors:
    description:
      - Field selectors the objects must match, ANDed, for example V(spec.machinePoolRef.name=host-1).
    type: list
    elements: str
    default: []
  wait:
    description:
      - Wait until every listed object meets O(wait_for) and O(wait_condition). With O(name), also
        wait for the object to appear.
      - When O(wait_timeout) passes first, the task fails naming the objects still waited for and
        where each was last (for a Machine or Volume not placed yet, the scheduler's reason).
    type: bool
    default: false
  wait_timeout:
    description: Seconds to wait when O(wait=true).
    type: int
    default: 120
  fail_on_unschedulable:
    description:
      - With O(wait=true), fail within seconds when the scheduler says no pool can take a listed
        Machine or Volume until the fleet changes (no pool offers its class or matches its pool
        selector), naming the scheduler's reason, instead of waiting out O(wait_timeout).
    type: bool
    default: true
  wait_condition:
    description: A status condition every listed object must have when O(wait=true).
    type: dict
    suboptions:
      type:
        description: The condition type, for example V(Ready).
        type: str
        required: true
      status:
        description: The condition status.
        type: str
        default: 'True'
        choices: ['True', 'False', 'Unknown']
      reason:
        description: The condition reason, when it matters.
        type: str
"""
