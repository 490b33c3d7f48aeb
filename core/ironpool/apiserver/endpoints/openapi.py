"""The OpenAPI v3 documents (``/openapi/v3`` and one per group-version, as kubectl reads them for
``explain``, field validation and patch types) and the API discovery documents.

Schemas come from :mod:`ironpool.apiserver.registry.schemas` (the pydantic models,
Kubernetes-style); operations carry ``x-kubernetes-group-version-kind`` and list the query
parameters the server honours, so kubectl sends ``fieldValidation=Strict`` and lets the server
refuse unknown fields. Every served group is described and discovered, the alias groups
(:mod:`ironpool.api.group_aliases`) after the groups they serve; an alias lists no short names, which
stay with the kind's own group (kubectl resolves ``ma`` there without a warning).
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable
from typing import Any

import orjson

from ironpool.api import errors
from ironpool.api.channels import SUBPROTOCOLS
from ironpool.api.resources import SERVED, ResourceInfo, subresources_of
from ironpool.api.subresources import Subresource
from ironpool.apiserver.endpoints.self_reviews import REVIEW_RESOURCES
from ironpool.apiserver.registry.schemas import (
    Schema,
    all_component_schemas,
    component_schemas,
    kind_schema_name,
)

_REF = "#/components/schemas/"

_STATUS_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "A Kubernetes Status: the body of every error response.",
    "properties": {
        "kind": {"type": "string"},
        "apiVersion": {"type": "string"},
        "status": {"type": "string"},
        "message": {"type": "string"},
        "reason": {"type": "string"},
        "code": {"type": "integer"},
        "details": {
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "kind": {"type": "string"},
                "group": {"type": "string"},
                "causes": {
                    "type": "array",
                    "items": {
                        "type": "object",
                        "properties": {
                            "field": {"type": "string"},
                            "message": {"type": "string"},
                            "reason": {"type": "string"},
                        },
                    },
                },
            },
        },
    },
}


_WRITE_PARAMS = ("dryRun", "fieldManager", "fieldValidation")
_PATCH_TYPES = ("application/merge-patch+json", "application/apply-patch+yaml",
                "application/strategic-merge-patch+json", "application/json-patch+json")


def _param(name: str, description: str, where: str = "query", type_: str = "string") -> Schema:
    return {"name": name, "in": where, "description": description, "schema": {"type": type_},
            **({"required": True} if where == "path" else {})}


_PARAMS: dict[str, Schema] = {
    "dryRun": _param("dryRun", "When present (All), the request is checked but nothing is stored."),
    "fieldManager": _param("fieldManager", "The name of the actor making the change (managedFields)."),
    "fieldValidation": _param(
        "fieldValidation",
        "What to do with unknown fields: Strict (the default here) refuses them, Warn drops them with a "
        "warning, Ignore drops them silently.",
    ),
    "force": _param("force", "Server-side apply: take over fields other managers own.", type_="boolean"),
    "includeObject": _param("includeObject", "With a Table answer: None, Metadata (default) or Object."),
    **{n: _param(n, f"List and watch option {n}.") for n in (
        "labelSelector", "fieldSelector", "limit", "continue", "resourceVersion", "watch",
        "allowWatchBookmarks", "timeoutSeconds")},
}


def _ops_params(*names: str) -> list[Schema]:
    return [_PARAMS[n] for n in names]


def _content(schema: Schema, *types: str) -> Schema:
    return {"content": {t: {"schema": schema} for t in types or ("application/json",)}}


def _paths(infos: list[ResourceInfo]) -> dict[str, Any]:
    """The paths, operations and parameters of ``infos`` (kubectl reads ``fieldValidation`` and the
    GVK of each PATCH, and the patch types it accepts)."""
    status = {"$ref": _REF + "io.k8s.apimachinery.pkg.apis.meta.v1.Status"}
    err = {"default": {"description": "a Status", **_content(status)}}
    paths: dict[str, Any] = {}
    for info in infos:
        gvk = {"group": info.group, "version": info.version, "kind": info.kind}
        ref = {"$ref": _REF + kind_schema_name(info)}
        listing = {"type": "object", "properties": {
            "apiVersion": {"type": "string"}, "kind": {"type": "string"},
            "metadata": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
            "items": {"type": "array", "items": ref}}}
        ns_param = [_param("namespace", "The object's namespace.", "path")] if info.namespaced else []
        name_param = [_param("name", f"The name of the {info.kind}.", "path")]

        def op(action: str, summary: str, params: list[Schema], response: Schema | None = None,
               body: Schema | None = None, code: str = "200", gvk: dict[str, str] = gvk,
               ref: Schema = ref) -> Schema:
            out: Schema = {"summary": summary, "parameters": params, "x-kubernetes-action": action,
                           "x-kubernetes-group-version-kind": gvk,
                           "responses": {code: {"description": "OK", **_content(response or ref)}, **err}}
            if body is not None:
                out["requestBody"] = body
            return out

        list_params = _ops_params("labelSelector", "fieldSelector", "limit", "continue", "resourceVersion",
                                  "watch", "allowWatchBookmarks", "timeoutSeconds", "includeObject")
        collection = info.path("{namespace}" if info.namespaced else None)
        paths[collection] = {
            "parameters": ns_param,
            "get": op("list", f"list or watch {info.plural}", list_params, listing),
            "post": op("post", f"create a {info.kind}", _ops_params(*_WRITE_PARAMS), body=_content(ref),
                       code="201"),
        }
        if info.namespaced:
            paths[info.path(None)] = {"get": op("list", f"list or watch {info.plural} of every namespace",
                                                list_params, listing)}
        item = info.path("{namespace}" if info.namespaced else None, "{name}")
        patch_body = _content({"type": "object", "x-kubernetes-preserve-unknown-fields": True}, *_PATCH_TYPES)
        paths[item] = {
            "parameters": ns_param + name_param,
            "get": op("get", f"read a {info.kind}", _ops_params("includeObject")),
            "put": op("put", f"replace a {info.kind}", _ops_params(*_WRITE_PARAMS), body=_content(ref)),
            "patch": op("patch", f"patch a {info.kind}", _ops_params(*_WRITE_PARAMS, "force"),
                        body=patch_body),
            "delete": op("delete", f"delete a {info.kind} (finalizers delay removal)", _ops_params("dryRun")),
        }
        for sub in subresources_of(info).values():
            paths[f"{item}/{sub.name}"] = {"parameters": ns_param + name_param,
                                           **_subresource_ops(info, sub, op, patch_body, status)}
    return paths


def _subresource_ops(info: ResourceInfo, sub: Subresource, op: Callable[..., Schema], patch_body: Schema,
                     status: Schema) -> dict[str, Schema]:
    """The operations of one subresource: the verbs it declares, on the object's schema or, for a
    ``create``, on the body kind it takes (answered with a Status)."""
    what = f"the {sub.name} of a {info.kind}"
    ops: dict[str, Schema] = {}
    if "get" in sub.verbs:
        ops["get"] = op("get", f"read {what}", [])
    if "update" in sub.verbs:
        ops["put"] = op("put", f"replace {what}", _ops_params(*_WRITE_PARAMS), body=_content(
            {"$ref": _REF + kind_schema_name(info)}))
    if "patch" in sub.verbs:
        ops["patch"] = op("patch", f"patch {what}", _ops_params(*_WRITE_PARAMS, "force"), body=patch_body)
    if "create" in sub.verbs and sub.body is not None:
        api_version, kind = sub.body
        group, _, version = api_version.rpartition("/")
        body = {"type": "object", "x-kubernetes-preserve-unknown-fields": True,
                "description": f"A {api_version} {kind}."}
        ops["post"] = op("post", f"create a {kind} for a {info.kind}", _ops_params("dryRun"),
                         response=status, body=_content(body), code="201",
                         gvk={"group": group, "version": version, "kind": kind})
    elif "create" in sub.verbs:  # a stream (exec): Kubernetes' "connect" action, upgraded to a websocket
        ops["post"] = op("connect", f"connect to {what} (a websocket upgrade, subprotocol "
                         f"{' or '.join(SUBPROTOCOLS)}; a plain POST is refused)", [], response=status,
                         code="101")
    return ops


def _document(infos: list[ResourceInfo], schemas: dict[str, Schema]) -> dict[str, Any]:
    return {
        "openapi": "3.0.0",
        "info": {"title": "ironpool", "version": "v1alpha1"},
        "paths": _paths(infos),
        "components": {
            "schemas": {**schemas, "io.k8s.apimachinery.pkg.apis.meta.v1.Status": _STATUS_SCHEMA},
            "securitySchemes": {"BearerToken": {"type": "apiKey", "name": "authorization", "in": "header"}},
        },
        "security": [{"BearerToken": []}],
    }


def _group_versions() -> list[tuple[str, str]]:
    return list(dict.fromkeys((i.group, i.version) for i in SERVED))


def _gv_path(group: str, version: str) -> str:
    return f"apis/{group}/{version}" if group else f"api/{version}"


@functools.cache
def openapi_v3_group_version(path: str) -> bytes | None:
    """The OpenAPI v3 document of one group-version, by its discovery path (``api/v1``,
    ``apis/compute.ironcore.dev/v1alpha1``), or None if there is no such group-version."""
    for group, version in _group_versions():
        if _gv_path(group, version) == path:
            infos = [i for i in SERVED if (i.group, i.version) == (group, version)]
            return orjson.dumps(_document(infos, component_schemas(group, version)))
    return None


@functools.cache
def openapi_v3_discovery() -> bytes:
    """``/openapi/v3``: each group-version's document URL, with a hash of its content (clients cache
    by it)."""
    paths = {}
    for group, version in _group_versions():
        path = _gv_path(group, version)
        digest = hashlib.sha512(openapi_v3_group_version(path) or b"").hexdigest().upper()
        paths[path] = {"serverRelativeURL": f"/openapi/v3/{path}?hash={digest}"}
    return orjson.dumps({"paths": paths})


def openapi_document() -> dict[str, Any]:
    """One OpenAPI 3.0 document of every served path, verb and schema (``/openapi.json``)."""
    return _document(list(SERVED), all_component_schemas())


def _api_resources(group: str, version: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for info in SERVED:
        if info.group != group or info.version != version:
            continue
        out.append(
            {
                "name": info.plural,
                "singularName": info.singular,
                "namespaced": info.namespaced,
                "kind": info.kind,
                "shortNames": list(info.short_names) if info.alias_of is None else [],
                "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"],
            }
        )
        for sub in subresources_of(info).values():
            entry: dict[str, Any] = {"name": f"{info.plural}/{sub.name}", "singularName": "",
                                     "namespaced": info.namespaced, "kind": info.kind,
                                     "verbs": sorted(sub.verbs)}
            if sub.body is not None:  # as Kubernetes lists pods/eviction: group policy, kind Eviction
                body_group, _, body_version = sub.body[0].rpartition("/")
                entry["kind"] = sub.body[1]
                if body_group:
                    entry.update(group=body_group, version=body_version)
            out.append(entry)
    return out


def discovery_core() -> dict[str, Any]:
    """``/api``: the core group's versions."""
    return {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []}


