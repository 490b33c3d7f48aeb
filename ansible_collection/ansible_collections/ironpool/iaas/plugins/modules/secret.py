#!/usr/bin/python
# Copyright: ironpool contributors
# SPDX-License-Identifier: Apache-2.0
"""ironpool.iaas.secret: declare a Secret (Ignition data, volume encryption keys), never showing its data."""

from __future__ import annotations

DOCUMENTATION = r"""
module: secret
short_description: Declare an ironpool Secret
version_added: 0.1.0
description:
  - Creates, updates or deletes a Secret (core C(v1)), for example the Ignition a Machine boots with
    (its O(data) key C(ignition.yaml), named by M(ironpool.iaas.machine)'s C(ignition_secret)).
  - O(data) is the whole content - keys the Secret has but O(data) lacks are removed.
  - The data is never logged, returned or shown in a diff; the diff says which keys changed.
author:
  - ironpool engineers (!UNKNOWN)
options:
  name:
    description: Name of the Secret.
    type: str
    required: true
  state:
    description: Whether the Secret should exist.
    type: str
    choices: [present, absent]
    default: present
  data:
    description:
      - The Secret's content, key to plain-text value (the module base64-encodes it for the API).
      - Required to create a Secret.
    type: dict
  type:
    description: The Secret's type; it cannot change (see O(force)).
    type: str
    default: Opaque
  labels:
    description: Labels to set on the Secret.
    type: dict
  force:
    description: Delete and recreate the Secret when its O(type) differs.
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
    description: Shows which keys change, never their values.
"""

EXAMPLES = r"""
- name: Ignition for the web machines
  ironpool.iaas.secret:
    name: web-ignition
    data:
      ignition.yaml: "{{ lookup('ansible.builtin.file', 'web.ign') }}"
"""

RETURN = r"""
secret:
  description: The Secret after the task, with every data value replaced by C((hidden)).
  returned: always
  type: dict
  sample: {apiVersion: v1, kind: Secret, metadata: {name: web-ignition, namespace: default},
           type: Opaque, data: {ignition.yaml: (hidden)}}
action:
  description: What the task did (or would do) - C(created), C(updated), C(recreated), C(unchanged),
    C(deleted), C(terminating) or C(absent).
  returned: always
  type: str
  sample: updated
"""

import base64
from typing import TYPE_CHECKING, Any

from ansible_collections.ironpool.iaas.plugins.module_utils.declarative import DeclarativeModule
from ansible_collections.ironpool.iaas.plugins.module_utils.resource import declared_metadata
from ansible_collections.ironpool.iaas.plugins.module_utils.views import redact_secret, secret_diff

if TYPE_CHECKING:
    from ironpool.client.declare import Outcome


class SecretModule(DeclarativeModule):
    """Declares one Secret; its data is write-only for the playbook."""

    api_version = "v1"
    kind = "Secret"
    result_key = "secret"
    argument_spec = {
        "name": {"type": "str", "required": True},
        "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
        "data": {"type": "dict", "no_log": True},
        "type": {"type": "str", "default": "Opaque"},
        "labels": {"type": "dict"},
        "force": {"type": "bool", "default": False},
    }
    module_kwargs = {"required_if": [["state", "present", ["data"]]]}
    fields = {"metadata.name": "name", "metadata.labels": "labels", "data": "data", "type": "type"}

    def desired(self, current: dict[str, Any] | None) -> dict[str, Any]:
        p = self.params
        data: dict[str, Any] = {
            str(k): base64.b64encode(str(v).encode()).decode() for k, v in p["data"].items()
        }
        for stale in ((current or {}).get("data") or {}):
            data.setdefault(stale, None)  # null in a merge patch removes the key
        meta = declared_metadata(p)
        return {"metadata": meta, "type": p["type"], "data": data}

    def shown(self, obj: dict[str, Any]) -> dict[str, Any]:
        return redact_secret(obj)

    def diff(self, outcome: Outcome) -> dict[str, Any]:
        return secret_diff(outcome.before, outcome.after)


def main() -> None:
    SecretModule().execute()


if __name__ == "__main__":
    main()
