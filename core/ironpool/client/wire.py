"""The pure half of the client: building requests and decoding responses, shared by sync and async.

Nothing here does I/O. :class:`Operations` turns a call such as ``get(MachineClass, "x")`` into an
:class:`Op` (a :class:`Request` plus a function decoding the JSON answer); the sync and async
clients only differ in how they send the request.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from functools import cache
from typing import TYPE_CHECKING, Any, Generic, Literal, TypeVar, cast

import orjson

from ironpool.api.errors import ApiError, from_status

if TYPE_CHECKING:  # the raw calls never need the models: an Ansible module or a CLI command starts faster
    from pydantic import BaseModel

    from ironpool.api.resource_info import ResourceInfo

T = TypeVar("T")
M = TypeVar("M", bound="BaseModel")
U = TypeVar("U")

Obj = dict[str, Any]
WatchEventType = Literal["ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"]
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"  # a JSON body is YAML too
#: What kubectl asks for on ``get``: the server renders the kind's columns (``meta.k8s.io`` Table).
TABLE_ACCEPT = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"


class ServerUnreachable(Exception):
    """The apiserver could not be reached (connection refused, reset, TLS or timeout)."""


@dataclass(frozen=True)
class Request:
    """One HTTP request, relative to the server URL."""

    method: str
    path: str
    params: dict[str, str] = field(default_factory=dict)
    body: Any = None
    content_type: str = "application/json"
    accept: str | None = None

    def content(self) -> bytes | None:
        return None if self.body is None else orjson.dumps(self.body)

    def headers(self) -> dict[str, str]:
        headers = {"Content-Type": self.content_type} if self.body is not None else {}
        if self.accept:
            headers["Accept"] = self.accept
        return headers


@dataclass(frozen=True)
class Op(Generic[T]):
    """A request and how to turn its decoded JSON body into the caller's result."""

    request: Request
    decode: Callable[[Any], T]

    def map(self, fn: Callable[[T], U]) -> Op[U]:
        inner = self.decode
        return Op(self.request, lambda body: fn(inner(body)))


@dataclass(frozen=True)
class ListResult(Generic[T]):
    """One page of a list: the items, the revision it was read at, and the token for the next page."""

    items: list[T]
    resource_version: str
    continue_: str | None = None


@dataclass(frozen=True)
class WatchEvent(Generic[T]):
    """One change from a watch stream. BOOKMARK events carry only ``metadata.resourceVersion``."""

    type: WatchEventType
    object: T
    resource_version: str = ""


@cache
def resource_for_model(model: type[BaseModel]) -> ResourceInfo:
    """The ResourceInfo whose pydantic model is ``model``."""
    from ironpool.api.resources import RESOURCES

    for info in RESOURCES:
        if info.model is model:
            return cast("ResourceInfo", info)
    raise TypeError(f"{model.__name__} is not a registered ironpool resource")


def to_json(obj: BaseModel | Obj) -> Obj:
    """The wire form of a model (aliases, no None fields) or a dict as-is."""
    if not isinstance(obj, dict):  # a pydantic model
        return cast(Obj, obj.model_dump(mode="json", by_alias=True, exclude_none=True))
    return obj


def decode_body(status_code: int, content: bytes) -> Any:
    """The JSON body of a successful response, or the matching ApiError raised from a Status."""
    body: Any = None
    if content:
        try:
            body = orjson.loads(content)
        except orjson.JSONDecodeError:
            body = None
    if 200 <= status_code < 300:
        if content and body is None:
            raise ApiError(message=f"server sent a non-JSON response (HTTP {status_code})")
        return body
    if isinstance(body, dict) and body.get("kind") == "Status":
        raise from_status(body, status_code)
    text = content.decode("utf-8", "replace").strip()[:300] if content else ""
    raise from_status({"message": text or f"HTTP {status_code}", "code": status_code}, status_code)


def parse_watch_line(line: str | bytes) -> WatchEvent[Obj] | None:
    """One newline-delimited watch event; ERROR events are raised (Expired for 410)."""
    if not line or not line.strip():
        return None
    try:
        raw = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        raise ApiError(message=f"malformed watch event: {exc}") from exc
    etype = raw.get("type")
    obj = raw.get("object") or {}
    if etype == "ERROR":
        raise from_status(obj, int(obj.get("code") or 500))
    if etype not in ("ADDED", "MODIFIED", "DELETED", "BOOKMARK"):
        raise ApiError(message=f"unknown watch event type {etype!r}")
    rv = str((obj.get("metadata") or {}).get("resourceVersion") or "")
    return WatchEvent(type=etype, object=obj, resource_version=rv)


def meta(obj: Obj) -> Obj:
    return cast(Obj, obj.get("metadata") or {})


