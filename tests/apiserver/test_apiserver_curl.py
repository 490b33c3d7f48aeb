"""The issue's done-when list, literally with curl (its default Content-Type included)."""

from __future__ import annotations

import json
import shutil
import subprocess
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from tests.conftest import ApiServer

MACHINES = "/apis/compute.ironcore.dev/v1alpha1/namespaces/default/machines"

pytestmark = pytest.mark.skipif(shutil.which("curl") is None, reason="curl is not installed")


def curl(
    server: ApiServer,
    method: str,
    path: str,
    data: str | None = None,
    token: str | None = "admin",
    *headers: str,
) -> tuple[int, dict[str, object]]:
    args = ["curl", "-s", "-X", method, "-w", "\n%{http_code}"]
    if token == "admin":
        args += ["-H", f"Authorization: Bearer {server.admin_token}"]
    elif token is not None:
        args += ["-H", f"Authorization: Bearer {token}"]
    for h in headers:
        args += ["-H", h]
    if data is not None:
        args += ["-d", data]
    out = subprocess.run(
        [*args, server.url + path], capture_output=True, text=True, check=True, timeout=30
    ).stdout
    body, _, code = out.rpartition("\n")
    return int(code), (json.loads(body) if body.strip() else {})


def revision(server: ApiServer) -> str:
    code, body = curl(server, "GET", MACHINES)
    assert code == 200
    return str(body["metadata"]["resourceVersion"])  # type: ignore[index]


def test_done_when_list_with_curl(apiserver: ApiServer) -> None:
    code, body = curl(apiserver, "POST", MACHINES, '{"metadata":{"name":"m1"},"spec":{}}')
    assert code == 422
    assert "spec.machineClassRef" in [c["field"] for c in body["details"]["causes"]]  # type: ignore[index]

    code, created = curl(
        apiserver, "POST", MACHINES, '{"metadata":{"name":"m1"},"spec":{"machineClassRef":{"name":"c"}}}'
    )
    assert code == 201
    old_rv = created["metadata"]["resourceVersion"]  # type: ignore[index]
    assert curl(apiserver, "PATCH", f"{MACHINES}/m1", '{"metadata":{"labels":{"a":"b"}}}')[0] == 200
    before = revision(apiserver)

    stale = json.dumps(
        {
            "metadata": {"name": "m1", "resourceVersion": old_rv},
            "spec": {"machineClassRef": {"name": "c"}, "power": "Off"},
        }
    )
    assert curl(apiserver, "PUT", f"{MACHINES}/m1", stale)[0] == 409
    assert (
        curl(
            apiserver,
            "PATCH",
            f"{MACHINES}/m1",
            '{"spec":{"machineClassRef":{"name":"d"}}}',
            "admin",
            "Content-Type: application/merge-patch+json",
        )[0]
        == 422
    )
    assert curl(apiserver, "PATCH", f"{MACHINES}/m1", '{"spec":{"machineClassRef":{"name":"d"}}}')[0] == 422
    assert curl(apiserver, "POST", MACHINES, '{"metadata":')[0] == 400
    assert curl(apiserver, "GET", "/apis/compute.ironcore.dev/v1alpha1/widgets")[0] == 404
    assert curl(apiserver, "GET", MACHINES, None, None)[0] == 401
    assert (
        curl(
            apiserver,
            "POST",
            MACHINES,
            '{"metadata":{"name":"m2"},"spec":{"machineClassRef":{"name":"c"}}}',
            "wrong",
        )[0]
        == 401
    )
    assert revision(apiserver) == before
    code, got = curl(apiserver, "GET", f"{MACHINES}/m1")
    assert code == 200 and got["metadata"]["resourceVersion"] == before  # type: ignore[index]
