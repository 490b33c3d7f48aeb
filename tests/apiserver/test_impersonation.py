"""Impersonation (``Impersonate-*`` headers, the ``impersonate`` verb), SelfSubjectRulesReview and
SelfSubjectReview on an in-process apiserver over SQLite (kubectl drives the same in tests/kubectl)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from ironpool.apiserver.app import build_app
from ironpool.apiserver.auth.authentication import Authenticator, parse_token_file
from ironpool.store.sqlite import SQLiteStore

RBAC = "/apis/rbac.authorization.k8s.io/v1"
SECRETS = "/api/v1/namespaces/a/secrets"
SSAR = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
SSRR = "/apis/authorization.k8s.io/v1/selfsubjectrulesreviews"
WHOAMI = "/apis/authentication.k8s.io/v1/selfsubjectreviews"
TOKENS = ('admin,admin,1,"system:masters"\nalice,alice,2,"developers"\nmallory,mallory,3\n'
          'support,support,4\npool,compute.ironcore.dev:system:machinepool:p1,5\n')


def code(r: httpx.Response, expected: int) -> dict[str, Any]:
    assert r.status_code == expected, r.text
    return r.json()  # type: ignore[no-any-return]


def as_(user: str, *groups: str, **extra: str) -> list[tuple[str, str]]:
    return [("Impersonate-User", user), *(("Impersonate-Group", g) for g in groups),
            *((f"Impersonate-Extra-{k}", v) for k, v in extra.items())]


@pytest.fixture
async def api(tmp_path: Path) -> AsyncIterator[dict[str, httpx.AsyncClient]]:
    store = SQLiteStore(str(tmp_path / "imp.db"))
    app = build_app(store, Authenticator(parse_token_file(TOKENS)))
    transport = httpx.ASGITransport(app=app)
    clients = {who: httpx.AsyncClient(transport=transport, base_url="http://test",
                                      headers={"Authorization": f"Bearer {who}"})
               for who in ("admin", "alice", "mallory", "support", "pool")}
    admin = clients["admin"]
    code(await admin.post("/api/v1/namespaces", json={"metadata": {"name": "a"}}), 201)
    code(await admin.post(SECRETS, json={"metadata": {"name": "s"}, "stringData": {"k": "v"}}), 201)
    for name, role, user in (("alice-edit", "edit", "alice"), ("mallory-edit", "edit", "mallory")):
        code(await admin.post(f"{RBAC}/namespaces/a/rolebindings", json={
            "metadata": {"name": name}, "subjects": [{"kind": "User", "name": user}],
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role}}), 201)
    # support may impersonate alice and the group "developers" only.
    code(await admin.post(f"{RBAC}/clusterroles", json={"metadata": {"name": "impersonate-alice"}, "rules": [
        {"verbs": ["impersonate"], "apiGroups": [""], "resources": ["users"], "resourceNames": ["alice"]},
        {"verbs": ["impersonate"], "apiGroups": [""], "resources": ["groups"],
         "resourceNames": ["developers"]},
    ]}), 201)
    code(await admin.post(f"{RBAC}/clusterrolebindings", json={
        "metadata": {"name": "support"}, "subjects": [{"kind": "User", "name": "support"}],
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole",
                    "name": "impersonate-alice"}}), 201)
    yield clients
    for c in clients.values():
        await c.aclose()
    await app.state.apiserver.authorize.stop()
    await store.close()


async def test_impersonation_needs_the_impersonate_verb(api: dict[str, httpx.AsyncClient]) -> None:
    # Without the verb: refused outright, never served with the caller's own rights.
    refused = code(await api["mallory"].get(SECRETS, headers=as_("nobody-at-all")), 403)
    assert refused["message"] == ('users "nobody-at-all" is forbidden: User "mallory" cannot impersonate '
                                  'resource "users" in API group "" at the cluster scope')
    code(await api["mallory"].get(SECRETS, headers=as_("admin", "system:masters")), 403)
    # With it: the request is the impersonated user's, with only the groups asked for.
    support = api["support"]
    code(await support.get(SECRETS), 403)
    listed = code(await support.get(SECRETS, headers=as_("alice")), 200)
    assert [s["metadata"]["name"] for s in listed["items"]] == ["s"]
    code(await support.get(SECRETS, headers=as_("alice", "developers")), 200)
    groups = code(await support.get(SECRETS, headers=as_("alice", "system:masters")), 403)
    assert 'groups "system:masters" is forbidden' in groups["message"]
    code(await support.get(SECRETS, headers=as_("bob")), 403)
    code(await support.get(SECRETS, headers=[("Impersonate-Group", "developers")]), 400)
    extra = code(await support.get(SECRETS, headers=as_("alice", scopes="x")), 403)
    assert 'cannot impersonate resource "userextras/scopes" in API group "authentication.k8s.io"' in \
        extra["message"]
    # An administrator may be anyone; a pool identity may not impersonate.
    code(await api["admin"].get(SECRETS, headers=as_("mallory")), 200)
    code(await api["admin"].get("/api/v1/namespaces/default/secrets", headers=as_("mallory")), 403)
    code(await api["pool"].get(SECRETS, headers=as_("alice")), 403)


async def test_reviews_answer_for_the_impersonated_user(api: dict[str, httpx.AsyncClient]) -> None:
    spec = {"resourceAttributes": {"verb": "create", "resource": "secrets", "namespace": "a"}}
    mine = code(await api["support"].post(SSAR, json={"spec": spec}), 201)
    assert mine["status"]["allowed"] is False
    alices = code(await api["support"].post(SSAR, json={"spec": spec}, headers=as_("alice")), 201)
    assert alices["status"]["allowed"] is True
    code(await api["mallory"].post(SSAR, json={"spec": spec}, headers=as_("alice")), 403)
    who = code(await api["support"].post(WHOAMI, json={}, headers=as_("alice", "developers")), 201)
    assert who["kind"] == "SelfSubjectReview"
    assert who["status"]["userInfo"] == {"username": "alice",
                                         "groups": ["developers", "system:authenticated"]}
    me = code(await api["alice"].post(WHOAMI, json={}), 201)["status"]["userInfo"]
    assert me == {"username": "alice", "uid": "2", "groups": ["developers", "system:authenticated"]}


async def test_rules_review(api: dict[str, httpx.AsyncClient]) -> None:
    review = code(await api["alice"].post(SSRR, json={"spec": {"namespace": "a"}}), 201)
    assert review["kind"] == "SelfSubjectRulesReview" and review["status"]["incomplete"] is False
    rules = review["status"]["resourceRules"]
    assert {"verbs": ["create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"],
            "apiGroups": [""], "resources": ["secrets"]} in rules
    assert any(r["apiGroups"] == ["authorization.k8s.io"] for r in rules)  # every user may ask
    assert {"verbs": ["get"], "nonResourceURLs": ["/version", "/version/", "/api", "/api/*", "/apis",
                                                  "/apis/*", "/openapi", "/openapi/*", "/openapi.json",
                                                  "/healthz", "/livez", "/readyz"]} in \
        review["status"]["nonResourceRules"]
    elsewhere = code(await api["alice"].post(SSRR, json={"spec": {"namespace": "default"}}), 201)
    assert not any("secrets" in r["resources"] for r in elsewhere["status"]["resourceRules"])
    admin = code(await api["admin"].post(SSRR, json={"spec": {"namespace": "a"}}), 201)["status"]
    assert {"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]} in admin["resourceRules"]
    pool = code(await api["pool"].post(SSRR, json={"spec": {"namespace": "a"}}), 201)["status"]
    assert pool["incomplete"] is True and "pool" in pool["evaluationError"]
    bad = code(await api["alice"].post(SSRR, json={"spec": {}}), 422)
    assert bad["details"]["causes"][0]["field"] == "spec.namespace"
    # kubectl sends it as protobuf: the k8s magic, a runtime.Unknown whose raw (2) is the review, its
    # spec (2) holding the namespace (1).
    spec = b"\x0a\x01a"
    review_bytes = b"\x12" + bytes([len(spec)]) + spec
    body = b"k8s\x00" + b"\x12" + bytes([len(review_bytes)]) + review_bytes
    protobuf = {"Content-Type": "application/vnd.kubernetes.protobuf"}
    proto = code(await api["alice"].post(SSRR, content=body, headers=protobuf), 201)
    assert proto["spec"] == {"namespace": "a"} and proto["status"]["resourceRules"] == rules