def _write_params(dry_run: bool, field_manager: str | None = None) -> dict[str, str]:
    """``dryRun`` and ``fieldManager`` of a write (the manager the server records the fields under;
    without one it names the user agent)."""
    params: dict[str, str] = {}
    if dry_run:
        params["dryRun"] = "All"
    if field_manager:
        params["fieldManager"] = field_manager
    return params


def _decode_list(body: Any) -> ListResult[Obj]:
    md = body.get("metadata") or {}
    return ListResult(
        items=list(body.get("items") or []),
        resource_version=str(md.get("resourceVersion") or ""),
        continue_=md.get("continue") or None,
    )


def _identity(body: Any) -> Any:
    return body


def _decode_deleted(body: Any) -> Obj | None:
    # A plain Status(Success) means the object is gone; an object means finalizers keep it for now.
    if isinstance(body, dict) and body.get("kind") == "Status":
        return None
    return cast(Obj | None, body)


class Operations:
    """Builds the Op for every API call; ``namespace`` is the default for namespaced kinds."""

    def __init__(self, default_namespace: str) -> None:
        self.default_namespace = default_namespace

    # -- paths -------------------------------------------------------------------------------

    def namespace_for(self, info: ResourceInfo, namespace: str | None, obj: Obj | None = None) -> str | None:
        """The namespace an object call goes to: None for cluster-scoped kinds."""
        if not info.namespaced:
            return None
        return namespace or (meta(obj).get("namespace") if obj else None) or self.default_namespace

    def path(self, info: ResourceInfo, namespace: str | None, name: str | None = None,
             subresource: str | None = None) -> str:
        if name is not None and not name:
            raise ValueError(f"{info.kind}: name must not be empty")
        path = str(info.path(namespace, name))
        if subresource:
            if name is None:
                raise ValueError("a subresource needs an object name")
            path = f"{path}/{subresource}"
        return path

    # -- raw (dict) operations ---------------------------------------------------------------

    def get_raw(self, info: ResourceInfo, name: str, namespace: str | None = None,
                accept: str | None = None) -> Op[Obj]:
        """A GET; ``accept`` asks for another representation (:data:`TABLE_ACCEPT`)."""
        ns = self.namespace_for(info, namespace)
        return Op(Request("GET", self.path(info, ns, name), accept=accept), _identity)

    def list_raw(
        self,
        info: ResourceInfo,
        namespace: str | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        limit: int | None = None,
        continue_: str | None = None,
    ) -> Op[ListResult[Obj]]:
        """A list; ``namespace=None`` lists every namespace of a namespaced kind."""
        params: dict[str, str] = {}
        if label_selector:
            params["labelSelector"] = label_selector
        if field_selector:
            params["fieldSelector"] = field_selector
        if limit:
            params["limit"] = str(limit)
        if continue_:
            params["continue"] = continue_
        ns = namespace if info.namespaced else None
        return Op(Request("GET", self.path(info, ns), params), _decode_list)

    def table_raw(self, info: ResourceInfo, namespace: str | None = None, label_selector: str | None = None,
                  field_selector: str | None = None, limit: int | None = None,
                  continue_: str | None = None) -> Op[Obj]:
        """A list as the server prints it: a ``meta.k8s.io/v1`` Table (a server that cannot print
        answers the plain list; the caller checks ``kind``)."""
        op = self.list_raw(info, namespace, label_selector, field_selector, limit, continue_)
        return Op(replace(op.request, accept=TABLE_ACCEPT), _identity)

    def create_raw(self, info: ResourceInfo, obj: Obj, namespace: str | None = None,
                   dry_run: bool = False, field_manager: str | None = None) -> Op[Obj]:
        ns = self.namespace_for(info, namespace, obj)
        body = dict(obj)
        body.setdefault("apiVersion", info.api_version)
        body.setdefault("kind", info.kind)
        if ns is not None:
            body["metadata"] = {**meta(obj), "namespace": ns}
        params = _write_params(dry_run, field_manager)
        return Op(Request("POST", self.path(info, ns), params, body), _identity)

    def update_raw(self, info: ResourceInfo, obj: Obj, namespace: str | None = None,
                   dry_run: bool = False, subresource: str | None = None,
                   field_manager: str | None = None) -> Op[Obj]:
        ns = self.namespace_for(info, namespace, obj)
        name = str(meta(obj).get("name") or "")
        body = dict(obj)
        body.setdefault("apiVersion", info.api_version)
        body.setdefault("kind", info.kind)
        params = _write_params(dry_run, field_manager)
        return Op(Request("PUT", self.path(info, ns, name, subresource), params, body), _identity)

    def patch_raw(self, info: ResourceInfo, name: str, patch: Obj, namespace: str | None = None,
                  subresource: str | None = None, dry_run: bool = False, field_manager: str | None = None,
                  patch_type: str = MERGE_PATCH) -> Op[Obj]:
        """A PATCH: a JSON merge patch, or ``patch_type`` :data:`STRATEGIC_PATCH`."""
        ns = self.namespace_for(info, namespace)
        params = _write_params(dry_run, field_manager)
        path = self.path(info, ns, name, subresource)
        return Op(Request("PATCH", path, params, patch, patch_type), _identity)

    def apply_raw(self, info: ResourceInfo, name: str, obj: Obj, field_manager: str,
                  namespace: str | None = None, force: bool = False, subresource: str | None = None,
                  dry_run: bool = False) -> Op[Obj]:
        """Server-side apply of ``obj`` as ``field_manager`` (``force``: take over conflicting fields)."""
        ns = self.namespace_for(info, namespace)
        params = _write_params(dry_run, field_manager)
        if force:
            params["force"] = "true"
        path = self.path(info, ns, name, subresource)
        return Op(Request("PATCH", path, params, obj, APPLY_PATCH), _identity)

    def bind_raw(self, info: ResourceInfo, name: str, target_kind: str, target: str,
                 namespace: str | None = None, resource_version: str | None = None,
                 dry_run: bool = False) -> Op[Obj]:
        """POST a ``v1`` Binding to the object's ``binding`` subresource (Kubernetes' pods/binding):
        ``target`` names the pool; ``resource_version`` is a precondition. Answers the Status, whose
        ``metadata.resourceVersion`` is the bound object's."""
        ns = self.namespace_for(info, namespace)
        metadata: Obj = {"name": name}
        if resource_version:
            metadata["resourceVersion"] = str(resource_version)
        body = {"apiVersion": "v1", "kind": "Binding", "metadata": metadata,
                "target": {"kind": target_kind, "name": target}}
        path = self.path(info, ns, name, "binding")
        return Op(Request("POST", path, _write_params(dry_run), body), _identity)

    def evict_raw(self, info: ResourceInfo, name: str, namespace: str | None = None, uid: str | None = None,
                  resource_version: str | None = None, dry_run: bool = False) -> Op[Obj]:
        """POST a ``policy/v1`` Eviction to the object's ``eviction`` subresource (Kubernetes'
        pods/eviction; for a Machine it unbinds it from its pool). ``uid`` and ``resource_version``
        are preconditions. Answers the Status."""
        ns = self.namespace_for(info, namespace)
        preconditions = {k: str(v) for k, v in (("uid", uid), ("resourceVersion", resource_version)) if v}
        body: Obj = {"apiVersion": "policy/v1", "kind": "Eviction",
                     "metadata": {"name": name, "namespace": ns}}
        if preconditions:
            body["deleteOptions"] = {"preconditions": preconditions}
        path = self.path(info, ns, name, "eviction")
        return Op(Request("POST", path, _write_params(dry_run), body), _identity)

    def delete_raw(self, info: ResourceInfo, name: str, namespace: str | None = None,
                   resource_version: str | None = None, dry_run: bool = False) -> Op[Obj | None]:
        ns = self.namespace_for(info, namespace)
        body = None
        if resource_version:
            body = {"kind": "DeleteOptions", "apiVersion": "v1",
                    "preconditions": {"resourceVersion": str(resource_version)}}
        return Op(Request("DELETE", self.path(info, ns, name), _write_params(dry_run), body), _decode_deleted)

    def watch_request(
        self,
        info: ResourceInfo,
        namespace: str | None = None,
        resource_version: str | int | None = None,
        label_selector: str | None = None,
        field_selector: str | None = None,
        timeout_seconds: int | None = None,
        allow_bookmarks: bool = True,
        accept: str | None = None,
    ) -> Request:
        params: dict[str, str] = {"watch": "true"}
        if resource_version not in (None, ""):
            params["resourceVersion"] = str(resource_version)
        if allow_bookmarks:
            params["allowWatchBookmarks"] = "true"
        if label_selector:
            params["labelSelector"] = label_selector
        if field_selector:
            params["fieldSelector"] = field_selector
        if timeout_seconds:
            params["timeoutSeconds"] = str(int(timeout_seconds))
        ns = namespace if info.namespaced else None
        return Request("GET", self.path(info, ns), params, accept=accept)


def typed(model: type[M]) -> Callable[[Any], M]:
    """A decoder validating a JSON object into ``model``."""
    return model.model_validate


def typed_list(model: type[M]) -> Callable[[ListResult[Obj]], ListResult[M]]:
    def convert(page: ListResult[Obj]) -> ListResult[M]:
        items = [model.model_validate(i) for i in page.items]
        return ListResult(items, page.resource_version, page.continue_)
    return convert


def typed_event(model: type[M], event: WatchEvent[Obj]) -> WatchEvent[M] | None:
    """A watch event with its object validated; None for a BOOKMARK (it carries no object)."""
    if event.type == "BOOKMARK":
        return None
    return WatchEvent(event.type, model.model_validate(event.object), event.resource_version)
