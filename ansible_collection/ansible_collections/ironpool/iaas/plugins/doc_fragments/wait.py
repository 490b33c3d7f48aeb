# Copyright: ironpool contributors
# SPDX-License-Identifier: Apache-2.0
"""Options of the modules that can wait for what they declared to be realised."""

from __future__ import annotations


class ModuleDocFragment:
    """``extends_documentation_fragment: ironpool.iaas.wait``."""

    DOCUMENTATION = r"""
options:
  wait:
    description:
      - Wait until the object reaches the condition named by O(wait_for) (state V(present)) or is
        gone (state V(absent)).
      - Never waits in check mode.
      - When O(wait_timeout) passes first, the task fails with where the object was last (for a
        Machine or Volume not placed yet, the scheduler's reason) and still returns the object.
    type: bool
    default: false
  wait_timeout:
    description:
      - Seconds to wait when O(wait=true).
    type: int
    default: 300
  fail_on_unschedulable:
    description:
      - With O(wait=true), fail within seconds when the scheduler says no pool can take the Machine
        or Volume until the fleet changes - no pool offers its class, or no pool matches its pool
        selector - naming the scheduler's reason, instead of waiting out O(wait_timeout).
      - One that waits for room (pools too full, not ready, cordoned) keeps waiting either way.
      - The object is left as declared (C(Pending)); it is placed once a pool can take it.
    type: bool
    default: true
"""
