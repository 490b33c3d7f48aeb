"""Label and field selectors: parsing, matching, formatting and errors."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from ironpool.api import errors
from ironpool.api.selectors import (
    LabelSelector,
    Requirement,
    parse_field_selector,
    parse_label_selector,
    selector_from_set,
)

LABELS = {"app": "web", "tier": "front", "topology.ironcore.dev/zone": "az1", "size": "5"}


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("", True),
        ("app=web", True),
        ("app==web", True),
        ("app!=web", False),
        ("app=db", False),
        ("missing!=x", True),
        ("app in (web,db)", True),
        ("app in (db)", False),
        ("app notin (db, cache)", True),
        ("missing notin (x)", True),
        ("app notin (web)", False),
        ("app", True),
        ("missing", False),
        ("!missing", True),
        ("!app", False),
        ("app=web,tier=front", True),
        ("app=web,tier=back", False),
        ("topology.ironcore.dev/zone=az1, app in (web)", True),
        ("size>4", True),
        ("size<4", False),
        ("missing=", False),
        ("  app = web  ", True),
    ],
)
def test_label_matching(selector: str, expected: bool) -> None:
    assert parse_label_selector(selector).matches(LABELS) is expected


def test_label_format_roundtrip() -> None:
    sel = parse_label_selector("tier in (b,a),app=web,!canary,zone")
    text = sel.format()
    assert text == "app=web,!canary,tier in (a,b),zone"
    assert parse_label_selector(text) == sel
    assert parse_label_selector("").empty and not sel.empty


def test_selector_from_set() -> None:
    sel = selector_from_set({"b": "2", "a": "1"})
    assert str(sel) == "a=1,b=2"
    assert sel.matches({"a": "1", "b": "2", "c": "3"})
    assert not sel.matches({"a": "1"})
    assert selector_from_set(None).empty


@pytest.mark.parametrize(
    "bad",
    [
        "app in ()",
        "app in web",
        "=web",
        "app=web,",
        "a b",
        "app=(x",
        "bad key!=1",
        "app=" + "x" * 64,
        "size>abc",
        "app=web,,tier=x",
    ],
)
def test_label_errors_name_the_parameter(bad: str) -> None:
    with pytest.raises(errors.BadRequest) as exc:
        parse_label_selector(bad)
    assert exc.value.message.startswith("labelSelector: ")


OBJ = {
    "metadata": {"name": "web-1", "namespace": "default"},
    "spec": {"machinePoolRef": {"name": "pool-a"}, "power": "On", "count": 3, "flag": True},
}
UNBOUND = {"metadata": {"name": "web-2", "namespace": "default"}, "spec": {"power": "On"}}


@pytest.mark.parametrize(
    ("selector", "bound", "unbound"),
    [
        ("spec.machinePoolRef.name=pool-a", True, False),
        ("spec.machinePoolRef.name==pool-a", True, False),
        ("spec.machinePoolRef.name=", False, True),
        ("spec.machinePoolRef.name!=", True, False),
        ("spec.machinePoolRef.name!=pool-a", False, True),
        ("metadata.name=web-1", True, False),
        ("metadata.namespace=default,metadata.name=web-2", False, True),
        ("spec.count=3", True, False),
        ("spec.flag=true", True, False),
        ("", True, True),
    ],
)
def test_field_matching(selector: str, bound: bool, unbound: bool) -> None:
    sel = parse_field_selector(selector)
    assert sel.matches(OBJ) is bound
    assert sel.matches(UNBOUND) is unbound


def test_field_requirements_and_format() -> None:
    sel = parse_field_selector("spec.machinePoolRef.name=,metadata.name!=a\\,b")
    assert sel.requirements == [("spec.machinePoolRef.name", "=", ""), ("metadata.name", "!=", "a,b")]
    assert parse_field_selector(sel.format()) == sel


@pytest.mark.parametrize("bad", ["spec.name", "=x", "a..b=1", "a=1,,b=2"])
def test_field_errors_name_the_parameter(bad: str) -> None:
    with pytest.raises(errors.BadRequest) as exc:
        parse_field_selector(bad)
    assert exc.value.message.startswith("fieldSelector: ")


_KEYS = st.sampled_from(["app", "tier", "example.com/zone", "x"])
_VALUES = st.sampled_from(["", "a", "b", "web", "v-1"])


@st.composite
def _requirement(draw: st.DrawFn) -> str:
    key = draw(_KEYS)
    kind = draw(st.sampled_from(["=", "==", "!=", "in", "notin", "exists", "!"]))
    if kind in ("in", "notin"):
        values = draw(st.lists(_VALUES.filter(bool), min_size=1, max_size=3))
        return f"{key} {kind} ({','.join(values)})"
    if kind == "exists":
        return key
    if kind == "!":
        return f"!{key}"
    return f"{key}{kind}{draw(_VALUES)}"


@given(
    reqs=st.lists(_requirement(), min_size=1, max_size=4),
    labels=st.dictionaries(_KEYS, _VALUES, max_size=4),
)
def test_label_selector_format_roundtrip_keeps_meaning(reqs: list[str], labels: dict[str, str]) -> None:
    sel = parse_label_selector(",".join(reqs))
    again = parse_label_selector(sel.format())
    assert again == sel
    assert again.matches(labels) == sel.matches(labels)


_KEYS = st.sampled_from(["a", "b", "c"])
_VALUES = st.sampled_from(["1", "2", "3"])
_SETS = st.lists(_VALUES, min_size=1, max_size=3)
_REQUIREMENTS = st.one_of(
    st.builds(lambda k, v: Requirement(k, "=", (v,)), _KEYS, _VALUES),
    st.builds(lambda k, v: Requirement(k, "!=", (v,)), _KEYS, _VALUES),
    st.builds(lambda k, vs: Requirement(k, "in", tuple(vs)), _KEYS, _SETS),
    st.builds(lambda k, vs: Requirement(k, "notin", tuple(vs)), _KEYS, _SETS),
    st.builds(lambda k: Requirement(k, "exists"), _KEYS),
    st.builds(lambda k: Requirement(k, "!"), _KEYS),
    st.builds(lambda k, v: Requirement(k, "gt", (v,)), _KEYS, _VALUES),
)


@given(st.lists(_REQUIREMENTS, max_size=6), st.dictionaries(_KEYS, _VALUES))
def test_a_selector_matches_exactly_when_each_of_its_requirements_does(reqs: list[Requirement],
                                                                       labels: dict[str, str]) -> None:
    """The selector sorts its requirements by kind to match faster; the answer stays the conjunction
    (two equalities on one key with different values match nothing)."""
    assert LabelSelector(tuple(reqs)).matches(labels) == all(r.matches(labels) for r in reqs)
