# Copyright: ironpool contributors
# SPDX-License-Identifier: Apache-2.0
"""ironpool.iaas.machines: ironpool Machines as inventory hosts."""

from __future__ import annotations

DOCUMENTATION = r"""
name: machines
short_description: ironpool Machines as inventory hosts
version_added: 0.1.0
description:
  - Every Machine the filters select becomes a host, with C(ironpool_*) host variables (class, pool,
    state, power, labels, uid, addresses).
  - C(ansible_host) and C(ansible_port) say where the Machine's guest answers SSH - the forward its pool
    reports (annotation C(machinepoollet.ironpool.dev/ssh-endpoint), C(127.0.0.1) and a port of its
    own with QEMU user networking, the default of C(ironpool up)), else its first address
    (C(status.networkInterfaces[].ips)) on port 22 - and C(ansible_user) is O(ssh_user). Machines
    without either get none of the three.
  - Groups come from the standard O(keyed_groups), O(groups) and O(compose) options.
  - The inventory file's name must end in C(.ironpool.yml) or C(.ironpool.yaml).
  - Connection options fall back to the environment and to the ironpool client configuration file,
    as the modules' do.
author:
  - ironpool engineers (!UNKNOWN)
requirements:
  - The C(ironpool) Python package on the controller.
extends_documentation_fragment:
  - constructed
  - inventory_cache
options:
  plugin:
    description: Marks the file as this plugin's.
    required: true
    choices: [ironpool.iaas.machines]
    type: str
  server:
    description: URL of the ironpool apiserver.
    type: str
    env:
      - name: IRONPOOL_SERVER
  token:
    description: Bearer token for the apiserver.
    type: str
    env:
      - name: IRONPOOL_TOKEN
  ca_file:
    description: CA certificate bundle of the apiserver (HTTPS).
    type: path
  validate_certs:
    description: Whether to verify the apiserver's certificate; unset, the client configuration file decides.
    type: bool
  config_file:
    description: The ironpool client configuration file (default C(~/.config/ironpool/config.yaml)).
    type: path
    env:
      - name: IRONPOOL_CONFIG
  request_timeout:
    description: Seconds to wait for one answer of the apiserver.
    type: float
    default: 30
  namespaces:
    description: Only Machines of these namespaces; empty means every namespace.
    type: list
    elements: str
    default: []
  label_selector:
    description: Only Machines whose labels match this selector, for example V(app=web,tier!=db).
    type: str
  pools:
    description: Only Machines bound to these MachinePools.
    type: list
    elements: str
    default: []
  states:
    description: Only Machines in these states (C(Pending), C(Running), C(Shutdown), C(Terminating), ...).
    type: list
    elements: str
    default: []
  ssh_user:
    description:
      - The C(ansible_user) of hosts that have an SSH endpoint.
      - The tiny image, like most cloud images, takes the keys of this user from Ignition.
    type: str
    default: root
  hostnames:
    description:
      - How a Machine's inventory hostname is made - V(name), V(namespace_name) (C(<namespace>_<name>))
        or V(uid).
      - With V(name), a Machine whose name another namespace already used is named V(namespace_name).
    type: str
    choices: [name, namespace_name, uid]
    default: name
"""

EXAMPLES = r"""
# machines.ironpool.yml
plugin: ironpool.iaas.machines
namespaces: [default]
states: [Running]
keyed_groups:
  - key: ironpool_pool
    prefix: pool
  - key: ironpool_class
    prefix: class
  - key: ironpool_labels.app | default('none')
    prefix: app
groups:
  powered_off: ironpool_power == 'Off'
compose:
  ansible_ssh_common_args: "'-o StrictHostKeyChecking=no -o UserKnownHostsFile=/dev/null'"
"""

from typing import Any

from ansible.errors import AnsibleParserError
from ansible.plugins.inventory import BaseInventoryPlugin, Cacheable, Constructable

from ansible_collections.ironpool.iaas.plugins.module_utils.client import (
    HAS_IRONPOOL,
    ConnectionOptionError,
    connect,
    list_all_raw,
    missing_ironpool_message,
)
from ansible_collections.ironpool.iaas.plugins.module_utils.kinds import COMPUTE, resource
from ansible_collections.ironpool.iaas.plugins.module_utils.placement import pool_of
from ansible_collections.ironpool.iaas.plugins.module_utils.views import addresses

try:
    from ironpool.api.errors import ApiError
    from ironpool.api.machine_access import ssh_endpoint
    from ironpool.client import ServerUnreachable
except ImportError:  # reported in parse() through missing_ironpool_message
    pass

Obj = dict[str, Any]
_CONNECTION = ("server", "token", "ca_file", "validate_certs", "config_file", "request_timeout")


