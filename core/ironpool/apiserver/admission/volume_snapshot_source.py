"""A Volume restored from a VolumeSnapshot is made in the pool that holds the snapshot.

A volume runtime restores only its own snapshots (a snapshot is a file in its pool), so at the
Volume's creation this plugin (a mutating admission, before validation) reads the snapshot named by
``spec.dataSource.volumeSnapshotRef`` and its holder, the pool label its volumepoollet put on it
(``volumepoollet.ironpool.dev/pool``; no other pool identity may set it, :mod:`..auth.pool_authorizer`):

- no ``spec.volumePoolRef``: it is set to the holder, so the Volume is bound there and not scheduled
  elsewhere; a snapshot that does not exist or that no pool holds yet (its source Volume is not
  bound) is refused, naming ``spec.dataSource.volumeSnapshotRef.name``: nothing could place the
  Volume right later, since its pool is set once;
- ``spec.volumePoolRef`` names another pool than the holder: refused, naming ``spec.volumePoolRef``;
- ``spec.volumePoolRef`` set and the snapshot not there yet: admitted; the volumepoollet waits for
  the snapshot to be Ready in its pool and says so in the Volume's status.
"""

from __future__ import annotations

from typing import Any, ClassVar

from ironpool.api.fieldpath import FieldErrors
from ironpool.api.quota import VOLUME
from ironpool.api.resources import resolve
from ironpool.api.storage import VOLUME_POOL_LABEL
from ironpool.api.validation import raise_if_invalid
from ironpool.apiserver.admission.plugin import AdmissionPlugin, Attributes
from ironpool.store.interface import Store

_SNAPSHOTS = resolve("volumesnapshot")
_REF = "spec.dataSource.volumeSnapshotRef.name"


def _dict(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


class VolumeSnapshotSource(AdmissionPlugin):
    """Binds a restored Volume to its snapshot's pool (see the module docstring)."""

    name: ClassVar[str] = "VolumeSnapshotSource"
    kinds: ClassVar[frozenset[str] | None] = frozenset({VOLUME})

    def __init__(self, store: Store) -> None:
        self.store = store

    async def admit(self, attrs: Attributes) -> None:
        if attrs.operation != "CREATE" or attrs.new is None:
            return
        spec = _dict(attrs.new.get("spec"))
        ref = _dict(_dict(spec.get("dataSource")).get("volumeSnapshotRef")).get("name")
        if not isinstance(ref, str) or not ref:
            return  # no snapshot source, or one validation refuses with its own message
        snapshot = await self.store.get(_SNAPSHOTS.key(attrs.namespace, ref))
        holder = _dict(_dict(_dict(snapshot).get("metadata")).get("labels")).get(VOLUME_POOL_LABEL)
        chosen = _dict(spec.get("volumePoolRef")).get("name")
        errs = FieldErrors()
        if chosen and holder and chosen != holder:
            errs.invalid("spec.volumePoolRef.name", chosen,
                         f'VolumeSnapshot "{ref}" is held by volume pool "{holder}": a Volume restored from '
                         "it is made in that pool")
        elif not chosen and not holder:
            why = "does not exist" if snapshot is None else "is not held by a volume pool yet (its source " \
                  "Volume is not bound to one)"
            errs.invalid(_REF, ref, f'VolumeSnapshot "{ref}" {why}; a restored Volume is made in its '
                                    "snapshot's pool: create it once the snapshot is held, or set "
                                    "spec.volumePoolRef")
        elif not chosen:
            spec["volumePoolRef"] = {"name": holder}
            attrs.new["spec"] = spec
        raise_if_invalid(attrs.info, attrs.new, errs)
