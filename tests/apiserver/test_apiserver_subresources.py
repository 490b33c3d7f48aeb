"""Subresources come from the kinds' strategies: routing, authorization, discovery and OpenAPI follow
the declarations, and a new subresource is its declaration and its handler (in-process app over a
real SQLite store)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import orjson
import pytest
from ironpool.api import resources
from ironpool.api.resource_info import ResourceInfo
from ironpool.api.resources import RESOURCES, resolve, subresources_of
from ironpool.api.subresources import Subresource
from ironpool.apiserver.app import build_app
from ironpool.apiserver.auth import Authenticator, Conditions, User, parse_token_file
from ironpool.apiserver.auth.authorizer import Authorization
from ironpool.apiserver.endpoints.openapi import openapi_document
from ironpool.apiserver.endpoints.request_parsing import cached_request_info
from ironpool.apiserver.registry.generic import Registry
from ironpool.apiserver.registry.subresources import HANDLERS, SubresourceHandler, check_handlers
from ironpool.apiserver.registry.subresources.eviction import EvictionHandler
from ironpool.store.sqlite import SQLiteStore

TOKENS = 'a,admin,1,"system:masters"\n'
COMPUTE = "/apis/compute.ironcore.dev/v1alpha1"
MACHINES = f"{COMPUTE}/namespaces/default/machines"
ADMIN = {"Authorization": "Bearer a"}
_OPENAPI_METHOD = {"get": "get", "update": "put", "patch": "patch", "create": "post"}


@dataclass
class Served:
    client: httpx.AsyncClient
    asked: list[tuple[str, str]]  # (verb, resource) of every authorization


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[Served]:
    """The app over a fresh store; its authorizer (ours) records what it is asked."""
    store = SQLiteStore(str(tmp_path / "store.db"))
    ours = Authorization(store)
    asked: list[tuple[str, str]] = []

    def authorize(user: User, verb: str, resource: str, namespace: str | None,
                  name: str | None, group: str | None = None) -> Conditions | None:
        asked.append((verb, resource))
        return ours(user, verb, resource, namespace, name, group)

    app = build_app(store, Authenticator(parse_token_file(TOKENS)), authorize)
    await app.state.apiserver.bootstrap.ensure()
    await ours.start()
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test",
                                 headers=ADMIN) as c:
        yield Served(c, asked)
    await ours.stop()
    await store.close()


def machine(name: str) -> dict[str, object]:
    return {"apiVersion": "compute.ironcore.dev/v1alpha1", "kind": "Machine", "metadata": {"name": name},
            "spec": {"machineClassRef": {"name": "small"}}}


async def test_discovery_and_openapi_list_every_declared_subresource(served: Served) -> None:
    openapi = openapi_document()["paths"]
    for info in RESOURCES:
        declared = subresources_of(info)
        where = f"/apis/{info.group}/{info.version}" if info.group else f"/api/{info.version}"
        r = await served.client.get(where)
        assert r.status_code == 200, r.text
        listed = {res["name"]: res for res in r.json()["resources"]}
        subs = {n.partition("/")[2] for n in listed if n.startswith(f"{info.plural}/")}
        assert subs == set(declared), info.kind
        item = info.path("{namespace}" if info.namespaced else None, "{name}")
        for sub in declared.values():
            assert sorted(listed[f"{info.plural}/{sub.name}"]["verbs"]) == sorted(sub.verbs)
            methods = {m for m in openapi[f"{item}/{sub.name}"] if m != "parameters"}
            assert methods == {_OPENAPI_METHOD[v] for v in sub.verbs}, (info.kind, sub.name)
    assert set(subresources_of(resolve("machines"))) == {"status", "binding", "eviction", "exec"}
    assert set(subresources_of(resolve("volumes"))) == {"status", "binding"}
    assert set(subresources_of(resolve("secrets"))) == set()


async def test_undeclared_subresources_and_verbs_are_refused_before_authorization(served: Served) -> None:
    c = served.client
    assert (await c.post(MACHINES, json=machine("m"))).status_code == 201
    for path in (f"{MACHINES}/m/scale", "/api/v1/namespaces/default/secrets/s/status",
                 "/apis/storage.ironcore.dev/v1alpha1/namespaces/default/volumes/v/eviction"):
        r = await c.get(path)
        assert r.status_code == 404, (path, r.text)
    served.asked.clear()
    for method, path, hint in (("GET", "binding", "POST a Binding"), ("PUT", "eviction", "POST an Eviction"),
                               ("POST", "status", ""), ("DELETE", "status", "")):
        r = await c.request(method, f"{MACHINES}/m/{path}", json={})
        assert r.status_code == 405, r.text
        assert r.json()["message"].endswith(hint)
    assert served.asked == []


class GenerationHandler(SubresourceHandler[Subresource]):
    """A subresource made up for this test: GET answers the object's ``metadata.generation``."""

    name = "generation"

    async def get(self, registry: Registry, info: ResourceInfo, namespace: str | None, name: str) -> bytes:
        obj = orjson.loads(await registry.get_raw(info, namespace, name))
        return orjson.dumps({"generation": obj["metadata"].get("generation")})


