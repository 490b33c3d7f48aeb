"""Static-token authentication, the authorization hook, and the in-process app (``build_app``)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest
from ironpool.api import errors
from ironpool.apiserver.app import build_app
from ironpool.apiserver.auth.authentication import Authenticator, User, parse_token_file
from ironpool.store.sqlite import SQLiteStore

CLASSES = "/apis/compute.ironcore.dev/v1alpha1/machineclasses"


def test_parse_token_file_kubernetes_format() -> None:
    tokens = parse_token_file(
        '# comment\n\nt1,admin,1,"system:masters,ops"\nt2,alice,2\n t3 , bob , 3 , "dev"\n'
    )
    assert tokens["t1"] == User("admin", "1", frozenset({"system:masters", "ops"}))
    assert tokens["t1"].is_admin
    assert tokens["t2"] == User("alice", "2", frozenset())
    assert tokens["t3"].groups == {"dev"} and not tokens["t3"].is_admin


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("t1,admin\n", "tokens.csv:1: expected"),
        ("ok,a,1\nt1,,2\n", "tokens.csv:2: token and user"),
        ("t1,a,1\nt1,b,2\n", "tokens.csv:2: duplicate token"),
    ],
)
def test_parse_token_file_errors_name_the_line(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_token_file(text, "tokens.csv")


def test_authenticate() -> None:
    auth = Authenticator(parse_token_file("t1,admin,1\n"))
    assert auth.authenticate("Bearer t1").name == "admin"
    for header in (None, "", "Bearer", "Bearer t2", "Basic t1", "t1"):
        with pytest.raises(errors.Unauthorized):
            auth.authenticate(header)


def test_unreadable_token_file_names_the_option(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="--token-file"):
        Authenticator.from_file(tmp_path / "missing.csv")


async def test_authorizer_hook_can_forbid(store: SQLiteStore) -> None:
    calls: list[tuple[str, str, str, str | None, str | None]] = []

    def read_only_for_non_admins(
        user: User, verb: str, resource: str, ns: str | None, name: str | None, group: str | None = None
    ) -> None:
        calls.append((user.name, verb, resource, ns, name))
        if not user.is_admin and verb not in ("get", "list", "watch"):
            raise errors.Forbidden(f"user {user.name!r} may not {verb} {resource}")

    auth = Authenticator(parse_token_file('a,admin,1,"system:masters"\nb,bob,2\n'))
    app = build_app(store, auth, read_only_for_non_admins)
    body = {
        "apiVersion": "compute.ironcore.dev/v1alpha1",
        "kind": "MachineClass",
        "metadata": {"name": "small"},
        "capabilities": {"cpu": "1", "memory": "1Gi"},
    }
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as c:
        r = await c.post(CLASSES, json=body, headers={"Authorization": "Bearer b"})
        assert r.status_code == 403 and r.json()["reason"] == "Forbidden"
        # The only writes: the kube-system and default namespaces and the default RBAC policy every
        # installation makes before its first request.
        made = {d["metadata"]["name"] for d in (await store.list("/registry/")).items}
        assert made == {"kube-system", "default", "cluster-admin", "admin", "edit", "view",
                        "system:aggregate-to-admin", "system:aggregate-to-edit", "system:aggregate-to-view",
                        "ironpool:fleet-reader", "system:discovery", "system:node-bootstrapper"}
        r = await c.post(CLASSES, json=body, headers={"Authorization": "Bearer a"})
        assert r.status_code == 201
        r = await c.get(f"{CLASSES}/small", headers={"Authorization": "Bearer b"})
        assert r.status_code == 200 and r.json()["metadata"]["name"] == "small"
    assert ("bob", "get", "machineclasses", None, "small") in calls
    assert ("admin", "create", "machineclasses", None, None) in calls
