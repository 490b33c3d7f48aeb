"""JSON merge patch: the examples of RFC 7386 appendix A, and inputs are not modified."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from ironpool.api.merge_patch import apply_merge_patch

RFC7386 = [
    ({"a": "b"}, {"a": "c"}, {"a": "c"}),
    ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
    ({"a": "b"}, {"a": None}, {}),
    ({"a": "b", "b": "c"}, {"a": None}, {"b": "c"}),
    ({"a": ["b"]}, {"a": "c"}, {"a": "c"}),
    ({"a": "c"}, {"a": ["b"]}, {"a": ["b"]}),
    ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
    ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
    (["a", "b"], ["c", "d"], ["c", "d"]),
    ({"a": "b"}, ["c"], ["c"]),
    ({"a": "foo"}, None, None),
    ({"a": "foo"}, "bar", "bar"),
    ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
    ([1, 2], {"a": "b", "c": None}, {"a": "b"}),
    ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
]


@pytest.mark.parametrize(("target", "patch", "expected"), RFC7386)
def test_rfc7386_examples(target: Any, patch: Any, expected: Any) -> None:
    t0, p0 = copy.deepcopy(target), copy.deepcopy(patch)
    assert apply_merge_patch(target, patch) == expected
    assert target == t0 and patch == p0


def test_result_does_not_alias_patch_values() -> None:
    patch = {"spec": {"volumes": [{"name": "a"}]}}
    out = apply_merge_patch({"spec": {"power": "On"}}, patch)
    out["spec"]["volumes"][0]["name"] = "changed"
    assert patch["spec"]["volumes"][0]["name"] == "a"
    assert out["spec"]["power"] == "On"