@pytest.fixture
def generation(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Machines declare ``generation`` (as their strategy would), and its handler is registered."""
    info = resolve("machines")
    key = (info.api_version, info.kind)
    declared = {**resources._SUBRESOURCES[key], "generation": Subresource("generation", ("get",))}
    monkeypatch.setitem(resources._SUBRESOURCES, key, declared)
    monkeypatch.setitem(HANDLERS, "generation", GenerationHandler())
    cached_request_info.cache_clear()
    yield
    cached_request_info.cache_clear()


async def test_a_new_subresource_is_its_declaration_and_its_handler(served: Served, generation: None) -> None:
    c = served.client
    assert (await c.post(MACHINES, json=machine("m"))).status_code == 201
    served.asked.clear()
    r = await c.get(f"{MACHINES}/m/generation")
    assert r.status_code == 200 and r.json() == {"generation": 1}, r.text
    assert served.asked == [("get", "machines/generation")]
    assert (await c.put(f"{MACHINES}/m/generation", json={})).status_code == 405
    assert (await c.get(f"{MACHINES}/missing/generation")).status_code == 404
    listed = {res["name"]: res for res in (await c.get(COMPUTE)).json()["resources"]}
    assert listed["machines/generation"]["verbs"] == ["get"]
    assert (await c.get(f"{COMPUTE}/machinepools/p/generation")).status_code == 404  # not declared there
    check_handlers(HANDLERS)  # the declaration has its handler


def test_a_declared_subresource_without_its_handler_is_refused_naming_both() -> None:
    without = {name: h for name, h in HANDLERS.items() if name != "eviction"}
    with pytest.raises(RuntimeError, match="Machine declares the subresource 'eviction', which has no hand"):
        check_handlers(without)

    class GetOnly(SubresourceHandler[Subresource]):
        name = "binding"

        async def get(self, registry: Registry, info: ResourceInfo, namespace: str | None,
                      name: str) -> bytes:
            return b"{}"

    with pytest.raises(RuntimeError, match="machines/binding with the verbs create, which GetOnly does not"):
        check_handlers({**HANDLERS, "binding": GetOnly()})

    class EvictsOnBinding(EvictionHandler):
        name = "binding"

    with pytest.raises(RuntimeError, match="machines/binding as a PoolBinding, but EvictsOnBinding serves a "
                                           "PoolEviction"):
        check_handlers({**HANDLERS, "binding": EvictsOnBinding()})


def test_discovery_lists_every_kind_after_one_whose_subresource_takes_another_group() -> None:
    # machines/eviction takes a policy/v1 body: the kinds after Machine in its group are listed too.
    from ironpool.api.resources import RESOURCES
    from ironpool.apiserver.endpoints.openapi import discovery_core_v1, discovery_group

    for info in RESOURCES:
        listing = discovery_group(info.group, info.version) if info.group else discovery_core_v1()
        assert info.plural in [r["name"] for r in listing["resources"]], info.kind
