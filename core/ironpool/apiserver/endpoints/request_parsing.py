"""What a resource request asks for, read from its path and query: the resource, namespace, name and
subresource (Kubernetes' ``RequestInfo``), the options of a list or watch, of a write (field
manager, field validation, force) and ``dryRun``."""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any

from starlette.requests import Request

from ironpool.api import errors
from ironpool.api.resources import ResourceInfo, by_path, subresources_of
from ironpool.api.subresources import Subresource
from ironpool.apiserver.registry.fieldmanager import manager_from_user_agent
from ironpool.apiserver.registry.listing import ListOptions
from ironpool.apiserver.registry.schemas import drop_unknown_fields, shape_of

_FIELD_VALIDATION = ("Strict", "Warn", "Ignore")
_OF_NAMESPACES = subresources_of(by_path("", "v1", "namespaces"))
MAX_LIMIT = 2**63 - 1  # an int64, as Kubernetes reads limit
MAX_PAGE = 2**31


@dataclass(frozen=True)
class RequestInfo:
    """What a request path names: a resource, and optionally a namespace, an object, a subresource
    (Kubernetes' ``RequestInfo``; the subresource as its kind declares it).

    ``info`` is the resource as stored, what the registry works with; ``served`` the resource as the
    path names it: ``info`` itself, or its alias when the path names an alias group
    (:mod:`.aliased` puts bodies and answers in the right group)."""

    info: ResourceInfo
    namespace: str | None
    name: str | None
    subresource: Subresource | None
    served: ResourceInfo

    @property
    def group(self) -> str:
        """The API group the request named (what RBAC rules are matched against)."""
        return self.served.group

    @property
    def aliased(self) -> bool:
        """The path names the resource through an alias group."""
        return self.served is not self.info

    @property
    def resource(self) -> str:
        """What authorization names: the plural, with ``/<subresource>`` (``machines/binding``)."""
        sub = self.subresource
        return self.info.plural if sub is None else f"{self.info.plural}/{sub.name}"


def parse_path(path: str) -> RequestInfo:
    """Resolve ``/api/v1/...`` or ``/apis/{group}/{version}/...``; 404 for anything else."""
    parts = [p for p in path.split("/") if p]
    if len(parts) >= 3 and parts[0] == "api":
        group, version, rest = "", parts[1], parts[2:]
    elif len(parts) >= 4 and parts[0] == "apis":
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        raise errors.NotFound(f"the server could not find the requested resource ({path})")
    namespace: str | None = None
    if rest[0] == "namespaces" and len(rest) >= 3 and not (len(rest) == 3 and rest[2] in _OF_NAMESPACES):
        namespace, rest = rest[1], rest[2:]  # not a Namespace's own subresource: a resource in it
    served = by_path(group, version, rest[0])
    info = served.canonical
    if namespace is not None and not info.namespaced:
        raise errors.NotFound(f"{info.plural} are cluster-scoped; there is no {path}")
    if len(rest) > 3:
        raise errors.NotFound(f"the server could not find the requested resource ({path})")
    name = rest[1] if len(rest) >= 2 else None
    subresource = None
    if len(rest) == 3:
        subresource = subresources_of(info).get(rest[2])
        if subresource is None:
            raise errors.NotFound(f"{info.plural} have no {rest[2]} subresource")
    return RequestInfo(info, namespace, name, subresource, served)


# Paths repeat (clients poll the same objects); resolving one costs a few microseconds.
cached_request_info = functools.lru_cache(maxsize=8192)(parse_path)


def truthy(value: str | None) -> bool:
    return value is not None and value.lower() in ("true", "1", "yes")


def dry_run(request: Request) -> bool:
    if not request.scope.get("query_string"):
        return False  # most writes have no query: parsing one costs more than the rest of this
    value = request.query_params.get("dryRun")
    if value is None:
        return False
    if value != "All":
        raise errors.BadRequest(f"dryRun: only 'All' is supported, got {value!r}")
    return True


@dataclass(frozen=True)
class WriteOptions:
    """The query parameters of a write: who makes it, and what to do with unknown fields."""

    manager: str
    field_validation: str
    force: bool

    @classmethod
    def of(cls, request: Request, apply: bool = False) -> WriteOptions:
        q = request.query_params
        manager = q.get("fieldManager") or ""
        if len(manager) > 128 or not manager.isprintable():
            raise errors.BadRequest("fieldManager: must be at most 128 printable characters")
        if apply and not manager:
            raise errors.BadRequest("fieldManager: required for apply patches (application/apply-patch+yaml)")
        validation = q.get("fieldValidation") or "Strict"
        if validation not in _FIELD_VALIDATION:
            raise errors.BadRequest(f"fieldValidation: must be one of {', '.join(_FIELD_VALIDATION)}, "
                                    f"got {validation!r}")
        force = truthy(q.get("force"))
        if force and not apply:
            raise errors.BadRequest("force: only allowed for apply patches (application/apply-patch+yaml)")
        return cls(manager or manager_from_user_agent(request.headers.get("user-agent")), validation, force)

    def unknown_fields(self, info: ResourceInfo, body: Any, sub: str | None = None) -> list[str]:
        """With ``Warn`` or ``Ignore``, drop the fields the kind does not know from ``body``;
        ``Strict`` leaves them for validation to refuse."""
        if self.field_validation == "Strict":
            return []
        return drop_unknown_fields(body, shape_of(info))


def warnings_header(dropped: list[str], validation: str) -> dict[str, str]:
    if validation != "Warn" or not dropped:
        return {}
    # One Warning header value per unknown field, as Kubernetes sends them.
    return {"Warning": ", ".join(f'299 - "unknown field \\"{f}\\""' for f in dropped)}


def list_options(request: Request) -> ListOptions:
    q = request.query_params
    limit_s = q.get("limit") or "0"
    try:
        limit = int(limit_s)
    except ValueError:
        raise errors.BadRequest(f"limit: {limit_s!r} is not an integer") from None
    if not 0 <= limit <= MAX_LIMIT:
        raise errors.BadRequest(f"limit: must be between 0 and {MAX_LIMIT}, got {limit_s}")
    return ListOptions(
        label_selector=q.get("labelSelector", ""),
        field_selector=q.get("fieldSelector", ""),
        limit=min(limit, MAX_PAGE),  # more than any store holds: the same as all
        continue_token=q.get("continue", ""),
        resource_version=q.get("resourceVersion", ""),
        resource_version_match=q.get("resourceVersionMatch", ""),
        send_initial_events=_optional_bool(q.get("sendInitialEvents"), "sendInitialEvents"),
        allow_watch_bookmarks=truthy(q.get("allowWatchBookmarks")),
    )


def _optional_bool(value: str | None, name: str) -> bool | None:
    """A boolean query parameter that may be absent (None), as Kubernetes parses it."""
    if value is None:
        return None
    if value.lower() in ("true", "1", "yes", "false", "0", "no"):
        return truthy(value)
    raise errors.BadRequest(f"{name}: {value!r} is not a boolean")
