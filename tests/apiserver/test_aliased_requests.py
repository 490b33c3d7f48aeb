"""Requests through an alias group, below the HTTP layer: a path resolved without a scan of the resource
table, bodies put in the stored group, answers in the group asked, and a request through the own group
passed through untouched (the serving cost of IronCore's groups stays what it was)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from ironpool.api import errors, resources
from ironpool.apiserver.endpoints.aliased import served_doc, served_raw, stored_body
from ironpool.apiserver.endpoints.request_parsing import parse_path


def test_resolving_a_request_path_does_not_scan_the_table(monkeypatch: pytest.MonkeyPatch) -> None:
    """Serving an alias must not slow the IronCore groups: a path is one lookup for either group."""

    class NoScan(tuple[Any, ...]):
        def __iter__(self) -> Any:
            raise AssertionError("the resource table was scanned to resolve a request")

    for table in ("RESOURCES", "ALIASES", "SERVED"):
        monkeypatch.setattr(resources, table, NoScan(getattr(resources, table)))
    own = parse_path("/apis/compute.ironcore.dev/v1alpha1/namespaces/default/machines/web/status")
    assert own.served is own.info and not own.aliased and own.group == "compute.ironcore.dev"
    alias = parse_path("/apis/compute.openkcm.dev/v1alpha1/namespaces/default/machines/web/status")
    assert alias.aliased and alias.info is own.info and alias.group == "compute.openkcm.dev"
    assert alias.subresource is own.subresource and alias.resource == "machines/status"
    with pytest.raises(errors.NotFound):  # paths are matched exactly, as in Kubernetes
        parse_path("/apis/compute.OpenKCM.dev/v1alpha1/machines")


def test_a_request_through_the_own_group_is_passed_through_untouched() -> None:
    own = parse_path("/apis/compute.ironcore.dev/v1alpha1/namespaces/default/machines/web")
    alias = parse_path("/apis/compute.openkcm.dev/v1alpha1/namespaces/default/machines/web")
    raw = b'{"apiVersion":"compute.ironcore.dev/v1alpha1","kind":"Machine","metadata":{"name":"web"}}'
    doc = {"apiVersion": "compute.ironcore.dev/v1alpha1", "kind": "Machine", "metadata": {"name": "web"}}
    assert served_raw(own, raw) is raw and served_doc(own, doc) is doc  # no copy, no decoding
    body = dict(doc)
    stored_body(own, body)
    assert body == doc
    assert served_raw(alias, raw) == raw.replace(b"ironcore", b"openkcm", 1)
    assert served_doc(alias, doc)["apiVersion"] == "compute.openkcm.dev/v1alpha1"
    assert doc["apiVersion"] == "compute.ironcore.dev/v1alpha1"  # the stored (maybe cached) one is left alone
    # JSON laid out otherwise (apiVersion not first) is decoded and put in the alias all the same.
    reordered = b'{"kind":"Machine","apiVersion":"compute.ironcore.dev/v1alpha1"}'
    assert json.loads(served_raw(alias, reordered)) == {"kind": "Machine",
                                                        "apiVersion": "compute.openkcm.dev/v1alpha1"}
    written = {**doc, "apiVersion": "compute.OpenKCM.dev/v1alpha1"}
    stored_body(alias, written)
    assert written["apiVersion"] == "compute.ironcore.dev/v1alpha1"
