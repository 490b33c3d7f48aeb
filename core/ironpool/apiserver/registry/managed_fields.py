"""``metadata.managedFields``: its entries (a manager's fields for one operation and subresource),
their ``fieldsV1`` encoding, the entries a write sends itself, and the caps that keep them few.

A field set is a set of leaf paths; each step is written as in ``fieldsV1``: ``f:<field>`` for a
field or map key, ``k:{"name":"root"}`` for an item of a keyed list, ``v:"x"`` for an item of a
set, and ``.`` for the item itself. Who owns what, and server-side apply, are :mod:`.fieldmanager`'s.

- A write may set ``managedFields`` itself (kubectl does, moving a client-side apply's fields to its
  server-side apply manager): entries that are not empty replace the stored ones, ``[{}]`` clears
  them, and a malformed entry is a 422 naming it (:func:`requested_entries`).
- The entries stay few, whatever clients do: past :data:`MAX_UPDATE_MANAGERS` Update entries the
  oldest are merged into one ``ancient-changes`` entry (as Kubernetes caps them,
  :func:`cap_update_managers`), and an object takes at most :data:`MAX_APPLY_MANAGERS` Apply
  managers; a new one past that is refused with 422 (each entry costs every later write of the
  object a walk of its fields).
"""

from __future__ import annotations

from typing import Any

from ironpool.api import errors

Path = tuple[str, ...]
FieldSet = frozenset[Path]
Obj = dict[str, Any]

APPLY = "Apply"
UPDATE = "Update"
MAX_UPDATE_MANAGERS = 10  # Kubernetes' cap
MAX_APPLY_MANAGERS = 64
ANCIENT_CHANGES = "ancient-changes"  # Kubernetes' name for the merged oldest Update entries
_MANAGED = "metadata.managedFields"


# -- fieldsV1 ------------------------------------------------------------------------------------

def to_fields_v1(fields: FieldSet) -> Obj:
    """A field set as Kubernetes' ``fieldsV1`` tree."""
    root: Obj = {}
    for path in sorted(fields):
        node = root
        for step in path:
            node = node.setdefault(step, {})
    return root


def from_fields_v1(tree: Any) -> FieldSet:
    """The leaf paths of a ``fieldsV1`` tree."""
    out: set[Path] = set()

    def walk(node: Any, prefix: Path) -> None:
        if not isinstance(node, dict) or not node:
            if prefix:
                out.add(prefix)
            return
        for step, sub in node.items():
            walk(sub, (*prefix, step))

    walk(tree, ())
    return frozenset(out)


# -- managedFields entries -----------------------------------------------------------------------

class Entry:
    """One ``managedFields`` entry: a manager's fields for one operation (and subresource)."""

    def __init__(self, manager: str, operation: str, api_version: str, fields: FieldSet,
                 subresource: str | None = None, time: str | None = None) -> None:
        self.manager, self.operation, self.api_version = manager, operation, api_version
        self.fields, self.subresource, self.time = fields, subresource, time

    @property
    def ident(self) -> tuple[str, str, str | None]:
        return self.manager, self.operation, self.subresource

    @classmethod
    def parse(cls, raw: Any) -> Entry | None:
        if not isinstance(raw, dict) or not raw.get("manager"):
            return None
        if raw.get("fieldsType", "FieldsV1") != "FieldsV1":
            return None
        return cls(str(raw["manager"]), str(raw.get("operation") or UPDATE),
                   str(raw.get("apiVersion") or ""),
                   from_fields_v1(raw.get("fieldsV1") or {}), raw.get("subresource") or None, raw.get("time"))

    def to_json(self) -> Obj:
        out: Obj = {"manager": self.manager, "operation": self.operation, "apiVersion": self.api_version}
        if self.time:
            out["time"] = self.time
        out["fieldsType"] = "FieldsV1"
        out["fieldsV1"] = to_fields_v1(self.fields)
        if self.subresource:
            out["subresource"] = self.subresource
        return out


def entries_of(obj: Obj) -> list[Entry]:
    raw = (obj.get("metadata") or {}).get("managedFields") or []
    return [e for e in (Entry.parse(r) for r in raw) if e is not None]


def store_entries(obj: Obj, entries: list[Entry]) -> None:
    """Set ``obj``'s managedFields to ``entries`` (those that own something)."""
    kept = [e.to_json() for e in entries if e.fields]
    meta = dict(obj.get("metadata") or {})  # never the metadata of the stored object it came from
    if kept:
        meta["managedFields"] = kept
    else:
        meta.pop("managedFields", None)
    obj["metadata"] = meta


