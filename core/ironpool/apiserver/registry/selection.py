"""What a list or a watch selects: its label and field selectors, parsed once, and matched against a
decoded object (a watch's events) or against an object's stored JSON (a list's rows).

Matching stored JSON decodes no more than it must: the labels alone (:mod:`.stored_labels`), and the
whole document only for a field selector once the labels match, or when the labels cannot be read
alone. A label selector over a collection then costs a fraction of decoding every document.
"""

from __future__ import annotations

from dataclasses import dataclass

import orjson

from ironpool.api.selectors import FieldSelector, LabelSelector, parse_field_selector, parse_label_selector
from ironpool.apiserver.registry.stored_labels import stored_labels
from ironpool.store.interface import Document


@dataclass(frozen=True)
class Selection:
    """A label selector, a field selector, or both (a ``None`` one selects everything)."""

    labels: LabelSelector | None
    fields: FieldSelector | None

    @classmethod
    def parse(cls, label_selector: str, field_selector: str) -> Selection | None:
        """The selection of a request's ``labelSelector`` and ``fieldSelector`` (None when it gives
        neither); 400 for a malformed or oversized selector."""
        labels = parse_label_selector(label_selector) if label_selector else None
        fields = parse_field_selector(field_selector) if field_selector else None
        return None if labels is None and fields is None else cls(labels, fields)

    def matches(self, obj: Document) -> bool:
        if self.labels is not None and not self.labels.matches(obj.get("metadata", {}).get("labels") or {}):
            return False
        return self.fields is None or bool(self.fields.matches(obj))

    def matches_stored(self, raw: bytes) -> bool:
        """:meth:`matches` for the document whose stored JSON is ``raw``."""
        if self.labels is not None:
            labels = stored_labels(raw)
            if labels is None:
                return self.matches(orjson.loads(raw))
            if not self.labels.matches(labels):
                return False
        return self.fields is None or bool(self.fields.matches(orjson.loads(raw)))
