"""JSON Patch (RFC 6902, ``application/json-patch+json``) as Kubernetes applies it, through the
``jsonpatch`` library.

A patch is a list of operations (``add``, ``remove``, ``replace``, ``move``, ``copy``, ``test``);
one that cannot be read is a 400, one that does not apply to the object (a path that is not there,
a ``test`` that fails) a 422, as in Kubernetes. A patch may hold at most
:data:`MAX_OPERATIONS` operations (Kubernetes' limit) and copy at most :data:`MAX_COPIED_BYTES`
bytes in all: each ``copy`` can double the object, so a few hundred bytes of copies would
otherwise build gigabytes before the size check of the result.
"""

from __future__ import annotations

import copy
from typing import Any

import jsonpatch
import jsonpointer
import orjson

from ironpool.api import errors
from ironpool.apiserver.registry.objectmeta import MAX_OBJECT_BYTES, RequestEntityTooLarge

MAX_OPERATIONS = 10_000
MAX_COPIED_BYTES = 2 * MAX_OBJECT_BYTES


Operation = tuple[dict[str, Any], jsonpatch.JsonPatch]
"""One operation as sent, and as the library applies it."""


def parse_json_patch(patch: Any) -> list[Operation]:
    """The operations of a JSON Patch; 400 for one that is not one, 413 past :data:`MAX_OPERATIONS`."""
    if not isinstance(patch, list):
        raise errors.BadRequest("a JSON patch must be a list of operations")
    if len(patch) > MAX_OPERATIONS:
        raise RequestEntityTooLarge(f"the allowed maximum operations in a JSON patch is {MAX_OPERATIONS}, "
                                    f"got {len(patch)}")
    ops = []
    for i, op in enumerate(patch):
        if not isinstance(op, dict):
            raise errors.BadRequest(f"JSON patch operation {i}: must be an object")
        try:
            ops.append((op, jsonpatch.JsonPatch([op])))  # checks the operation's members
        except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException, TypeError) as exc:
            raise errors.BadRequest(f"JSON patch operation {i}: {exc}") from None
    return ops


def apply_json_patch(doc: Any, ops: list[Operation]) -> Any:
    """``doc`` with ``ops`` applied (a copy: ``doc`` is not changed); 422 when an operation does not
    apply, 413 past :data:`MAX_COPIED_BYTES` copied."""
    doc = copy.deepcopy(doc)
    copied = 0
    for i, (op, patch) in enumerate(ops):
        try:
            if op.get("op") == "copy":
                source = jsonpointer.resolve_pointer(doc, op.get("from", ""))
                copied += len(orjson.dumps(source))
                if copied > MAX_COPIED_BYTES:
                    raise RequestEntityTooLarge(f"the JSON patch copies more than {MAX_COPIED_BYTES} bytes")
            doc = patch.apply(doc, in_place=True)
        except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException, TypeError, ValueError,
                KeyError, IndexError) as exc:
            message = f"JSON patch operation {i} ({op.get('op')} {op.get('path')}): {exc}"
            raise errors.Invalid(message, causes=[errors.Cause(f"patch[{i}]", str(exc))]) from None
    return doc
