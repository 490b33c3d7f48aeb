"""``MachineClass`` and ``VolumeClass``: the flavours Machines and Volumes are made of.

A class's ``capabilities`` are immutable in the API, so changing them replaces the class (deleted
first: the name stays). A pool offers a class when its runtime has one with the same capabilities,
so a class declared here is usable on a host whose runtime offers that shape.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import pulumi
from ironpool.api.resources import resolve
from ironpool.client import Client
from pulumi.dynamic import CheckFailure, Resource

from ironpool_pulumi import declared
from ironpool_pulumi.base import ApiResourceProvider, Obj, Props, choice

RESIZE_POLICIES = ("Static", "ExpandOnly")


@dataclass
class MachineClassArgs:
    """The inputs of a :class:`MachineClass`."""

    capabilities: pulumi.Input[dict[str, Any]]
    """``cpu`` and ``memory`` (quantities: ``{"cpu": 2, "memory": "1Gi"}``) and any other resources.
    Changing them replaces the class."""
    name: pulumi.Input[str] | None = None
    """The class's name (default: the Pulumi resource name)."""


@dataclass
class VolumeClassArgs:
    """The inputs of a :class:`VolumeClass`."""

    capabilities: pulumi.Input[dict[str, Any]]
    """``tps`` (bytes per second) and ``iops`` as quantities. Changing them replaces the class."""
    name: pulumi.Input[str] | None = None
    """The class's name (default: the Pulumi resource name)."""
    resize_policy: pulumi.Input[str] = "Static"
    """``Static`` (size fixed) or ``ExpandOnly`` (Volumes may grow); updated in place."""


class _ClassProvider(ApiResourceProvider):
    """What both class kinds share: capabilities, and being declared for the Machines and Volumes."""

    replace_on = ("name", "capabilities")
    field_properties: ClassVar[tuple[tuple[str, str], ...]] = (
        ("metadata.name", "name"), ("capabilities", "capabilities"), ("resizePolicy", "resize_policy"))

    def defaults(self, inputs: Props, failures: list[CheckFailure]) -> Props:
        caps = inputs.get("capabilities")
        if not isinstance(caps, dict) or not caps:
            failures.append(CheckFailure("capabilities", f"a {self.kind} needs capabilities"))
        else:
            inputs["capabilities"] = {k: str(v) if isinstance(v, int | float) else v for k, v in caps.items()}
        return inputs

    def manifest(self, inputs: Props) -> Obj:
        return {"apiVersion": self.info.api_version, "kind": self.kind, "metadata": {"name": inputs["name"]},
                "capabilities": inputs.get("capabilities") or {}}

    def properties(self, obj: Obj, previous: Props) -> Props:
        return {"name": (obj.get("metadata") or {}).get("name"),
                "capabilities": obj.get("capabilities") or {}}

    def check_with_server(self, client: Client, olds: Props, inputs: Props,
                          failures: list[CheckFailure]) -> Props:
        if not failures:
            declared.declare(self.kind, str(inputs["name"]), self.manifest(inputs))
        return {}


class MachineClassProvider(_ClassProvider):
    """The dynamic provider behind :class:`MachineClass`."""

    info = resolve("machineclasses")


class VolumeClassProvider(_ClassProvider):
    """The dynamic provider behind :class:`VolumeClass`."""

    info = resolve("volumeclasses")
    update_on = ("resize_policy",)

    def defaults(self, inputs: Props, failures: list[CheckFailure]) -> Props:
        inputs = super().defaults(inputs, failures)
        policy = choice(inputs.get("resize_policy"), tuple(p.lower() for p in RESIZE_POLICIES), "static",
                        "resize_policy", failures)
        inputs["resize_policy"] = next((p for p in RESIZE_POLICIES if p.lower() == policy), policy)
        return inputs

    def manifest(self, inputs: Props) -> Obj:
        return {**super().manifest(inputs), "resizePolicy": inputs.get("resize_policy")}

    def properties(self, obj: Obj, previous: Props) -> Props:
        return {**super().properties(obj, previous), "resize_policy": obj.get("resizePolicy")}


class MachineClass(Resource, module="ironpool", name="MachineClass"):
    """A MachineClass declared with Pulumi (cluster-scoped)."""

    name: pulumi.Output[str]
    """The class's name."""
    capabilities: pulumi.Output[dict[str, str]]
    """The capabilities as canonical quantity strings."""
    uid: pulumi.Output[str]
    """The API object's uid."""
    created_at: pulumi.Output[str]
    """When the class was created (RFC 3339)."""

    def __init__(self, resource_name: str, args: MachineClassArgs | None = None,
                 opts: pulumi.ResourceOptions | None = None, **kwargs: Any) -> None:
        """Declare a MachineClass named ``resource_name`` with ``args`` (or the same fields as keywords)."""
        a = args if args is not None else MachineClassArgs(**kwargs)
        props = {"uid": None, "created_at": None, "name": a.name or resource_name,
                 "capabilities": a.capabilities}
        super().__init__(MachineClassProvider(), resource_name, props, opts)


class VolumeClass(Resource, module="ironpool", name="VolumeClass"):
    """A VolumeClass declared with Pulumi (cluster-scoped)."""

    name: pulumi.Output[str]
    """The class's name."""
    capabilities: pulumi.Output[dict[str, str]]
    """The capabilities as canonical quantity strings."""
    resize_policy: pulumi.Output[str]
    """``Static`` or ``ExpandOnly``."""
    uid: pulumi.Output[str]
    """The API object's uid."""
    created_at: pulumi.Output[str]
    """When the class was created (RFC 3339)."""

    def __init__(self, resource_name: str, args: VolumeClassArgs | None = None,
                 opts: pulumi.ResourceOptions | None = None, **kwargs: Any) -> None:
        """Declare a VolumeClass named ``resource_name`` with ``args`` (or the same fields as keywords)."""
        a = args if args is not None else VolumeClassArgs(**kwargs)
        props = {"uid": None, "created_at": None, "name": a.name or resource_name,
                 "capabilities": a.capabilities, "resize_policy": a.resize_policy}
        super().__init__(VolumeClassProvider(), resource_name, props, opts)
