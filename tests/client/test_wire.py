"""The pure request/response layer: paths, parameters, Status decoding, watch lines."""

from __future__ import annotations

import orjson
import pytest
from ironpool.api.compute import MachineClass
from ironpool.api.errors import Conflict, Expired, Invalid, NotFound
from ironpool.api.meta import object_key
from ironpool.api.resources import resolve
from ironpool.client.wire import (
    MERGE_PATCH,
    Operations,
    decode_body,
    parse_watch_line,
    resource_for_model,
)

OPS = Operations("default")
MACHINES = resolve("machines")
CLASSES = resolve("machineclass")


def test_paths_follow_the_contract() -> None:
    assert OPS.get_raw(CLASSES, "c1").request.path == "/apis/compute.ironcore.dev/v1alpha1/machineclasses/c1"
    # Namespaced object calls default to the configured namespace...
    assert (
        OPS.get_raw(MACHINES, "m1").request.path
        == "/apis/compute.ironcore.dev/v1alpha1/namespaces/default/machines/m1"
    )
    # ...lists without a namespace span all namespaces.
    assert OPS.list_raw(MACHINES).request.path == "/apis/compute.ironcore.dev/v1alpha1/machines"
    assert OPS.list_raw(resolve("secrets"), "ns1").request.path == "/api/v1/namespaces/ns1/secrets"
    status = OPS.patch_raw(MACHINES, "m1", {"status": {}}, "ns2", subresource="status").request
    assert status.path == "/apis/compute.ironcore.dev/v1alpha1/namespaces/ns2/machines/m1/status"
    assert status.content_type == MERGE_PATCH and status.method == "PATCH"


def test_create_uses_the_object_namespace_and_fills_type_meta() -> None:
    req = OPS.create_raw(MACHINES, {"metadata": {"name": "m", "namespace": "team"}}, dry_run=True).request
    assert req.path.endswith("/namespaces/team/machines")
    assert req.params == {"dryRun": "All"}
    assert req.body["apiVersion"] == "compute.ironcore.dev/v1alpha1" and req.body["kind"] == "Machine"


def test_list_and_watch_parameters() -> None:
    req = OPS.list_raw(
        CLASSES, label_selector="a=b", field_selector="metadata.name=x", limit=5, continue_="tok"
    ).request
    assert req.params == {
        "labelSelector": "a=b",
        "fieldSelector": "metadata.name=x",
        "limit": "5",
        "continue": "tok",
    }
    watch = OPS.watch_request(CLASSES, resource_version=42, timeout_seconds=30)
    assert watch.params == {
        "watch": "true",
        "resourceVersion": "42",
        "allowWatchBookmarks": "true",
        "timeoutSeconds": "30",
    }


def test_delete_with_precondition_sends_delete_options() -> None:
    req = OPS.delete_raw(CLASSES, "c", resource_version="7").request
    assert req.body == {
        "kind": "DeleteOptions",
        "apiVersion": "v1",
        "preconditions": {"resourceVersion": "7"},
    }
    assert OPS.delete_raw(CLASSES, "c").request.body is None


def test_empty_names_are_rejected() -> None:
    with pytest.raises(ValueError, match="name must not be empty"):
        OPS.get_raw(CLASSES, "")


def test_decode_status_errors_into_api_errors() -> None:
    status = {
        "kind": "Status",
        "status": "Failure",
        "reason": "Invalid",
        "code": 422,
        "message": "bad",
        "details": {"causes": [{"field": "capabilities.cpu", "message": "must be positive"}]},
    }
    with pytest.raises(Invalid) as info:
        decode_body(422, orjson.dumps(status))
    assert info.value.causes[0].field == "capabilities.cpu"
    with pytest.raises(Conflict):
        decode_body(409, orjson.dumps({"kind": "Status", "reason": "Conflict", "code": 409}))
    with pytest.raises(NotFound, match="no route"):
        decode_body(404, b"no route")  # not a Status: falls back to the HTTP code
    assert decode_body(200, b'{"a": 1}') == {"a": 1}


def test_watch_lines() -> None:
    ev = parse_watch_line(b'{"type": "ADDED", "object": {"metadata": {"name": "a", "resourceVersion": "9"}}}')
    assert ev is not None and ev.type == "ADDED" and ev.resource_version == "9"
    assert parse_watch_line(b"  ") is None
    gone = {"type": "ERROR", "object": {"kind": "Status", "reason": "Expired", "code": 410, "message": "old"}}
    with pytest.raises(Expired):
        parse_watch_line(orjson.dumps(gone))


def test_model_registry_and_keys() -> None:
    assert resource_for_model(MachineClass) is CLASSES
    assert object_key({"metadata": {"name": "m", "namespace": "n"}}) == "n/m"
    assert object_key({"metadata": {"name": "c"}}) == "c"
