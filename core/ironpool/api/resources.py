"""The resource registry: every kind ironpool serves, its REST path, store key and CLI names."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import BaseModel

from ironpool.api import errors
from ironpool.api.compute import COMPUTE_GROUP, COMPUTE_VERSION, Machine, MachineClass, MachinePool
from ironpool.api.core import CORE_GROUP, CORE_VERSION, Event, Namespace, Secret
from ironpool.api.storage import STORAGE_GROUP, STORAGE_VERSION, Volume, VolumeClass, VolumePool


@dataclass(frozen=True)
class ResourceInfo:
    """One served resource type."""

    group: str  # "" for the core group
    version: str
    kind: str
    plural: str
    singular: str
    short_names: tuple[str, ...]
    namespaced: bool
    model: type[BaseModel]
    has_status: bool

    @property
    def api_version(self) -> str:
        """``compute.ironcore.dev/v1alpha1``, or ``v1`` for the core group."""
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def group_resource(self) -> str:
        """``machines.compute.ironcore.dev`` (``secrets`` for core), as Kubernetes names it."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def qualified_kind(self) -> str:
        """``Machine.compute.ironcore.dev`` (``Secret`` for core), used in error messages."""
        return f"{self.kind}.{self.group}" if self.group else self.kind

    def key(self, namespace: str | None, name: str) -> str:
        """The store key of one object."""
        ns = (namespace or "_") if self.namespaced else "_"
        return f"/registry/{self.group or 'core'}/{self.plural}/{ns}/{name}"

    def prefix(self, namespace: str | None) -> str:
        """The store key prefix of all objects in ``namespace`` (``None``: every namespace)."""
        base = f"/registry/{self.group or 'core'}/{self.plural}/"
        if not self.namespaced:
            return base + "_/"
        return base if namespace is None else f"{base}{namespace}/"

    def path(self, namespace: str | None, name: str | None = None) -> str:
        """The REST path of the collection, or of one object when ``name`` is given."""
        root = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace is not None:
            root = f"{root}/namespaces/{namespace}"
        root = f"{root}/{self.plural}"
        return root if name is None else f"{root}/{name}"


RESOURCES: tuple[ResourceInfo, ...] = (
    ResourceInfo(COMPUTE_GROUP, COMPUTE_VERSION, "MachineClass", "machineclasses", "machineclass",
                 ("mc",), False, MachineClass, False),
    ResourceInfo(COMPUTE_GROUP, COMPUTE_VERSION, "MachinePool", "machinepools", "machinepool",
                 ("mp",), False, MachinePool, True),
    ResourceInfo(COMPUTE_GROUP, COMPUTE_VERSION, "Machine", "machines", "machine",
                 ("ma",), True, Machine, True),
    ResourceInfo(STORAGE_GROUP, STORAGE_VERSION, "VolumeClass", "volumeclasses", "volumeclass",
                 ("vc",), False, VolumeClass, False),
    ResourceInfo(STORAGE_GROUP, STORAGE_VERSION, "VolumePool", "volumepools", "volumepool",
                 ("vp",), False, VolumePool, True),
    ResourceInfo(STORAGE_GROUP, STORAGE_VERSION, "Volume", "volumes", "volume",
                 ("vol",), True, Volume, True),
    ResourceInfo(CORE_GROUP, CORE_VERSION, "Secret", "secrets", "secret", (), True, Secret, False),
    ResourceInfo(CORE_GROUP, CORE_VERSION, "Namespace", "namespaces", "namespace",
                 ("ns",), False, Namespace, True),
    ResourceInfo(CORE_GROUP, CORE_VERSION, "Event", "events", "event", ("ev",), True, Event, False),
)

_BY_PATH: dict[tuple[str, str, str], ResourceInfo] = {(r.group, r.version, r.plural): r for r in RESOURCES}
_BY_KIND: dict[tuple[str, str], ResourceInfo] = {(r.api_version, r.kind): r for r in RESOURCES}
_BY_NAME: dict[str, ResourceInfo] = {}
for _r in RESOURCES:
    for _n in (_r.singular, _r.plural, _r.kind.lower(), *_r.short_names):
        if _n in _BY_NAME and _BY_NAME[_n] is not _r:  # pragma: no cover - guarded by a unit test
            raise RuntimeError(f"resource name {_n!r} is ambiguous")
        _BY_NAME[_n] = _r
        if _r.group:
            _BY_NAME[f"{_n}.{_r.group}"] = _r
            _BY_NAME[f"{_n}.{_r.version}.{_r.group}"] = _r


def by_path(group: str, version: str, plural: str) -> ResourceInfo:
    """The resource served at ``/apis/{group}/{version}/{plural}`` (group ``""``: ``/api/v1``)."""
    info = _BY_PATH.get((group, version, plural))
    if info is None:
        where = f"{group}/{version}" if group else version
        raise errors.NotFound(
            message=f'the server could not find the requested resource "{plural}" in {where}',
            kind=plural, group=group,
        )
    return info


def by_kind(api_version: str, kind: str) -> ResourceInfo:
    """The resource of a manifest's ``apiVersion`` and ``kind``."""
    info = _BY_KIND.get((api_version, kind))
    if info is None:
        known = ", ".join(f"{r.api_version}/{r.kind}" for r in RESOURCES)
        raise errors.BadRequest(
            message=f'no kind "{kind}" is registered for version "{api_version}" (known kinds: {known})',
            kind=kind,
        )
    return info


def resolve(name: str) -> ResourceInfo:
    """A resource from a CLI name: singular, plural, short name or Kind, optionally ``.group``."""
    info = _BY_NAME.get(name.strip().lower())
    if info is None:
        known = ", ".join(
            f"{r.kind} ({', '.join((r.plural, *r.short_names))})" for r in RESOURCES
        )
        raise errors.NotFound(
            message=f'the server doesn\'t have a resource type "{name}" (known: {known})',
        )
    return info
