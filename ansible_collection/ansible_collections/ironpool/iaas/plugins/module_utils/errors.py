# Copyright: ironpool contributors
# SPDX-License-Identifier: Apache-2.0
"""Turning apiserver errors into task failures that name the module option at fault.

The apiserver names the field path of every invalid value (``spec.machineClassRef.name``); a module
maps those paths to its own options (``machine_class``) so the user reads the name they typed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any


class OptionError(Exception):
    """A module option is wrong; the message starts with the option's name."""


class ImmutableChange(OptionError):
    """The object exists and a field it cannot change differs; ``force`` would recreate it."""


def option_for(path: str, fields: Mapping[str, str]) -> str | None:
    """The option behind an API field path: the longest prefix of ``path`` in ``fields``."""
    best: str | None = None
    best_len = -1
    for prefix, option in fields.items():
        if (path == prefix or path.startswith((prefix + ".", prefix + "["))) and len(prefix) > best_len:
            best, best_len = option, len(prefix)
    return best


def cause_text(field: str, message: str, fields: Mapping[str, str]) -> str:
    """``machine_class: Invalid value ... (spec.machineClassRef.name)``, or the path alone."""
    option = option_for(field, fields) if field else None
    if option:
        return f"{option}: {message} ({field})"
    return f"{field}: {message}" if field else message


def describe_api_error(exc: Any, fields: Mapping[str, str], what: str = "") -> str:
    """One line for an ApiError: each cause with its option, or the server's message."""
    causes: Iterable[Any] = getattr(exc, "causes", None) or ()
    parts = [cause_text(c.field, c.message, fields) for c in causes]
    body = "; ".join(parts) if parts else str(exc)
    return f"{what}: {body}" if what else body


def immutable_causes(exc: Any) -> list[Any]:
    """The causes of an Invalid error that are about fields an existing object cannot change."""
    causes = list(getattr(exc, "causes", None) or ())
    markers = ("field is immutable", "must not be removed", "must not be cleared", "must not be set")
    return [c for c in causes if any(m in c.message for m in markers)]
