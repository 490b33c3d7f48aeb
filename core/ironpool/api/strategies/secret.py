"""Secret: opaque data (Ignition configs, volume access), namespaced; stored as Kubernetes does."""

from __future__ import annotations

import base64
import binascii

from ironpool.api import errors
from ironpool.api.columns import AGE, NAME, Column, count, field
from ironpool.api.core import CORE_GROUP, CORE_VERSION, Secret
from ironpool.api.fieldpath import FieldErrors, child, secret_key
from ironpool.api.resource_info import ResourceInfo
from ironpool.api.rules import immutable
from ironpool.api.strategy import Obj, Strategy

_MAX_BYTES = 1024 * 1024


class SecretStrategy(Strategy[Secret]):
    """Keys and sizes as Kubernetes checks them; ``stringData`` folded into ``data``."""

    info = ResourceInfo(CORE_GROUP, CORE_VERSION, "Secret", "secrets", "secret", (), True, Secret, False)
    columns = (NAME, Column("TYPE", field("type")), Column("DATA", count("data")), AGE)

    def validate(self, obj: Secret, errs: FieldErrors) -> None:
        total = 0
        for k, v in (obj.data or {}).items():
            p = child("data", k)
            for msg in secret_key(k):
                errs.invalid(p, k, msg)
            try:
                total += len(base64.b64decode(v, validate=True))
            except (binascii.Error, ValueError):
                errs.invalid(p, "<secret contents redacted>", "must be base64-encoded data")
        for k, v in (obj.string_data or {}).items():
            for msg in secret_key(k):
                errs.invalid(child("stringData", k), k, msg)
            total += len(v.encode())
        if total > _MAX_BYTES:
            errs.add(errors.Cause(field="data", message=f"Too long: must have at most {_MAX_BYTES} bytes",
                                  reason="FieldValueTooLong"))
        if not obj.type:
            errs.required("type")

    def canonicalize(self, obj: Obj) -> None:
        """Fold write-only ``stringData`` into ``data`` (base64), as Kubernetes stores Secrets."""
        string_data = obj.pop("stringData", None)
        if string_data:
            data = dict(obj.get("data") or {})
            for k, v in string_data.items():
                data[k] = base64.b64encode(v.encode()).decode()
            obj["data"] = data

    def validate_update(self, old: Obj, new: Obj, errs: FieldErrors) -> None:
        if old.get("immutable"):
            if not new.get("immutable"):
                errs.forbidden("immutable", "field is immutable when `immutable` is set")
            if old.get("data") != new.get("data"):
                errs.forbidden("data", "field is immutable when `immutable` is set")
        immutable(old, new, ("type",), errs)
