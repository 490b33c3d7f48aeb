"""Labels read from stored JSON, and selections matched on it: the stores' own layouts are read
without decoding the document, any other layout is left to a decode (None), and never misread."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from ironpool.apiserver.registry.selection import Selection
from ironpool.apiserver.registry.stored_labels import stored_labels
from ironpool.store import etcd_codec

LABELS = {"app": "web", "example.com/tier": "front", "empty": ""}


def secret(labels: dict[str, Any] | None = LABELS, **extra: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": "s1", "namespace": "ns", "uid": "u-1", "generation": 1,
                            "creationTimestamp": "2026-11-28T00:00:00Z"}
    if labels is not None:
        meta["labels"] = labels
    meta["managedFields"] = [{"manager": "m", "operation": "Update", "fieldsType": "FieldsV1",
                              "fieldsV1": {"f:metadata": {"f:labels": {f"f:{k}": {} for k in labels or {}}}}}]
    meta["resourceVersion"] = "7"
    return {"apiVersion": "v1", "kind": "Secret", "metadata": meta, "type": "Opaque", **extra}


def decoded_labels(raw: bytes) -> dict[str, Any]:
    return orjson.loads(raw)["metadata"].get("labels") or {}


@pytest.mark.parametrize("doc", [
    secret(),
    secret(labels={}),
    secret(labels=None),
    secret(data={"labels": "bGFiZWxz"}),  # a key "labels" outside metadata, after it
])
def test_the_stores_layouts_are_read_without_a_decode(doc: dict[str, Any]) -> None:
    for raw in (orjson.dumps(doc), etcd_codec.raw_at(etcd_codec.encode(doc), 9)):
        assert stored_labels(raw) == decoded_labels(raw)


def test_labels_elsewhere_before_metadata_are_not_taken_for_its_own() -> None:
    template = {"template": {"metadata": {"labels": {"app": "other"}}}}
    doc = {"apiVersion": "v1", "kind": "X", "spec": template, "metadata": {"name": "x", "labels": LABELS}}
    assert stored_labels(orjson.dumps(doc)) is None
    doc = {"apiVersion": "v1", "kind": "X", "spec": template, "metadata": {"name": "x"}}
    assert stored_labels(orjson.dumps(doc)) is None


@pytest.mark.parametrize("raw", [
    # a key ending in "labels" whose quote is escaped: not the key labels
    b'{"metadata":{"annotations":{"a\\"labels":"{}"},"labels":{"app":"web"}}}',
    # labels after a nested object of metadata, and labels whose values are not strings
    b'{"metadata":{"ownerReferences":[{"labels":{"x":"y"}}],"labels":{"app":"web"}}}',
    b'{"metadata":{"labels":{"app":{"nested":"}"}}}}',
    b'{"metadata":{"labels":{"app":"a}b"}}}',
    b'{"metadata":{"labels":{"app":["x"],"b":"c"}}}',
    b'{"metadata":{"labels":null}}',
    b'{"metadata": {"labels": {"app": "web"}}}',  # not compact
    b'{"kind":"labels","metadata":{"labels":{"app":"web"}}}',
    b'{"metadata":{"name":"labels","labels":{"app":"web"}}}',
    b'{"metadata":{},"metadata":{"labels":{"app":"web"}}}',
])
def test_other_layouts_are_decoded_or_read_right(raw: bytes) -> None:
    found = stored_labels(raw)
    assert found is None or found == decoded_labels(raw)


def test_a_string_value_with_labels_in_it_is_read_right() -> None:
    raw = orjson.dumps(secret(data={"k": '"labels":{"app":"evil"}'}))
    assert stored_labels(raw) == LABELS
    raw = orjson.dumps({"metadata": {"name": "x", "annotations": {"a": ',"labels":{"app":"evil"}'}}})
    assert stored_labels(raw) in (None, {})


SELECTORS = [("app=web", ""), ("app in (web,db),example.com/tier", ""), ("app!=web", ""), ("!empty", ""),
             ("", "metadata.name=s1"), ("app=web", "metadata.name=s2"), ("empty=", "type=Opaque")]


@pytest.mark.parametrize(("labels", "fields"), SELECTORS)
def test_a_selection_matches_stored_json_as_it_matches_the_decoded_object(labels: str, fields: str) -> None:
    selection = Selection.parse(labels, fields)
    assert selection is not None
    docs = [secret(), secret(labels={"app": "db"}), secret(labels=None),
            {"spec": {"template": {"metadata": {"labels": {"app": "web"}}}}, "metadata": {"name": "s1"}}]
    for doc in docs:
        raw = orjson.dumps(doc)
        assert selection.matches_stored(raw) == selection.matches(orjson.loads(raw)), (labels, fields, doc)


def test_no_selector_is_no_selection() -> None:
    assert Selection.parse("", "") is None
