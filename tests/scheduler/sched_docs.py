"""Builders for the API documents the scheduler tests feed in (IronCore JSON shapes)."""

from __future__ import annotations

from typing import Any


def machine_class(name: str, cpu: int | str, memory: str) -> dict[str, Any]:
    return {
        "apiVersion": "compute.ironcore.dev/v1alpha1",
        "kind": "MachineClass",
        "metadata": {"name": name},
        "capabilities": {"cpu": str(cpu), "memory": memory},
    }


def volume_class(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "storage.ironcore.dev/v1alpha1",
        "kind": "VolumeClass",
        "metadata": {"name": name},
        "capabilities": {"tps": "100Mi", "iops": "1000"},
    }


def machine_pool(
    name: str,
    cpu: int | str | None = None,
    memory: str | None = None,
    *,
    classes: list[str] | None = None,
    ready: bool = True,
    labels: dict[str, str] | None = None,
    taints: list[dict[str, str]] | None = None,
    zone: str | None = None,
    extra_allocatable: dict[str, str] | None = None,
    use_capacity: bool = False,
) -> dict[str, Any]:
    resources: dict[str, str] = {}
    if cpu is not None:
        resources["cpu"] = str(cpu)
    if memory is not None:
        resources["memory"] = memory
    resources.update(extra_allocatable or {})
    status: dict[str, Any] = {
        "state": "Ready" if ready else "Pending",
        "conditions": [{"type": "Ready", "status": "True" if ready else "False", "reason": "Test"}],
        "capacity": dict(resources),
    }
    if not use_capacity:
        status["allocatable"] = dict(resources)
    if classes is not None:
        status["availableMachineClasses"] = [{"name": c} for c in classes]
    all_labels = dict(labels or {})
    if zone is not None:
        all_labels["topology.ironcore.dev/zone"] = zone
    return {
        "apiVersion": "compute.ironcore.dev/v1alpha1",
        "kind": "MachinePool",
        "metadata": {"name": name, "labels": all_labels},
        "spec": {"taints": taints or []},
        "status": status,
    }


def volume_pool(
    name: str, storage: str, *, classes: list[str] | None = None, labels: dict[str, str] | None = None
) -> dict[str, Any]:
    status: dict[str, Any] = {
        "state": "Available",
        "capacity": {"storage": storage},
        "allocatable": {"storage": storage},
    }
    if classes is not None:
        status["availableVolumeClasses"] = [{"name": c} for c in classes]
    return {
        "apiVersion": "storage.ironcore.dev/v1alpha1",
        "kind": "VolumePool",
        "metadata": {"name": name, "labels": dict(labels or {})},
        "spec": {},
        "status": status,
    }


def machine(
    name: str,
    cls: str,
    *,
    namespace: str = "default",
    pool: str | None = None,
    selector: dict[str, str] | None = None,
    tolerations: list[dict[str, str]] | None = None,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    volumes: list[str] | None = None,
    rv: str = "1",
) -> dict[str, Any]:
    spec: dict[str, Any] = {"machineClassRef": {"name": cls}}
    if pool:
        spec["machinePoolRef"] = {"name": pool}
    if selector:
        spec["machinePoolSelector"] = selector
    if tolerations:
        spec["tolerations"] = tolerations
    if volumes:
        spec["volumes"] = [{"name": v, "volumeRef": {"name": v}} for v in volumes]
    return {
        "apiVersion": "compute.ironcore.dev/v1alpha1",
        "kind": "Machine",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "uid": f"uid-{name}",
            "resourceVersion": rv,
            "labels": dict(labels or {}),
            "annotations": dict(annotations or {}),
        },
        "spec": spec,
    }


def volume(
    name: str,
    cls: str,
    storage: str,
    *,
    namespace: str = "default",
    pool: str | None = None,
    selector: dict[str, str] | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"volumeClassRef": {"name": cls}, "resources": {"storage": storage}}
    if pool:
        spec["volumePoolRef"] = {"name": pool}
    if selector:
        spec["volumePoolSelector"] = selector
    return {
        "apiVersion": "storage.ironcore.dev/v1alpha1",
        "kind": "Volume",
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{name}", "resourceVersion": "1"},
        "spec": spec,
    }
