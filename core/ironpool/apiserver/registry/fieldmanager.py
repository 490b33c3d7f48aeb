"""Field ownership (``metadata.managedFields``, its entries: :mod:`.managed_fields`) and server-side
apply, in Kubernetes' format.

An object's fields are a set of leaf paths (``fieldsV1`` steps, see :mod:`.managed_fields`); which
lists are keyed or sets comes from the kind's :class:`~.schemas.Shape`, so every kind is tracked
the same way.

- An ordinary write (create, update, merge or strategic patch) gives its manager the fields it set
  or changed, takes changed fields from every other manager and drops removed fields everywhere
  (``operation: Update``).
- An apply (``PATCH`` with ``application/apply-patch+yaml``) merges the applied configuration into
  the object (:func:`merge_configuration`). Fields the configuration sets to a new value that another
  manager owns are conflicts: 409 naming each manager and field, unless ``force`` moves them to the
  applier. "New" is judged on the object as it will be stored, defaulted and canonical
  (:func:`apply_ownership`), as Kubernetes compares typed values: ``iops: "1000"`` applied over a
  stored ``1k`` changes nothing and conflicts with no one. Fields the applier owned before and no
  longer applies are removed, unless another manager owns them too. The applier's
  ``operation: Apply`` entry becomes exactly the configuration's fields.
- What a write sends as ``managedFields`` replaces the stored entries, and the entries are capped
  (:mod:`.managed_fields`).

Metadata the server owns (name, uid, resourceVersion, ...) and, for the main resource, the status
are never tracked, as in Kubernetes.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import orjson

from ironpool.api import errors
from ironpool.api.meta import now_rfc3339
from ironpool.api.resource_info import ResourceInfo
from ironpool.apiserver.registry.managed_fields import (
    APPLY,
    MAX_APPLY_MANAGERS,
    UPDATE,
    Entry,
    FieldSet,
    Obj,
    Path,
    cap_update_managers,
    entries_of,
    requested_entries,
    store_entries,
    too_many_appliers,
)
from ironpool.apiserver.registry.schemas import ANY, Shape, shape_of

_UNTRACKED_META = frozenset({
    "name", "namespace", "uid", "resourceVersion", "generation", "creationTimestamp", "deletionTimestamp",
    "deletionGracePeriodSeconds", "managedFields", "selfLink", "generateName",
})
_UNTRACKED_TOP = frozenset({"apiVersion", "kind"})


def _item_step(item: Any, shape: Shape) -> str:
    keys = {k: item.get(k) for k in shape.keys} if isinstance(item, dict) else {}
    return "k:" + orjson.dumps(keys).decode()


def _value_step(value: Any) -> str:
    return "v:" + orjson.dumps(value).decode()


def _walk(value: Any, shape: Shape, prefix: Path) -> Iterator[Path]:
    """The leaf paths of ``value``."""
    if isinstance(value, dict) and value and shape.kind in ("struct", "map", "any"):
        for key, sub in value.items():
            yield from _walk(sub, shape.child(key), (*prefix, f"f:{key}"))
    elif isinstance(value, list) and shape.kind == "list_map":
        elem = shape.elem or ANY
        for item in value:
            step = (*prefix, _item_step(item, shape))
            yield (*step, ".")
            if isinstance(item, dict):
                yield from _walk(item, elem, step)
    elif isinstance(value, list) and shape.kind == "set":
        for item in value:
            yield (*prefix, _value_step(item))
    else:
        yield prefix


def _tracked(obj: Obj, info: ResourceInfo, subresource: str | None) -> Obj:
    """The part of ``obj`` whose fields are owned: the status for the status subresource, else
    everything but status and server-owned metadata."""
    if subresource == "status":
        return {"status": obj["status"]} if obj.get("status") is not None else {}
    skip = _UNTRACKED_TOP | ({"status"} if info.has_status else set())
    out = {k: v for k, v in obj.items() if k not in skip}
    meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k not in _UNTRACKED_META}
    if meta:
        out["metadata"] = meta
    else:
        out.pop("metadata", None)
    return out


def field_set(obj: Obj, info: ResourceInfo, subresource: str | None = None) -> FieldSet:
    """Every tracked leaf path of ``obj``."""
    return frozenset(p for p in _walk(_tracked(obj, info, subresource), shape_of(info), ()) if p)


def value_at(obj: Any, path: Path, shape: Shape) -> Any:
    """The value at ``path`` (``.`` of a list item: whether the item is there); None when absent."""
    cur, sh = obj, shape
    for step in path:
        if step == ".":
            return cur is not None
        kind, _, rest = step.partition(":")
        if kind == "f":
            cur = cur.get(rest) if isinstance(cur, dict) else None
            sh = sh.child(rest)
        elif kind == "k":
            wanted = orjson.loads(rest)
            items = cur if isinstance(cur, list) else []
            cur = next((i for i in items if isinstance(i, dict)
                        and all(i.get(k) == v for k, v in wanted.items())), None)
            sh = sh.elem or ANY
        elif kind == "v":
            value = orjson.loads(rest)
            return isinstance(cur, list) and value in cur
        if cur is None:
            return None
    return cur


def _same_scope(entry: Entry, subresource: str | None) -> bool:
    return (entry.subresource or None) == (subresource or None)


def track_create(info: ResourceInfo, obj: Obj, manager: str, applied: FieldSet | None = None) -> None:
    """Give ``manager`` every field of the new ``obj`` (or, for an apply, the configuration's fields)."""
    if applied is None:
        entry = Entry(manager, UPDATE, info.api_version, field_set(obj, info), None, now_rfc3339())
    else:
        entry = Entry(manager, APPLY, info.api_version, applied, None, now_rfc3339())
    store_entries(obj, [entry])

def track_update(info: ResourceInfo, old: Obj, new: Obj, manager: str, subresource: str | None = None,
                 requested: Any = None) -> None:
    """Record an ordinary write of ``new`` over ``old`` in ``new``'s managedFields (``requested``:
    the managedFields the write sent, see :func:`requested_entries`; a subresource's are ignored)."""
    shape = shape_of(info)
    before, after = field_set(old, info, subresource), field_set(new, info, subresource)
    changed = {p for p in after if p not in before or value_at(new, p, shape) != value_at(old, p, shape)}
    removed = before - after
    sent = requested_entries(requested) if subresource is None else None
    entries = entries_of(old) if sent is None else sent
    mine: Entry | None = None
    for e in entries:
        if not _same_scope(e, subresource):
            continue
        e.fields = frozenset(e.fields - removed - changed)
        if e.ident == (manager, UPDATE, subresource):
            mine = e
    if changed or mine is not None:
        if mine is None:
            mine = Entry(manager, UPDATE, info.api_version, frozenset(), subresource)
            entries.append(mine)
        if changed:
            mine.fields = frozenset(mine.fields | changed)
            mine.time = now_rfc3339()
    store_entries(new, cap_update_managers([e for e in entries if e.fields]))

# -- server-side apply ---------------------------------------------------------------------------

def _merge(live: Any, config: Any, shape: Shape) -> Any:
    """``config`` merged into ``live``: structs and maps field by field, keyed lists item by item,
    sets by value, everything else replaced."""
    if isinstance(config, dict) and isinstance(live, dict) and shape.kind in ("struct", "map", "any"):
        out = dict(live)
        for key, value in config.items():
            out[key] = _merge(live.get(key), value, shape.child(key))
        return out
    if isinstance(config, list) and isinstance(live, list) and shape.kind == "list_map":
        out_list = list(live)
        elem = shape.elem or ANY
        for item in config:
            step = _item_step(item, shape)
            at = next((i for i, cur in enumerate(out_list) if _item_step(cur, shape) == step), None)
            if at is None:
                out_list.append(copy.deepcopy(item))
            else:
                out_list[at] = _merge(out_list[at], item, elem)
        return out_list
    if isinstance(config, list) and isinstance(live, list) and shape.kind == "set":
        return live + [v for v in config if v not in live]
    return copy.deepcopy(config)


def _remove(obj: Any, path: Path, shape: Shape) -> None:
    """Remove the field, list item or set member at ``path`` from ``obj`` (in place)."""
    if not path or not isinstance(obj, dict | list):
        return
    step, rest = path[0], path[1:]
    kind, _, arg = step.partition(":")
    if kind == "f" and isinstance(obj, dict):
        if not rest:
            obj.pop(arg, None)
        elif arg in obj:
            _remove(obj[arg], rest, shape.child(arg))
            if obj[arg] in ({}, []) and rest[-1] != ".":
                obj.pop(arg)  # nothing of it is left that anyone set
    elif kind == "k" and isinstance(obj, list):
        at = next((i for i, item in enumerate(obj) if _item_step(item, shape) == step), None)
        if at is None:
            return
        if rest == (".",):
            obj.pop(at)
        else:
            _remove(obj[at], rest, shape.elem or ANY)
    elif kind == "v" and isinstance(obj, list):
        value = orjson.loads(arg)
        if value in obj:
            obj.remove(value)


def _describe(path: Path) -> str:
    """A path as Kubernetes prints it in conflicts: ``.spec.volumes[name="root"].device``."""
    out = ""
    for step in path:
        kind, _, arg = step.partition(":")
        if kind == "f":
            out += f".{arg}"
        elif kind == "k":
            keys = orjson.loads(arg).items()
            out += "[" + ",".join(f"{k}={orjson.dumps(v).decode()}" for k, v in keys) + "]"
        elif kind == "v":
            out += f"[={arg}]"
    return out


def merge_configuration(info: ResourceInfo, live: Obj, config: Obj, manager: str,
                        subresource: str | None = None) -> Obj:
    """The object after ``manager`` applies ``config`` to ``live``: the configuration merged in, and
    the fields ``manager`` applied before, no longer applies and no one else owns removed. Who owns
    what afterwards, and the conflicts, are :func:`apply_ownership`'s, on the object as stored."""
    shape = shape_of(info)
    applied = field_set(config, info, subresource)
    merged = _merge(live, _tracked(config, info, subresource), shape)
    entries = entries_of(live)
    mine = next((e for e in entries if e.ident == (manager, APPLY, subresource)), None)
    if mine is not None:
        others: set[Path] = set()
        for e in entries:
            if e is not mine and _same_scope(e, subresource):
                others |= e.fields
        for path in sorted(mine.fields - applied - others, key=len, reverse=True):
            _remove(merged, path, shape)
    return merged


def apply_ownership(info: ResourceInfo, live: Obj, new: Obj, config: Obj, manager: str, force: bool,
                    subresource: str | None = None) -> list[Entry]:
    """The managedFields entries after ``manager`` applied ``config`` to ``live``, making ``new`` (as
    it will be stored: defaulted, canonical); raises a 409 Conflict naming every field another
    manager owns whose value ``new`` changes (unless ``force``: then the applier takes them), and a
    422 when a new applier would pass :data:`MAX_APPLY_MANAGERS`."""
    shape = shape_of(info)
    applied = field_set(config, info, subresource)
    entries = entries_of(live)
    conflicts: list[tuple[Entry, Path]] = []
    for e in entries:
        if e.manager == manager or not _same_scope(e, subresource):
            continue
        for path in sorted(applied & e.fields):
            if value_at(new, path, shape) != value_at(live, path, shape):
                conflicts.append((e, path))
    if conflicts and not force:
        raise _conflict_error(info, live, conflicts)
    taken = {path for _, path in conflicts}
    mine = next((e for e in entries if e.ident == (manager, APPLY, subresource)), None)
    for e in entries:
        if e is not mine and _same_scope(e, subresource):
            e.fields = frozenset(e.fields - taken)
    if mine is None:
        appliers = {e.ident for e in entries if e.operation == APPLY and e.fields}
        if applied and len(appliers) >= MAX_APPLY_MANAGERS:
            raise too_many_appliers(len(appliers) + 1)
        mine = Entry(manager, APPLY, info.api_version, frozenset(), subresource)
        entries.append(mine)
    if mine.fields != applied or mine.time is None:
        mine.time = now_rfc3339()
    mine.fields, mine.api_version = applied, info.api_version
    return entries


def _conflict_error(info: ResourceInfo, live: Obj, conflicts: list[tuple[Entry, Path]]) -> errors.Conflict:
    causes = []
    lines = []
    for entry, path in conflicts:
        who = f'conflict with "{entry.manager}"'
        if entry.operation == UPDATE:
            who += f" using {entry.api_version}"
        causes.append(errors.Cause(_describe(path), who, "FieldManagerConflict"))
        lines.append(f"{who}: {_describe(path)}")
    count = len(conflicts)
    message = f"Apply failed with {count} conflict{'s' if count != 1 else ''}: " + "\n".join(lines)
    name = str((live.get("metadata") or {}).get("name") or "")
    return errors.Conflict(message, kind=info.plural, name=name, group=info.group, causes=causes)


def manager_from_user_agent(user_agent: str | None) -> str:
    """Kubernetes' default field manager: the user agent up to its first ``/``."""
    name = (user_agent or "").split("/", 1)[0].strip()
    return name[:128] or "unknown"
