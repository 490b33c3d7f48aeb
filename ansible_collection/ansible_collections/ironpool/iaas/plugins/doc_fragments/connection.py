# Copyright: ironpool contributors
# SPDX-License-Identifier: Apache-2.0
"""Options every ironpool.iaas module and the inventory plugin share: how to reach the apiserver."""

from __future__ import annotations


class ModuleDocFragment:
    """``extends_documentation_fragment: ironpool.iaas.connection``."""

    DOCUMENTATION = r"""
options:
  server:
    description:
      - URL of the ironpool apiserver, for example C(https://127.0.0.1:6443).
      - Falls back to the E(IRONPOOL_SERVER) environment variable, then to C(server) in the client
        configuration file (see O(config_file)), which C(ironpool up) writes.
    type: str
  token:
    description:
      - Bearer token for the apiserver.
      - Falls back to E(IRONPOOL_TOKEN), then to C(token) in the client configuration file.
    type: str
  ca_file:
    description:
      - CA certificate bundle that signed the apiserver's certificate (HTTPS only).
      - Falls back to C(ca_file) in the client configuration file.
    type: path
  validate_certs:
    description:
      - Whether to verify the apiserver's TLS certificate.
      - When unset, the client configuration file decides (C(insecure)); without one, certificates
        are verified.
    type: bool
  namespace:
    description:
      - Namespace of namespaced objects (Machines, Volumes, Secrets).
      - Falls back to E(IRONPOOL_NAMESPACE), then to C(namespace) in the client configuration file,
        then to C(default). Ignored for cluster-scoped kinds (classes, pools).
    type: str
  config_file:
    description:
      - The ironpool client configuration file to read the connection from when the options above
        are not given.
      - Falls back to E(IRONPOOL_CONFIG), then to C(~/.config/ironpool/config.yaml).
    type: path
  request_timeout:
    description:
      - Seconds to wait for one answer of the apiserver.
    type: float
    default: 30
requirements:
  - "The C(ironpool) Python package (it holds the client) on the host that runs the module,
    usually the controller (C(hosts: localhost) or C(delegate_to: localhost))."
notes:
  - "Connection options can be set once per play with
    C(module_defaults: {group/ironpool.iaas.ironpool: {server: ..., token: ...}})."
"""
