"""Bodies in Kubernetes protobuf (what kubectl's typed commands send), on an in-process apiserver:
the kinds read, and what a malformed or unexpected body gets (kubectl itself: tests/kubectl)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from ironpool.apiserver.app import build_app
from ironpool.apiserver.auth.authentication import Authenticator, parse_token_file
from ironpool.store.sqlite import SQLiteStore

PROTOBUF = {"Content-Type": "application/vnd.kubernetes.protobuf", "Authorization": "Bearer admin"}


def varint(n: int) -> bytes:
    out = b""
    while True:
        byte, n = n & 0x7F, n >> 7
        out += bytes([byte | (0x80 if n else 0)])
        if not n:
            return out


def field(number: int, value: bytes | bool) -> bytes:
    if isinstance(value, bool):
        return varint(number << 3) + varint(int(value))
    return varint(number << 3 | 2) + varint(len(value)) + value


def envelope(api_version: str, kind: str, raw: bytes) -> bytes:
    type_meta = field(1, api_version.encode()) + field(2, kind.encode())
    return b"k8s\x00" + field(1, type_meta) + field(2, raw)


def meta(name: str, **labels: str) -> bytes:
    entries = b"".join(field(11, field(1, k.encode()) + field(2, v.encode())) for k, v in labels.items())
    return field(1, name.encode()) + field(2, b"") + entries


@pytest.fixture
async def client(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    store = SQLiteStore(str(tmp_path / "pb.db"))
    app = build_app(store, Authenticator(parse_token_file('admin,admin,1,"system:masters"\n')))
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as c:
        yield c
    await app.state.apiserver.authorize.stop()
    await store.close()


async def test_namespace_secret_and_binding_from_protobuf(client: httpx.AsyncClient) -> None:
    namespace = envelope("v1", "Namespace", field(1, meta("pb", team="a")))
    r = await client.post("/api/v1/namespaces", content=namespace, headers=PROTOBUF)
    assert r.status_code == 201, r.text
    assert r.json()["metadata"]["labels"] == {"team": "a"} and "generateName" not in r.json()["metadata"]
    data = field(2, field(1, b"k") + field(2, b"\x00\xffbinary"))
    secret = field(1, meta("s")) + data + field(3, b"Opaque") + field(5, True)
    r = await client.post("/api/v1/namespaces/pb/secrets", content=envelope("v1", "Secret", secret),
                          headers=PROTOBUF)
    assert r.status_code == 201, r.text
    assert r.json()["data"] == {"k": "AP9iaW5hcnk="} and r.json()["immutable"] is True
    binding = field(1, meta("b")) + field(2, field(1, b"User") + field(2, b"rbac.authorization.k8s.io")
                                          + field(3, b"dave")) \
        + field(3, field(1, b"rbac.authorization.k8s.io") + field(2, b"ClusterRole") + field(3, b"view"))
    r = await client.post("/apis/rbac.authorization.k8s.io/v1/namespaces/pb/rolebindings", headers=PROTOBUF,
                          content=envelope("rbac.authorization.k8s.io/v1", "RoleBinding", binding))
    assert r.status_code == 201, r.text
    assert r.json()["roleRef"]["name"] == "view" and r.json()["subjects"][0]["name"] == "dave"


async def test_malformed_or_unexpected_protobuf(client: httpx.AsyncClient) -> None:
    namespaces = "/api/v1/namespaces"
    for body in (b"not protobuf", b"k8s\x00\x12\x7fshort", b"k8s\x00" + b"\xff" * 12,
                 envelope("v1", "Namespace", b"\x0a\x05ab")):
        r = await client.post(namespaces, content=body, headers=PROTOBUF)
        assert r.status_code == 400 and r.json()["reason"] == "BadRequest", (body, r.text)
    config_map = envelope("v1", "ConfigMap", field(1, meta("c")))
    r = await client.post(namespaces, content=config_map, headers=PROTOBUF)
    assert r.status_code == 415 and "v1/Namespace" in r.json()["message"]
    # The envelope's kind decides how the body is read; the path still decides what it may be.
    r = await client.post(namespaces, content=envelope("v1", "Secret", field(1, meta("x"))), headers=PROTOBUF)
    assert r.status_code == 400, r.text
    assert "the body is v1/Secret but the path is for v1/Namespace" in r.json()["message"]
    listed = (await client.get(namespaces, headers={"Authorization": "Bearer admin"})).json()["items"]
    assert [n["metadata"]["name"] for n in listed] == ["default", "kube-system"]  # nothing refused was made
