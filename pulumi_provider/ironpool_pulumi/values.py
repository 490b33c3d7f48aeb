"""Property values as the dynamic-provider plugin hands them over, made plain and comparable.

Numbers cross the plugin as protobuf doubles (``2`` arrives as ``2.0``) and values not known yet in a
preview arrive as :class:`pulumi.output.Unknown`; these helpers turn both into something the API
models and the diff can use.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from pulumi.output import Unknown


def is_unknown(value: Any) -> bool:
    """True if ``value`` is, or contains, a value the preview does not know yet."""
    if isinstance(value, Unknown):
        return True
    if isinstance(value, dict):
        return any(is_unknown(v) for v in value.values())
    if isinstance(value, list):
        return any(is_unknown(v) for v in value)
    return False


def plain(value: Any) -> Any:
    """``value`` with whole floats turned back into ints, recursively."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


def none_if_empty(value: Any) -> Any:
    """``None`` for an empty dict, list or string: "not set" has one spelling in state."""
    return None if value in ({}, [], "") else value


def digest(value: Any) -> str | None:
    """A SHA-256 of ``value`` (a string or a JSON-able mapping) for change detection; None for None.

    Secret inputs are compared through their digest, so the plaintext never lands in outputs."""
    if value is None:
        return None
    text = value if isinstance(value, str) else json.dumps(value, sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()


def without_system_keys(current: Mapping[str, str] | None, previous: Mapping[str, str] | None) -> Any:
    """Labels or annotations as the user manages them: keys under ironpool's and IronCore's own
    domains (the poollet's pool label, say) are left out unless the user set them before."""
    kept = {k: v for k, v in (current or {}).items()
            if k in (previous or {}) or not _system_key(k)}
    return none_if_empty(kept)


def _system_key(key: str) -> bool:
    prefix = key.split("/", 1)[0] if "/" in key else ""
    return any(prefix == d or prefix.endswith("." + d) for d in ("ironpool.dev", "ironcore.dev"))
