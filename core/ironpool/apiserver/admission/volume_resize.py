"""IronCore's ``VolumeResizePolicy`` admission: a Volume's size changes only as its VolumeClass's
``resizePolicy`` allows (``Static``, IronCore's default: never; ``ExpandOnly``: it may grow, never
shrink). A refusal is 422 Invalid naming ``spec.resources.storage`` and the policy.

It judges the validated object right before the write (its ``guard``, which may read the store and
attaches no guard key: a policy changed at the same moment may go either way, as in IronCore). A
Volume whose class does not exist keeps its size (its policy is unknown; IronCore refuses too).
Volumes without class have no size to change (validation forbids ``spec.resources`` there).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import ClassVar

from ironpool.api.fieldpath import FieldErrors
from ironpool.api.quota import VOLUME, amount_of, class_of
from ironpool.api.resources import resolve
from ironpool.api.strategies.volume import resize_errors
from ironpool.api.validation import raise_if_invalid
from ironpool.apiserver.admission.plugin import AdmissionPlugin, Attributes, Guarded
from ironpool.store.interface import Document, Store

_VOLUME_CLASSES = resolve("volumeclass")
_SIZE = "spec.resources.storage"


def _size(doc: Document | None) -> int | None:
    raw = ((doc or {}).get("spec") or {}).get("resources") or {}
    value = raw.get("storage") if isinstance(raw, dict) else None
    return amount_of(value) if value is not None else None


class VolumeResizePolicy(AdmissionPlugin):
    """Refuses a Volume resize its class's resize policy does not allow (see the module docstring)."""

    name: ClassVar[str] = "VolumeResizePolicy"
    kinds: ClassVar[frozenset[str] | None] = frozenset({VOLUME})

    def __init__(self, store: Store) -> None:
        self.store = store

    @contextlib.asynccontextmanager
    async def guard(self, attrs: Attributes, guarded: Guarded) -> AsyncIterator[None]:
        if attrs.operation == "UPDATE" and attrs.subresource is None:
            await self._check(attrs)
        yield

    async def _check(self, attrs: Attributes) -> None:
        before, after = _size(attrs.old), _size(attrs.new)
        cls = class_of(VOLUME, attrs.new)
        if before is None or after is None or before == after or cls is None:
            return
        volume_class = await self.store.get(_VOLUME_CLASSES.key(None, cls))
        if volume_class is None:
            errs = FieldErrors()
            errs.forbidden(_SIZE, f'volume class "{cls}" does not exist: its resize policy is unknown, so '
                                  "the size cannot change")
        else:
            assert attrs.old is not None and attrs.new is not None
            errs = resize_errors(volume_class, attrs.old, attrs.new)
        raise_if_invalid(attrs.info, attrs.new or {}, errs)
