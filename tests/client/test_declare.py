"""Declaring an object the way every front end does, against the real apiserver: the desired-state
patch, "unchanged" from the server's own dry run, what was declared before removed, the front end's
field manager on every write."""

from __future__ import annotations

from ironpool.api.resources import resolve
from ironpool.client import Client
from ironpool.client.config import ClientConfig
from ironpool.client.declare import Declarer, declared_view, desired_patch

SECRETS = resolve("secrets")


def test_desired_patch_declares_spec_labels_and_annotations_and_removes_what_was_dropped() -> None:
    desired = {"apiVersion": "v1", "kind": "Secret", "status": {"x": 1}, "data": {"a": "YQ=="},
               "metadata": {"name": "s", "uid": "u", "finalizers": ["f"], "labels": {"app": "web"}}}
    assert desired_patch(desired) == {"data": {"a": "YQ=="}, "metadata": {"labels": {"app": "web"}}}
    before = {"data": {"a": "YQ==", "b": "Yg=="}, "type": "Opaque",
              "metadata": {"labels": {"app": "web", "tier": "x"}, "annotations": {"n": "1"}}}
    assert desired_patch(desired, before) == {
        "data": {"a": "YQ==", "b": None}, "type": None,
        "metadata": {"labels": {"app": "web", "tier": None}, "annotations": None}}
    assert desired_patch({"spec": {"a": {}}}, {"spec": {"a": {"x": 1}}}) == {"spec": {"a": {"x": None}}}
    assert desired_patch({"metadata": {"name": "s"}}, {"metadata": {"labels": {"a": "b"}}}) == \
        {"metadata": {"labels": None}}
    assert declared_view({"status": {}, "metadata": {"name": "s", "resourceVersion": "3", "labels": {}}}) == \
        {"metadata": {"name": "s", "labels": {}}}


def test_present_creates_updates_and_reports_unchanged(config: ClientConfig) -> None:
    with Client(config) as client:
        declarer = Declarer(client, SECRETS, "default", "ironpool-test")
        doc = {"metadata": {"name": "s", "labels": {"app": "web"}}, "stringData": {"k": "v"}}
        created = declarer.present(doc, None)
        assert created.action == "created" and created.changed
        current = declarer.get("s")
        assert current is not None
        managers = {e["manager"] for e in current["metadata"]["managedFields"]}
        assert managers == {"ironpool-test"}
        # The server turns stringData into data: declaring the same again changes nothing.
        same = declarer.present({**doc, "data": current["data"]}, current)
        assert same.action == "unchanged"
        assert declarer.get("s")["metadata"]["resourceVersion"] == current["metadata"]["resourceVersion"]
        # A dry run predicts without writing; then the write, dropping what was declared before.
        planned = Declarer(client, SECRETS, "default", "ironpool-test", dry_run=True).present(
            {"metadata": {"name": "s", "labels": {"tier": "a"}}}, current,
            previous={"metadata": {"labels": {"app": "web"}}})
        assert planned.action == "updated" and planned.after["metadata"]["labels"] == {"tier": "a"}
        assert declarer.get("s")["metadata"]["labels"] == {"app": "web"}
        updated = declarer.present({"metadata": {"name": "s", "labels": {"tier": "a"}}}, current,
                                   previous={"metadata": {"labels": {"app": "web"}}})
        assert updated.action == "updated" and updated.obj["metadata"]["labels"] == {"tier": "a"}
        assert declarer.absent("s", updated.obj).action == "deleted"
        assert declarer.absent("s", declarer.get("s")).action == "absent"
