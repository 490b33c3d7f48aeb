# Copyright: ironpool contributors
# SPDX-License-Identifier: Apache-2.0
"""What an ``ironpool.iaas.machine`` task declares: its options, and the Machine and ignition Secret
they describe."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

from ansible_collections.ironpool.iaas.plugins.module_utils.checks import check_quantity
from ansible_collections.ironpool.iaas.plugins.module_utils.client import wait_argument_spec

Obj = dict[str, Any]

IGNITION_KEY = "ignition.yaml"
#: On a Machine: the Reservation (same namespace) it is placed within (``compute.ironcore.dev``'s).
RESERVATION_LABEL = "compute.ironcore.dev/reservation"
IGNITION_OF_LABEL = "iaas.ironpool.dev/ignition-of"
BOOT_DISK = "root"

TOLERATION_SPEC = {
    "key": {"type": "str", "no_log": False},
    "operator": {"type": "str", "choices": ["Equal", "Exists"]},
    "value": {"type": "str"},
    "effect": {"type": "str", "choices": ["NoSchedule", "NoExecute"]},
}

ARGUMENT_SPEC: dict[str, Any] = {
    "name": {"type": "str", "required": True},
    "state": {"type": "str", "choices": ["present", "absent"], "default": "present"},
    "machine_class": {"type": "str"},
    "pool": {"type": "str"},
    "pool_selector": {"type": "dict"},
    "power": {"type": "str", "choices": ["on", "off"]},
    "image": {"type": "str"},
    "disk_size": {"type": "str"},
    "volumes": {
        "type": "list", "elements": "dict",
        "options": {
            "name": {"type": "str", "required": True},
            "volume": {"type": "str"},
            "size": {"type": "str"},
            "device": {"type": "str"},
        },
        "mutually_exclusive": [["volume", "size"]],
        "required_one_of": [["volume", "size"]],
    },
    "network_interfaces": {
        "type": "list", "elements": "dict",
        "options": {
            "name": {"type": "str", "required": True},
            "network_interface": {"type": "str"},
            "ephemeral": {"type": "dict"},
        },
        "mutually_exclusive": [["network_interface", "ephemeral"]],
        "required_one_of": [["network_interface", "ephemeral"]],
    },
    "ignition": {"type": "str", "no_log": True},
    "ignition_secret": {"type": "str", "no_log": False},
    "labels": {"type": "dict"},
    "annotations": {"type": "dict"},
    "tolerations": {"type": "list", "elements": "dict", "options": TOLERATION_SPEC},
    "wait_for": {"type": "str", "choices": ["scheduled", "running"], "default": "running"},
    "force": {"type": "bool", "default": False},
    "reservation": {"type": "str"},
    "predict_with": {"type": "list", "elements": "dict"},
    **wait_argument_spec(),
}

# API field path -> option, for error messages.
FIELDS = {
    "metadata.name": "name",
    "metadata.namespace": "namespace",
    "metadata.labels": "labels",
    f"metadata.labels[{RESERVATION_LABEL}]": "reservation",
    "metadata.annotations": "annotations",
    "spec.machineClassRef": "machine_class",
    "spec.machinePoolRef": "pool",
    "spec.machinePoolSelector": "pool_selector",
    "spec.power": "power",
    "spec.volumes": "volumes",
    "spec.networkInterfaces": "network_interfaces",
    "spec.ignitionRef": "ignition_secret",
    "spec.tolerations": "tolerations",
}


def ignition_secret_name(params: Mapping[str, Any]) -> str:
    """The Secret the module keeps a Machine's ``ignition`` in."""
    return f"{params['name']}-ignition"


def machine_spec(params: Mapping[str, Any]) -> Obj:
    """The Machine ``spec`` the options declare (options not given are left out: kept as they are)."""
    p = params
    spec: Obj = {}
    if p["machine_class"]:
        spec["machineClassRef"] = {"name": p["machine_class"]}
    if p["pool"]:
        spec["machinePoolRef"] = {"name": p["pool"]}
    if p["pool_selector"] is not None:
        spec["machinePoolSelector"] = p["pool_selector"]
    if p["power"]:
        spec["power"] = "On" if p["power"] == "on" else "Off"
    volumes = _volumes(p)
    if volumes is not None:
        spec["volumes"] = volumes
    if p["network_interfaces"] is not None:
        spec["networkInterfaces"] = [_nic(n) for n in p["network_interfaces"]]
    if p["ignition"] is not None:
        spec["ignitionRef"] = {"name": ignition_secret_name(p), "key": IGNITION_KEY}
    elif p["ignition_secret"]:
        spec["ignitionRef"] = {"name": p["ignition_secret"], "key": IGNITION_KEY}
    if p["tolerations"] is not None:
        spec["tolerations"] = [{k: v for k, v in t.items() if v is not None} for t in p["tolerations"]]
    return spec


def ignition_secret(params: Mapping[str, Any]) -> Obj:
    """The Secret holding ``ignition``, labelled with its Machine so that only it is ever removed."""
    return {
        "metadata": {"name": ignition_secret_name(params), "labels": {IGNITION_OF_LABEL: params["name"]}},
        "type": "Opaque",
        "data": {IGNITION_KEY: base64.b64encode(str(params["ignition"]).encode()).decode()},
    }


def _volumes(p: Mapping[str, Any]) -> list[Obj] | None:
    if not p["image"] and p["volumes"] is None:
        return None
    out: list[Obj] = []
    if p["image"]:
        disk: Obj = {"image": p["image"]}
        if p["disk_size"]:
            disk["sizeLimit"] = check_quantity("disk_size", p["disk_size"])
        out.append({"name": BOOT_DISK, "localDisk": disk})
    for i, v in enumerate(p["volumes"] or ()):
        vol: Obj = {"name": v["name"]}
        if v["device"]:
            vol["device"] = v["device"]
        if v["volume"]:
            vol["volumeRef"] = {"name": v["volume"]}
        else:
            vol["emptyDisk"] = {"sizeLimit": check_quantity(f"volumes[{i}].size", v["size"])}
        out.append(vol)
    return out


def _nic(n: Mapping[str, Any]) -> Obj:
    if n["network_interface"]:
        return {"name": n["name"], "networkInterfaceRef": {"name": n["network_interface"]}}
    return {"name": n["name"], "ephemeral": {"networkInterfaceTemplate": {"spec": n["ephemeral"]}}}
