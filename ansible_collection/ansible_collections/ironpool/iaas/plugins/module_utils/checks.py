# Copyright: ironpool contributors
# SPDX-License-Identifier: Apache-2.0
"""Option checks made before anything is written, each failing with the option's name."""

from __future__ import annotations

from typing import Any

from ansible_collections.ironpool.iaas.plugins.module_utils.errors import OptionError
from ansible_collections.ironpool.iaas.plugins.module_utils.kinds import resource

try:
    from ironpool.api.errors import NotFound
    from ironpool.api.quantity import parse_quantity
except ImportError:  # reported by IronpoolModule.execute
    pass

_CLASS_KINDS = {
    "MachineClass": "compute.ironcore.dev/v1alpha1",
    "VolumeClass": "storage.ironcore.dev/v1alpha1",
}


def check_quantity(option: str, value: Any) -> str:
    """``value`` as the API's canonical quantity string (``1Gi``), or an error naming ``option``."""
    try:
        q = parse_quantity(value)
    except ValueError as exc:
        raise OptionError(f"{option}: {value!r} is not a size or quantity such as 512Mi, 10Gi or 1.5T") \
            from exc
    if q.sign() <= 0:
        raise OptionError(f"{option}: {value!r} must be greater than zero")
    return str(q)


def require_class(client: Any, kind: str, name: str, option: str) -> dict[str, Any]:
    """The MachineClass/VolumeClass ``name``, or an error naming ``option`` and the classes there are."""
    info = resource(_CLASS_KINDS[kind], kind)
    try:
        return dict(client.get_raw(info, name))
    except NotFound:
        known = sorted(str((c.get("metadata") or {}).get("name")) for c in client.list_raw(info).items)
        raise OptionError(f"{option}: there is no {kind} named {name!r} "
                          f"(there are: {', '.join(known) or 'none'})") from None
