"""``Volume``: a block volume in a VolumePool, attached to Machines by reference.

Replaced when ``name``, ``namespace``, ``volume_class``, ``image`` or ``snapshot`` change. ``size``
grows in place (when the class's resize policy is ``ExpandOnly``); a smaller size is refused in
``check``, since a volume never shrinks. ``labels`` update in place.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import pulumi
from ironpool.api import validate_volume_resize
from ironpool.api.errors import Invalid, NotFound
from ironpool.api.quantity import parse_quantity
from ironpool.api.resources import resolve
from ironpool.client import Client
from ironpool.client.readiness import Readiness, state_of, volume_available
from pulumi.dynamic import CheckFailure, Resource

from ironpool_pulumi import declared
from ironpool_pulumi.base import ApiResourceProvider, Obj, Props, choice, flag, seconds
from ironpool_pulumi.classes import VolumeClass
from ironpool_pulumi.values import none_if_empty, without_system_keys

VOLUMES, VOLUME_CLASSES = resolve("volumes"), resolve("volumeclasses")
WAIT_FOR = ("none", "available")


@dataclass
class VolumeArgs:
    """The inputs of a :class:`Volume`."""

    volume_class: pulumi.Input[str] | VolumeClass
    """The VolumeClass (resource or name). Changing it replaces the Volume."""
    size: pulumi.Input[str]
    """The size as a quantity string (``10Gi``); grows in place, never shrinks."""
    name: pulumi.Input[str] | None = None
    """The Volume's name (default: the Pulumi resource name). Changing it replaces the Volume."""
    namespace: pulumi.Input[str] | None = None
    """The namespace (default: ``ironpool:namespace``, else the client config's, else ``default``)."""
    image: pulumi.Input[str] | None = None
    """Fill the volume from this OS image; replaces when changed."""
    snapshot: pulumi.Input[str] | Any | None = None
    """Restore the volume from this VolumeSnapshot (a :class:`~ironpool_pulumi.VolumeSnapshot` or its
    name), in the pool that holds it; ``size`` must be at least the snapshot's. Not with ``image``;
    replaces when changed."""
    labels: pulumi.Input[dict[str, str]] | None = None
    """Labels of the Volume; updated in place."""
    wait_for: pulumi.Input[str] = "available"
    """``none`` or ``available`` (the volumepoollet made it, at least at ``size``). Never causes a diff."""
    wait_timeout: pulumi.Input[int] = 600
    """Seconds to wait for ``wait_for``, and for the deletion. Never causes a diff."""
    fail_on_unschedulable: pulumi.Input[bool] = True
    """End the wait within seconds when the scheduler says no pool can take the Volume until the
    fleet changes, naming its reason. Never causes a diff."""


