"""The OpenAPI document (from the pydantic models' JSON schemas) and the discovery documents."""

from __future__ import annotations

from typing import Any

from pydantic.json_schema import models_json_schema

from ironpool.api import errors
from ironpool.api.resources import RESOURCES, ResourceInfo

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


def _schema_name(info: ResourceInfo) -> str:
    return f"{info.group or 'core'}.{info.version}.{info.kind}"


def openapi_document() -> dict[str, Any]:
    """An OpenAPI 3.1 document of every served path, verb and schema."""
    _, defs = models_json_schema(
        [(info.model, "validation") for info in RESOURCES],
        by_alias=True,
        ref_template="#/components/schemas/{model}",
    )
    schemas: dict[str, Any] = dict(defs.get("$defs", {}))
    schemas["Status"] = _STATUS_SCHEMA
    paths: dict[str, Any] = {}
    err = {
        "default": {
            "description": "a Status",
            "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Status"}}},
        }
    }
    for info in RESOURCES:
        ref = {"$ref": f"#/components/schemas/{info.model.__name__}"}
        schemas[_schema_name(info)] = ref
        obj = {"content": {"application/json": {"schema": ref}}}
        listing = {
            "content": {
                "application/json": {
                    "schema": {
                        "type": "object",
                        "properties": {
                            "apiVersion": {"type": "string"},
                            "kind": {"type": "string"},
                            "metadata": {"type": "object"},
                            "items": {"type": "array", "items": ref},
                        },
                    }
                }
            }
        }
        ns = "{namespace}" if info.namespaced else None
        collection = info.path(ns)
        item = info.path(ns, "{name}")
        tag = [info.kind]
        paths[collection] = {
            "get": {
                "tags": tag,
                "summary": f"list or watch {info.plural}",
                "parameters": _list_params(),
                "responses": {"200": {"description": "a list, or a watch stream", **listing}, **err},
            },
            "post": {
                "tags": tag,
                "summary": f"create a {info.kind}",
                "requestBody": obj,
                "responses": {"201": {"description": "created", **obj}, **err},
            },
        }
        paths[item] = {
            "get": {
                "tags": tag,
                "summary": f"read a {info.kind}",
                "responses": {"200": {"description": "ok", **obj}, **err},
            },
            "put": {
                "tags": tag,
                "summary": f"replace a {info.kind}",
                "requestBody": obj,
                "responses": {"200": {"description": "ok", **obj}, **err},
            },
            "patch": {
                "tags": tag,
                "summary": f"JSON-merge-patch a {info.kind}",
                "requestBody": {"content": {"application/merge-patch+json": {"schema": {"type": "object"}}}},
                "responses": {"200": {"description": "ok", **obj}, **err},
            },
            "delete": {
                "tags": tag,
                "summary": f"delete a {info.kind} (finalizers delay removal)",
                "responses": {"200": {"description": "the deleted or terminating object", **obj}, **err},
            },
        }
        if info.has_status:
            paths[item + "/status"] = {
                "get": paths[item]["get"],
                "put": {**paths[item]["put"], "summary": f"replace the status of a {info.kind}"},
                "patch": {**paths[item]["patch"], "summary": f"JSON-merge-patch the status of a {info.kind}"},
            }
    return {
        "openapi": "3.1.0",
        "info": {"title": "ironpool", "version": "v1alpha1"},
        "paths": paths,
        "components": {
            "schemas": schemas,
            "securitySchemes": {"BearerToken": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{"BearerToken": []}],
    }


def _list_params() -> list[dict[str, Any]]:
    names = [
        "labelSelector",
        "fieldSelector",
        "limit",
        "continue",
        "resourceVersion",
        "watch",
        "allowWatchBookmarks",
        "timeoutSeconds",
    ]
    return [{"name": n, "in": "query", "required": False, "schema": {"type": "string"}} for n in names]


def _api_resources(group: str, version: str) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for info in RESOURCES:
        if info.group != group or info.version != version:
            continue
        out.append(
            {
                "name": info.plural,
                "singularName": info.singular,
                "namespaced": info.namespaced,
                "kind": info.kind,
                "shortNames": list(info.short_names),
                "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"],
            }
        )
        if info.has_status:
            out.append(
                {
                    "name": f"{info.plural}/status",
                    "singularName": "",
                    "namespaced": info.namespaced,
                    "kind": info.kind,
                    "verbs": ["get", "patch", "update"],
                }
            )
    return out


def discovery_core() -> dict[str, Any]:
    """``/api``: the core group's versions."""
    return {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []}


def discovery_groups() -> dict[str, Any]:
    """``/apis``: every named group."""
    groups: dict[str, list[str]] = {}
    for info in RESOURCES:
        if info.group and info.version not in groups.setdefault(info.group, []):
            groups[info.group].append(info.version)
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
    resources = _api_resources(group, version)
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
