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
      - When O(wait_timeout) passes first, the task fails with the last state it saw and still
        returns the object.
    type: bool
    default: false
  wait_timeout:
    description:
      - Seconds to wait when O(wait=true).
    type: int
    default: 300
"""