class VolumeProvider(ApiResourceProvider):
    """The dynamic provider behind :class:`Volume`."""

    info = VOLUMES
    replace_on = ("name", "namespace", "volume_class", "image", "snapshot")
    update_on = ("size", "labels")
    kept = ("wait_for", "wait_timeout", "fail_on_unschedulable")
    field_properties: ClassVar[tuple[tuple[str, str], ...]] = (
        ("metadata.name", "name"), ("metadata.namespace", "namespace"), ("metadata.labels", "labels"),
        ("spec.volumeClassRef", "volume_class"), ("spec.resources", "size"),
        ("spec.dataSource.volumeSnapshotRef", "snapshot"), ("spec.dataSource", "image"),
    )

    def defaults(self, inputs: Props, failures: list[CheckFailure]) -> Props:
        inputs["wait_for"] = choice(inputs.get("wait_for"), WAIT_FOR, "available", "wait_for", failures)
        inputs["wait_timeout"] = seconds(inputs.get("wait_timeout"), failures)
        inputs["fail_on_unschedulable"] = flag(inputs.get("fail_on_unschedulable"), "fail_on_unschedulable",
                                               True, failures)
        if not inputs.get("volume_class"):
            failures.append(CheckFailure("volume_class", "a Volume needs a volume_class"))
        if inputs.get("size") in (None, ""):
            failures.append(CheckFailure("size", "a Volume needs a size, e.g. 10Gi"))
        elif isinstance(inputs["size"], int):
            inputs["size"] = str(inputs["size"])
        return inputs

    def manifest(self, inputs: Props) -> Obj:
        meta = {"name": inputs["name"], "namespace": inputs.get("namespace"),
                "labels": none_if_empty(inputs.get("labels"))}
        spec: Obj = {"volumeClassRef": {"name": inputs.get("volume_class")},
                     "resources": {"storage": inputs.get("size")}}
        source: Obj = {}
        if inputs.get("image"):
            source["osImage"] = {"image": inputs["image"]}
        if inputs.get("snapshot"):  # both set: the API refuses, naming the field
            source["volumeSnapshotRef"] = {"name": inputs["snapshot"]}
        if source:
            spec["dataSource"] = source
        return {"apiVersion": self.info.api_version, "kind": self.kind,
                "metadata": {k: v for k, v in meta.items() if v is not None}, "spec": spec}

    def properties(self, obj: Obj, previous: Props) -> Props:
        meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
        return {
            "name": meta.get("name"), "namespace": meta.get("namespace"),
            "labels": without_system_keys(meta.get("labels"), previous.get("labels")),
            "volume_class": (spec.get("volumeClassRef") or {}).get("name"),
            "size": (spec.get("resources") or {}).get("storage"),
            "image": ((spec.get("dataSource") or {}).get("osImage") or {}).get("image"),
            "snapshot": ((spec.get("dataSource") or {}).get("volumeSnapshotRef") or {}).get("name"),
        }

    def status_outputs(self, client: Client, obj: Obj, inputs: Props) -> Props:
        status, spec = obj.get("status") or {}, obj.get("spec") or {}
        return {
            **super().status_outputs(client, obj, inputs),
            "state": state_of(obj),
            "volume_pool": (spec.get("volumePoolRef") or {}).get("name"),
            "volume_id": status.get("volumeID"),
            "claimer": (spec.get("claimRef") or {}).get("name"),
        }

    def check_with_server(self, client: Client, olds: Props, inputs: Props,
                          failures: list[CheckFailure]) -> Props:
        class_name = inputs.get("volume_class")
        if not isinstance(class_name, str) or not class_name:
            return {}  # defaults() has said so
        try:
            vclass: Obj | None = client.get_raw(VOLUME_CLASSES, class_name)
        except NotFound:
            vclass = None
            if declared.declared("VolumeClass", class_name) is None:
                known = sorted(c["metadata"]["name"] for c in client.list_raw(VOLUME_CLASSES).items)
                failures.append(CheckFailure("volume_class", f"VolumeClass {class_name!r} does not exist "
                                                             f"(known: {', '.join(known) or 'none'})"))
                return {}
        if failures:
            return {}
        old_size, new_size = olds.get("size"), inputs.get("size")
        if olds and old_size and new_size and olds.get("volume_class") == class_name:
            if parse_quantity(str(new_size)) < parse_quantity(str(old_size)):
                failures.append(CheckFailure("size", f"cannot shrink the Volume from {old_size} to "
                                                     f"{new_size}; a Volume only grows"))
            elif vclass is not None:
                try:
                    validate_volume_resize(vclass, self.manifest(olds), self.manifest(inputs))
                except Invalid as exc:
                    why = "; ".join(c.message for c in exc.causes) or str(exc)
                    failures.append(CheckFailure("size", why))
        declared.declare("Volume", f"{inputs.get('namespace')}/{inputs['name']}", self.manifest(inputs))
        return {}

    def readiness(self, inputs: Props) -> Readiness | None:
        return volume_available if inputs.get("wait_for") == "available" else None


VOLUME_OUTPUTS = ("uid", "created_at", "state", "volume_pool", "volume_id", "claimer")


class Volume(Resource, module="ironpool", name="Volume"):
    """A Volume declared with Pulumi; attach it to a :class:`~ironpool_pulumi.Machine` through ``volumes``."""

    name: pulumi.Output[str]
    """The Volume's name."""
    namespace: pulumi.Output[str]
    """The Volume's namespace."""
    size: pulumi.Output[str]
    """The requested size (canonical quantity)."""
    uid: pulumi.Output[str]
    """The API object's uid."""
    created_at: pulumi.Output[str]
    """When the Volume was created (RFC 3339)."""
    state: pulumi.Output[str]
    """``Pending``, ``Available`` or ``Error`` (``Pending`` until the volumepoollet reported one)."""
    volume_pool: pulumi.Output[str | None]
    """The VolumePool the scheduler bound the Volume to."""
    volume_id: pulumi.Output[str | None]
    """The runtime's id of the volume."""
    claimer: pulumi.Output[str | None]
    """The Machine using the Volume (its ``claimRef``), if any."""

    def __init__(self, resource_name: str, args: VolumeArgs | None = None,
                 opts: pulumi.ResourceOptions | None = None, **kwargs: Any) -> None:
        """Declare a Volume named ``resource_name`` with ``args`` (or the same fields as keywords)."""
        a = args if args is not None else VolumeArgs(**kwargs)
        volume_class = a.volume_class.name if isinstance(a.volume_class, VolumeClass) else a.volume_class
        snapshot = getattr(a.snapshot, "name", a.snapshot)  # a VolumeSnapshot resource: its name
        props: dict[str, Any] = {k: None for k in VOLUME_OUTPUTS}
        props.update({
            "name": a.name or resource_name, "namespace": a.namespace,
            "volume_class": volume_class,
            "size": a.size, "image": a.image, "snapshot": snapshot, "labels": a.labels,
            "wait_for": a.wait_for, "wait_timeout": a.wait_timeout,
            "fail_on_unschedulable": a.fail_on_unschedulable,
        })
        super().__init__(VolumeProvider(), resource_name, props, opts)

    @staticmethod
    def get(resource_name: str, id: pulumi.Input[str], opts: pulumi.ResourceOptions | None = None) -> Volume:
        """The existing Volume ``id`` (``namespace/name``), read into this program, not managed by it."""
        read = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(id=id))
        return Volume(resource_name, VolumeArgs(volume_class="", size=""), read)
