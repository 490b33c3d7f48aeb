"""``VolumeSnapshot``: a point-in-time copy of a Volume, taken by the volumepoollet of its pool.

Replaced when ``name``, ``namespace`` or ``volume`` change (the API keeps ``spec.volumeRef`` fixed);
``labels`` update in place. Create waits, with ``wait_for="ready"``, until the snapshot's state is
``Ready``; a ``Failed`` snapshot ends the wait at once. A :class:`~ironpool_pulumi.Volume` with
``snapshot`` restores it, in the snapshot's pool. A snapshot of a Volume in use by a running Machine
is crash-consistent (the disk as at one instant, as after a power cut).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

import pulumi
from ironpool.api.resources import resolve
from ironpool.client import Client
from ironpool.client.readiness import Readiness, snapshot_ready
from ironpool.client.wait import Unschedulable, WaitError
from pulumi.dynamic import CheckFailure, Resource

from ironpool_pulumi.base import ApiResourceProvider, Obj, Props, choice, seconds
from ironpool_pulumi.values import none_if_empty, without_system_keys

SNAPSHOTS = resolve("volumesnapshots")
WAIT_FOR = ("none", "ready")


@dataclass
class VolumeSnapshotArgs:
    """The inputs of a :class:`VolumeSnapshot`."""

    volume: pulumi.Input[str] | Any
    """The Volume to snapshot (a :class:`~ironpool_pulumi.Volume` or its name). Changing it replaces
    the snapshot."""
    name: pulumi.Input[str] | None = None
    """The snapshot's name (default: the Pulumi resource name). Changing it replaces the snapshot."""
    namespace: pulumi.Input[str] | None = None
    """The namespace (default: ``ironpool:namespace``, else the client config's, else ``default``)."""
    labels: pulumi.Input[dict[str, str]] | None = None
    """Labels of the snapshot; updated in place."""
    wait_for: pulumi.Input[str] = "ready"
    """``none`` or ``ready`` (the snapshot's state is ``Ready``). Never causes a diff."""
    wait_timeout: pulumi.Input[int] = 600
    """Seconds to wait for ``wait_for``, and for the deletion. Never causes a diff."""


class VolumeSnapshotProvider(ApiResourceProvider):
    """The dynamic provider behind :class:`VolumeSnapshot`."""

    info = SNAPSHOTS
    replace_on = ("name", "namespace", "volume")
    update_on = ("labels",)
    kept = ("wait_for", "wait_timeout")
    field_properties: ClassVar[tuple[tuple[str, str], ...]] = (
        ("metadata.name", "name"), ("metadata.namespace", "namespace"), ("metadata.labels", "labels"),
        ("spec.volumeRef", "volume"),
    )

    def defaults(self, inputs: Props, failures: list[CheckFailure]) -> Props:
        inputs["wait_for"] = choice(inputs.get("wait_for"), WAIT_FOR, "ready", "wait_for", failures)
        inputs["wait_timeout"] = seconds(inputs.get("wait_timeout"), failures)
        if not inputs.get("volume"):
            failures.append(CheckFailure("volume", "a VolumeSnapshot needs the volume to snapshot"))
        return inputs

    def manifest(self, inputs: Props) -> Obj:
        meta = {"name": inputs["name"], "namespace": inputs.get("namespace"),
                "labels": none_if_empty(inputs.get("labels"))}
        return {"apiVersion": self.info.api_version, "kind": self.kind,
                "metadata": {k: v for k, v in meta.items() if v is not None},
                "spec": {"volumeRef": {"name": inputs.get("volume")}}}

    def properties(self, obj: Obj, previous: Props) -> Props:
        meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
        return {
            "name": meta.get("name"), "namespace": meta.get("namespace"),
            "labels": without_system_keys(meta.get("labels"), previous.get("labels")),
            "volume": (spec.get("volumeRef") or {}).get("name"),
        }

    def status_outputs(self, client: Client, obj: Obj, inputs: Props) -> Props:
        status = obj.get("status") or {}
        return {
            **super().status_outputs(client, obj, inputs),
            "state": status.get("state") or "Pending",
            "snapshot_id": status.get("snapshotID"),
            "size": status.get("size"),
        }

    def readiness(self, inputs: Props) -> Readiness | None:
        return snapshot_ready if inputs.get("wait_for") == "ready" else None

    def wait_failure(self, exc: WaitError, inputs: Props) -> str:
        if isinstance(exc, Unschedulable):  # the verdict's ``failed``: a Failed snapshot
            return f"failed: {exc.reason}"
        return super().wait_failure(exc, inputs)


SNAPSHOT_OUTPUTS = ("uid", "created_at", "state", "snapshot_id", "size")


class VolumeSnapshot(Resource, module="ironpool", name="VolumeSnapshot"):
    """A VolumeSnapshot declared with Pulumi; restore it with a :class:`~ironpool_pulumi.Volume`'s
    ``snapshot``."""

    name: pulumi.Output[str]
    """The snapshot's name."""
    namespace: pulumi.Output[str]
    """The snapshot's namespace."""
    volume: pulumi.Output[str]
    """The Volume it is a snapshot of."""
    uid: pulumi.Output[str]
    """The API object's uid."""
    created_at: pulumi.Output[str]
    """When the snapshot was created (RFC 3339)."""
    state: pulumi.Output[str]
    """``Pending``, ``Ready`` or ``Failed`` (``Pending`` until a volumepoollet reported one)."""
    snapshot_id: pulumi.Output[str | None]
    """The runtime's id of the snapshot (``<runtime>://<id>``)."""
    size: pulumi.Output[str | None]
    """The snapshot's size as its pool reports it."""

    def __init__(self, resource_name: str, args: VolumeSnapshotArgs | None = None,
                 opts: pulumi.ResourceOptions | None = None, **kwargs: Any) -> None:
        """Declare a VolumeSnapshot named ``resource_name`` with ``args`` (or the same fields as keywords)."""
        a = args if args is not None else VolumeSnapshotArgs(**kwargs)
        # A Volume resource stands for its name (an Output, so the snapshot follows the Volume).
        volume = getattr(a.volume, "name", a.volume)
        props: dict[str, Any] = {k: None for k in SNAPSHOT_OUTPUTS}
        props.update({
            "name": a.name or resource_name, "namespace": a.namespace, "volume": volume,
            "labels": a.labels, "wait_for": a.wait_for, "wait_timeout": a.wait_timeout,
        })
        super().__init__(VolumeSnapshotProvider(), resource_name, props, opts)

    @staticmethod
    def get(resource_name: str, id: pulumi.Input[str],
            opts: pulumi.ResourceOptions | None = None) -> VolumeSnapshot:
        """The existing VolumeSnapshot ``id`` (``namespace/name``), read into this program, not managed
        by it."""
        read = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(id=id))
        return VolumeSnapshot(resource_name, VolumeSnapshotArgs(volume=""), read)
