# Copyright: ironpool contributors
# SPDX-License-Identifier: Apache-2.0
"""An in-memory stand-in for the apiserver with the client's raw methods, for unit tests.

It applies the API's real validation, defaulting and merge-patch code, so what the modules see
(canonical quantities, defaulted devices, immutable-field errors) is what the apiserver does.
"""

from __future__ import annotations

import copy
import itertools
import time
import uuid
from collections.abc import Iterator
from typing import Any

from ironpool.api.errors import AlreadyExists, NotFound
from ironpool.api.merge_patch import apply_merge_patch
from ironpool.api.resources import by_kind
from ironpool.api.selectors import parse_field_selector, parse_label_selector
from ironpool.api.validation import spec_of, validate_create, validate_update
from ironpool.client import ClientConfig
from ironpool.client.wire import ListResult

Obj = dict[str, Any]


class FakeClient:
    """Objects by (kind, namespace, name); every write is recorded in ``writes``."""

    def __init__(self) -> None:
        self.config = ClientConfig(server="http://fake.invalid", namespace="default")
        self.objects: dict[tuple[str, str | None, str], Obj] = {}
        self.writes: list[tuple[str, str, str]] = []
        self.field_managers: set[str | None] = set()
        self._rv = itertools.count(1)

    @classmethod
    def with_defaults(cls) -> FakeClient:
        """The example classes and one ready pool pair, as ``ironpool up`` would have them."""
        fake = cls()
        for doc in (
            {"apiVersion": "compute.ironcore.dev/v1alpha1", "kind": "MachineClass",
             "metadata": {"name": "x-small"}, "capabilities": {"cpu": "1", "memory": "256Mi"}},
            {"apiVersion": "storage.ironcore.dev/v1alpha1", "kind": "VolumeClass",
             "metadata": {"name": "fast"}, "capabilities": {"tps": "100Mi", "iops": "1000"},
             "resizePolicy": "ExpandOnly"},
        ):
            fake.seed(doc)
        return fake

    def seed(self, obj: Obj) -> Obj:
        info = by_kind(obj["apiVersion"], obj["kind"])
        stored = self.create_raw(info, obj)
        self.writes.clear()
        self.field_managers.clear()
        return stored

    def __enter__(self) -> FakeClient:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    # -- the client's raw methods ------------------------------------------------------------

    def _key(self, info: Any, name: str, namespace: str | None) -> tuple[str, str | None, str]:
        return (info.kind, (namespace or self.config.namespace) if info.namespaced else None, name)

    def get_raw(self, info: Any, name: str, namespace: str | None = None) -> Obj:
        obj = self.objects.get(self._key(info, name, namespace))
        if obj is None:
            raise NotFound(message=f'{info.plural} "{name}" not found', kind=info.plural, name=name)
        return copy.deepcopy(obj)

    def list_raw(self, info: Any, namespace: str | None = None, label_selector: str | None = None,
                 field_selector: str | None = None, limit: int | None = None,
                 continue_: str | None = None) -> ListResult[Obj]:
        labels = parse_label_selector(label_selector)
        fields = parse_field_selector(field_selector)
        items = [
            copy.deepcopy(o) for (kind, ns, name), o in sorted(self.objects.items(), key=str)
            if kind == info.kind and name and (namespace is None or not info.namespaced or ns == namespace)
            and labels.matches((o.get("metadata") or {}).get("labels")) and fields.matches(o)
        ]
        return ListResult(items, str(next(self._rv)))

    def create_raw(self, info: Any, obj: Obj, namespace: str | None = None, dry_run: bool = False,
                   field_manager: str | None = None) -> Obj:
        self.field_managers.add(field_manager)
        body = copy.deepcopy(obj)
        meta = body.setdefault("metadata", {})
        if info.namespaced:
            meta["namespace"] = namespace or meta.get("namespace") or self.config.namespace
        key = self._key(info, meta["name"], meta.get("namespace"))
        out = validate_create(info, body)
        if key in self.objects:
            raise AlreadyExists(message=f'{info.plural} "{meta["name"]}" already exists')
        out["metadata"].update(uid=str(uuid.uuid4()), resourceVersion=str(next(self._rv)), generation=1)
        if not dry_run:
            self.objects[key] = out
            self.writes.append(("create", info.kind, meta["name"]))
        return copy.deepcopy(out)

    def patch_raw(self, info: Any, name: str, patch: Obj, namespace: str | None = None,
                  subresource: str | None = None, dry_run: bool = False,
                  field_manager: str | None = None) -> Obj:
        self.field_managers.add(field_manager)
        old = self.get_raw(info, name, namespace)
        new = validate_update(info, old, apply_merge_patch(old, patch))
        if spec_of(info, new) != spec_of(info, old):
            new["metadata"]["generation"] = int(old["metadata"].get("generation") or 1) + 1
        new["metadata"]["resourceVersion"] = str(next(self._rv))
        if "status" in old:
            new["status"] = old["status"]
        if not dry_run:
            self.objects[self._key(info, name, namespace)] = new
            self.writes.append(("patch", info.kind, name))
        return copy.deepcopy(new)

    def delete_raw(self, info: Any, name: str, namespace: str | None = None,
                   resource_version: str | None = None, dry_run: bool = False) -> Obj | None:
        self.get_raw(info, name, namespace)
        if not dry_run:
            del self.objects[self._key(info, name, namespace)]
            self.writes.append(("delete", info.kind, name))
        return None

    def watch_raw(self, info: Any, namespace: str | None = None, resource_version: str | None = None,
                  label_selector: str | None = None, field_selector: str | None = None,
                  timeout_seconds: int | None = None, allow_bookmarks: bool = True) -> Iterator[Any]:
        """Nothing changes in this store by itself: like the apiserver, end the stream after
        ``timeout_seconds`` without an event."""
        time.sleep(timeout_seconds or 0)
        return iter(())

    # -- helpers for tests -------------------------------------------------------------------

    def stored(self, kind: str, name: str, namespace: str | None = "default") -> Obj | None:
        for (k, ns, n), obj in self.objects.items():
            if k == kind and n == name and (ns == namespace or ns is None):
                return obj
        return None

    def set_status(self, kind: str, name: str, status: Obj, namespace: str | None = "default") -> None:
        obj = self.stored(kind, name, namespace)
        assert obj is not None, f"{kind} {name} does not exist"
        obj["status"] = status