def requested_entries(requested: Any) -> list[Entry] | None:
    """The managedFields a write sent, as entries: None to keep the stored ones (none sent, or an
    empty list, as Kubernetes reads both), ``[]`` for ``[{}]`` (clear them); 422 naming a malformed
    entry (Kubernetes' ``ValidateManagedFields``)."""
    if not isinstance(requested, list) or not requested:
        if requested is not None and not isinstance(requested, list):
            raise _invalid(_MANAGED, "must be a list of managedFields entries")
        return None
    if requested == [{}]:
        return []
    causes: list[errors.Cause] = []
    for i, raw in enumerate(requested):
        at = f"{_MANAGED}[{i}]"
        if not isinstance(raw, dict):
            causes.append(errors.Cause(at, "must be an object", "FieldValueInvalid"))
            continue
        manager = raw.get("manager")
        if not isinstance(manager, str) or not manager or len(manager) > 128:
            causes.append(errors.Cause(f"{at}.manager", "must be a non-empty string of at most 128 "
                                                        "characters", "FieldValueInvalid"))
        if raw.get("operation") not in (APPLY, UPDATE):
            causes.append(errors.Cause(f"{at}.operation", "must be `Apply` or `Update`", "FieldValueInvalid"))
        if raw.get("fieldsType", "FieldsV1") != "FieldsV1":
            causes.append(errors.Cause(f"{at}.fieldsType", "must be `FieldsV1`", "FieldValueInvalid"))
        if not isinstance(raw.get("fieldsV1", {}), dict):
            causes.append(errors.Cause(f"{at}.fieldsV1", "must be an object", "FieldValueInvalid"))
        subresource = raw.get("subresource")
        if subresource is not None and (not isinstance(subresource, str) or len(subresource) > 256):
            causes.append(errors.Cause(f"{at}.subresource", "must be a string of at most 256 characters",
                                       "FieldValueInvalid"))
    if causes:
        raise errors.Invalid(f"{_MANAGED}: " + "; ".join(f"{c.field}: {c.message}" for c in causes),
                             causes=causes)
    entries = [e for e in (Entry.parse(r) for r in requested) if e is not None]
    appliers = {e.ident for e in entries if e.operation == APPLY}
    if len(appliers) > MAX_APPLY_MANAGERS:
        raise too_many_appliers(len(appliers))
    return entries


def cap_update_managers(entries: list[Entry]) -> list[Entry]:
    """``entries`` with at most :data:`MAX_UPDATE_MANAGERS` Update entries: the oldest merged into
    one ``ancient-changes`` entry per subresource (its time the newest merged one's), as Kubernetes
    does."""
    updates = [e for e in entries if e.operation == UPDATE]
    excess = len(updates) - MAX_UPDATE_MANAGERS
    if excess <= 0:
        return entries
    buckets = {e.subresource: e for e in updates if e.manager == ANCIENT_CHANGES}
    merged: set[int] = set()
    for e in sorted((e for e in updates if e.manager != ANCIENT_CHANGES), key=lambda e: e.time or ""):
        if excess <= 0:
            break
        bucket = buckets.get(e.subresource)
        if bucket is None:  # the oldest becomes the bucket: one entry fewer only from the next on
            buckets[e.subresource] = Entry(ANCIENT_CHANGES, UPDATE, e.api_version, e.fields, e.subresource,
                                           e.time)
            entries = [buckets[e.subresource] if x is e else x for x in entries]
            continue
        bucket.fields = frozenset(bucket.fields | e.fields)
        bucket.time = max(bucket.time or "", e.time or "") or None
        merged.add(id(e))
        excess -= 1
    return [e for e in entries if id(e) not in merged]


def too_many_appliers(count: int) -> errors.Invalid:
    message = (f"an object has at most {MAX_APPLY_MANAGERS} apply managers ({count} here); apply an "
               "empty configuration as a manager that no longer applies, to remove it")
    return errors.Invalid(f"{_MANAGED}: Too many: {message}",
                          causes=[errors.Cause(_MANAGED, f"Too many: {message}", "FieldValueTooMany")])


def _invalid(field: str, message: str) -> errors.Invalid:
    return errors.Invalid(f"{field}: Invalid value: {message}",
                          causes=[errors.Cause(field, f"Invalid value: {message}", "FieldValueInvalid")])