def discovery_groups() -> dict[str, Any]:
    """``/apis``: every named group (the reviews' too)."""
    groups: dict[str, list[str]] = {}
    for group, version in [*((i.group, i.version) for i in SERVED), *REVIEW_RESOURCES]:
        if group and version not in groups.setdefault(group, []):
            groups[group].append(version)
    return {
        "kind": "APIGroupList",
        "apiVersion": "v1",
        "groups": [
            {
                "name": g,
                "versions": [{"groupVersion": f"{g}/{v}", "version": v} for v in vs],
                "preferredVersion": {"groupVersion": f"{g}/{vs[0]}", "version": vs[0]},
            }
            for g, vs in groups.items()
        ],
    }


def discovery_group(group: str, version: str) -> dict[str, Any]:
    """``/apis/{group}/{version}``: the group's resources (``/api/v1`` is served by the same data)."""
    resources = _api_resources(group, version) + [
        {"name": plural, "singularName": singular, "namespaced": False, "kind": kind, "verbs": ["create"]}
        for plural, singular, kind in REVIEW_RESOURCES.get((group, version), ())]
    if not resources:
        raise errors.NotFound(f"the server could not find the requested resource (/apis/{group}/{version})")
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{group}/{version}",
        "resources": resources,
    }


def discovery_core_v1() -> dict[str, Any]:
    """``/api/v1``: the core group's resources."""
    return {"kind": "APIResourceList", "groupVersion": "v1", "resources": _api_resources("", "v1")}