def hostvars(machine: Obj, ssh_user: str = "root") -> dict[str, Any]:
    """The ``ironpool_*`` variables of one Machine, and ``ansible_host``/``ansible_port``/``ansible_user``
    once it has an SSH endpoint."""
    meta = machine.get("metadata") or {}
    spec = machine.get("spec") or {}
    status = machine.get("status") or {}
    ips = addresses(machine)
    out: dict[str, Any] = {
        "ironpool_name": meta.get("name") or "",
        "ironpool_namespace": meta.get("namespace") or "",
        "ironpool_uid": meta.get("uid") or "",
        "ironpool_class": (spec.get("machineClassRef") or {}).get("name") or "",
        "ironpool_pool": pool_of(machine) or "",
        "ironpool_state": status.get("state") or "",
        "ironpool_power": spec.get("power") or "On",
        "ironpool_labels": meta.get("labels") or {},
        "ironpool_annotations": meta.get("annotations") or {},
        "ironpool_machine_id": status.get("machineID") or "",
        "ironpool_addresses": ips,
    }
    endpoint = ssh_endpoint(machine)
    if endpoint is not None:
        out.update(ansible_host=endpoint.host, ansible_port=endpoint.port, ansible_user=ssh_user)
    return out


def compile_expressions_once(templar: Any) -> None:
    """ansible-core 2.19 compiles every ``compose``/``groups``/``keyed_groups`` expression again for
    each host: over a thousand Machines that is most of the inventory's time. A compiled expression
    keeps no state between calls, so each text is compiled once per run. (Reaches into the templar's
    engine; when that is not there, nothing changes.)"""
    env = getattr(getattr(templar, "_engine", None), "environment", None)
    compile_expression = getattr(env, "compile_expression", None)
    if compile_expression is None or getattr(compile_expression, "compiled_once", False):
        return
    compiled: dict[tuple[str, bool], Any] = {}

    def cached(source: str, undefined_to_none: bool = True) -> Any:
        key = (str(source), undefined_to_none)
        if key not in compiled:
            compiled[key] = compile_expression(source, undefined_to_none)
        return compiled[key]

    cached.compiled_once = True  # type: ignore[attr-defined]
    env.compile_expression = cached  # type: ignore[union-attr]


class InventoryModule(BaseInventoryPlugin, Constructable, Cacheable):
    """Lists Machines through the ironpool client and adds them as hosts."""

    NAME = "ironpool.iaas.machines"

    def verify_file(self, path: str) -> bool:
        return super().verify_file(path) and path.endswith((".ironpool.yml", ".ironpool.yaml"))

    def parse(self, inventory: Any, loader: Any, path: str, cache: bool = True) -> None:
        super().parse(inventory, loader, path, cache)
        self._read_config_data(path)
        if not HAS_IRONPOOL:
            raise AnsibleParserError(missing_ironpool_message())
        cache_key = self.get_cache_key(path)
        use_cache = bool(self.get_option("cache"))
        machines: list[Obj] | None = None
        if use_cache and cache:
            machines = self._cache.get(cache_key)
        if machines is None:
            machines = self.fetch()
            if use_cache:
                self._cache[cache_key] = machines
        self.populate(machines)

    def fetch(self) -> list[Obj]:
        """Every Machine the namespace, label, pool and state filters select."""
        params = {name: self.get_option(name) for name in _CONNECTION}
        try:
            client = connect(params)
        except ConnectionOptionError as exc:
            raise AnsibleParserError(f"ironpool.iaas.machines: {exc}") from exc
        info = resource(COMPUTE, "Machine")
        selector = self.get_option("label_selector") or None
        pools = set(self.get_option("pools") or ())
        states = set(self.get_option("states") or ())
        out: list[Obj] = []
        try:
            with client:
                for namespace in self.get_option("namespaces") or [None]:
                    for machine in list_all_raw(client, info, namespace, label_selector=selector):
                        if pools and pool_of(machine) not in pools:
                            continue
                        if states and ((machine.get("status") or {}).get("state") or "") not in states:
                            continue
                        out.append(machine)
        except (ApiError, ServerUnreachable) as exc:
            raise AnsibleParserError(f"ironpool.iaas.machines: listing Machines failed: {exc}") from exc
        return out

    def populate(self, machines: list[Obj]) -> None:
        compile_expressions_once(self.templar)
        strict = self.get_option("strict")
        style = self.get_option("hostnames")
        ssh_user = self.get_option("ssh_user")
        for machine in machines:
            variables = hostvars(machine, ssh_user)
            host = self.inventory.add_host(self.hostname(variables, style))
            for key, value in variables.items():
                self.inventory.set_variable(host, key, value)
            self._set_composite_vars(self.get_option("compose"), variables, host, strict=strict)
            self._add_host_to_composed_groups(self.get_option("groups"), variables, host, strict=strict)
            self._add_host_to_keyed_groups(self.get_option("keyed_groups"), variables, host, strict=strict)

    def hostname(self, variables: dict[str, Any], style: str) -> str:
        qualified = f"{variables['ironpool_namespace']}_{variables['ironpool_name']}"
        if style == "uid":
            return str(variables["ironpool_uid"])
        if style == "namespace_name":
            return qualified
        name = str(variables["ironpool_name"])
        existing = self.inventory.get_host(name)
        namespace = variables["ironpool_namespace"]
        if existing is not None and existing.vars.get("ironpool_namespace") != namespace:
            return qualified
        return name
