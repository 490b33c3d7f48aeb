# Copyright: ironpool contributors
# SPDX-License-Identifier: Apache-2.0
"""The kinds the collection's modules manage, as the client's raw calls address them.

The apiserver's resource table (``ironpool.api.resources``) holds every kind with its pydantic
model, and loading it loads every model: about 0.1 s at the start of each task. The modules only
send and read plain dicts, so the few kinds they manage are named here without their models; a unit
test checks that they match the table. Any other kind (the ``manifest`` module takes arbitrary
ones) is looked up in the full table.
"""

from __future__ import annotations

import contextlib
from functools import cache

with contextlib.suppress(ImportError):  # reported by IronpoolModule.execute
    from ironpool.api.resource_info import ResourceInfo

COMPUTE = "compute.ironcore.dev/v1alpha1"
STORAGE = "storage.ironcore.dev/v1alpha1"

# (apiVersion, kind) -> (plural, short names, namespaced, has a status subresource)
_KINDS: dict[tuple[str, str], tuple[str, tuple[str, ...], bool, bool]] = {
    (COMPUTE, "Machine"): ("machines", ("ma",), True, True),
    (COMPUTE, "MachineClass"): ("machineclasses", ("mc",), False, False),
    (COMPUTE, "MachinePool"): ("machinepools", ("mp",), False, True),
    (COMPUTE, "Reservation"): ("reservations", ("rsv",), True, True),
    (STORAGE, "Volume"): ("volumes", ("vol",), True, True),
    (STORAGE, "VolumeClass"): ("volumeclasses", ("vc",), False, False),
    (STORAGE, "VolumePool"): ("volumepools", ("vp",), False, True),
    (STORAGE, "VolumeSnapshot"): ("volumesnapshots", (), True, True),
    ("v1", "Secret"): ("secrets", (), True, False),
    ("v1", "Namespace"): ("namespaces", ("ns",), False, True),
}


def known_kinds() -> list[tuple[str, str]]:
    """The ``(apiVersion, kind)`` pairs named here."""
    return list(_KINDS)


@cache
def resource(api_version: str, kind: str) -> ResourceInfo:
    """The ResourceInfo of ``kind`` for the client's ``*_raw`` calls. For the kinds named here its
    ``model`` is None: typed calls need the full table's entry."""
    known = _KINDS.get((api_version, kind))
    if known is None:
        from ironpool.api.resources import by_kind

        return by_kind(api_version, kind)
    plural, short_names, namespaced, has_status = known
    group, version = api_version.rpartition("/")[::2]
    return ResourceInfo(group=group, version=version, kind=kind, plural=plural, singular=kind.lower(),
                        short_names=short_names, namespaced=namespaced, has_status=has_status,
                        model=None)  # type: ignore[arg-type, unused-ignore]  # the *_raw calls never read it
