"""What each pool may read, as Kubernetes' Node authorizer knows it: a graph from the objects bound to
a pool to what they reference.

- a Machine bound to machine pool P references its ignition Secret (``spec.ignitionRef``), its
  image pull Secret (``spec.imagePullSecret``), its
  Volumes (``spec.volumes[].volumeRef``, or ``<machine>-<volume>`` when ephemeral) and its
  NetworkInterfaces (``spec.networkInterfaces[].networkInterfaceRef``, or ``<machine>-<nic>``);
- a Volume bound to volume pool P references its encryption Secret (``spec.encryption.secretRef``),
  its image pull Secret (``spec.imagePullSecret``) and its access Secret (``status.access.secretRef``).

P may get such an object only while an edge to it exists. The graph is kept by a
:class:`~ironpool.store.mirror.StoreMirror` (so every apiserver on one store agrees);
when it says no, :func:`confirm` asks the store, so a mirror a moment behind another apiserver's
write refuses nothing it should allow.
"""

from __future__ import annotations

from collections.abc import Iterator

from ironpool.api.resource_info import ResourceInfo
from ironpool.api.resources import by_path
from ironpool.store.interface import Document, Store
from ironpool.store.mirror import StoreMirror

MACHINES = by_path("compute.ironcore.dev", "v1alpha1", "machines")
VOLUMES = by_path("storage.ironcore.dev", "v1alpha1", "volumes")
GRAPH_RESOURCES = frozenset({"secrets", "volumes", "networkinterfaces"})

Edge = tuple[str, str, str, str, str]
"""(pool kind ``machine``/``volume``, pool, resource plural, namespace, name)"""


def _name(ref: object) -> str | None:
    name = ref.get("name") if isinstance(ref, dict) else None
    return str(name) if name else None


def _entries(spec: dict[str, object], key: str) -> Iterator[dict[str, object]]:
    items = spec.get(key)
    for item in items if isinstance(items, list) else ():
        if isinstance(item, dict):
            yield item


def edges_of(info: ResourceInfo, doc: Document) -> tuple[str, str, tuple[tuple[str, str], ...]] | None:
    """(pool kind, pool, ((plural, name), ...)) of a bound Machine or Volume; None if unbound."""
    spec = doc.get("spec") or {}
    if not isinstance(spec, dict):
        return None
    meta_name = str((doc.get("metadata") or {}).get("name") or "")
    refs: list[tuple[str, str]] = []
    if info.kind == "Machine":
        kind, pool = "machine", _name(spec.get("machinePoolRef"))
        if (ign := _name(spec.get("ignitionRef"))) is not None:
            refs.append(("secrets", ign))
        if (pull := _name(spec.get("imagePullSecret"))) is not None:
            refs.append(("secrets", pull))
        for plural, key, ref_key in (("volumes", "volumes", "volumeRef"),
                                     ("networkinterfaces", "networkInterfaces", "networkInterfaceRef")):
            for item in _entries(spec, key):
                name = _name(item.get(ref_key))
                if name is None and item.get("ephemeral") is not None and item.get("name"):
                    name = f"{meta_name}-{item['name']}"
                if name is not None:
                    refs.append((plural, name))
    else:
        kind, pool = "volume", _name(spec.get("volumePoolRef"))
        encryption = spec.get("encryption")
        if isinstance(encryption, dict) and (sec := _name(encryption.get("secretRef"))) is not None:
            refs.append(("secrets", sec))
        if (pull := _name(spec.get("imagePullSecret"))) is not None:
            refs.append(("secrets", pull))
        access = (doc.get("status") or {}).get("access")
        if isinstance(access, dict) and (sec := _name(access.get("secretRef"))) is not None:
            refs.append(("secrets", sec))
    return None if pool is None else (kind, pool, tuple(refs))


class PoolGraph:
    """Edges from pools to the objects their Machines and Volumes reference, counted."""

    def __init__(self, store: Store) -> None:
        self._edges: dict[str, tuple[Edge, ...]] = {}  # store key of a Machine/Volume -> its edges
        self._count: dict[Edge, int] = {}
        self.mirror = StoreMirror(store, (MACHINES, VOLUMES), self._apply)

    async def start(self) -> None:
        await self.mirror.start()

    async def stop(self) -> None:
        await self.mirror.stop()

    def committed(self, info: ResourceInfo, key: str, doc: Document | None) -> None:
        self.mirror.committed(info, key, doc)

    def _apply(self, info: ResourceInfo, key: str, doc: Document | None) -> None:
        for edge in self._edges.pop(key, ()):
            left = self._count[edge] - 1
            if left:
                self._count[edge] = left
            else:
                del self._count[edge]
        found = edges_of(info, doc) if doc is not None else None
        if found is None:
            return
        kind, pool, refs = found
        ns = str((doc or {}).get("metadata", {}).get("namespace") or "")
        edges = tuple({(kind, pool, plural, ns, name) for plural, name in refs})
        self._edges[key] = edges
        for edge in edges:
            self._count[edge] = self._count.get(edge, 0) + 1

    def allows(self, kind: str, pool: str, plural: str, namespace: str, name: str) -> bool:
        return (kind, pool, plural, namespace, name) in self._count


async def confirm(store: Store, kind: str, pool: str, plural: str, namespace: str, name: str) -> bool:
    """The graph's answer read from the store itself (the rare case the mirror said no)."""
    info = MACHINES if kind == "machine" else VOLUMES
    page = await store.list(info.prefix(namespace))
    for doc in page.items:
        found = edges_of(info, doc)
        if found is not None and found[1] == pool and (plural, name) in found[2]:
            return True
    return False
