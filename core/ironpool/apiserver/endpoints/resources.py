"""The resource paths' handlers: one per Kubernetes verb, the same for every kind and subresource.

A request's method and path make its verb, as in Kubernetes: on a collection GET is ``list`` (or
``watch``) and POST ``create``; on an object GET is ``get``, PUT ``update``, PATCH ``patch``,
DELETE ``delete``; on a subresource the same, POST being ``create``. An object answers
``get``, ``update``, ``patch`` and ``delete``; a subresource the verbs its declaration lists
(:mod:`ironpool.api.subresources`), served by its handler
(:mod:`ironpool.apiserver.registry.subresources`). Anything else is a 405 before authorization.

Each handler authorizes the request (``<plural>[/<subresource>]`` in the group the path names; a
condition the authorizer returns goes into the registry's write, see
:data:`~ironpool.apiserver.auth.ObjectCheck`), reads the body and the options, and calls the registry.
The hot paths (get, list, create) pass the store's JSON through without decoding it. A request through
an alias group (:mod:`.aliased`) has its body stored, and its answer and errors reported, in the right
group.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from ironpool.api import errors
from ironpool.api.resources import strategy_for
from ironpool.apiserver.auth import Authorizer, ObjectCheck, User
from ironpool.apiserver.endpoints.aliased import (
    served_doc,
    served_error,
    served_raw,
    stored_body,
)
from ironpool.apiserver.endpoints.bodies import APPLY_PATCH, JSON, JSON_PATCH, STRATEGIC_PATCH, media_type
from ironpool.apiserver.endpoints.list_responses import list_response
from ironpool.apiserver.endpoints.request_parsing import (
    RequestInfo,
    WriteOptions,
    dry_run,
    list_options,
    truthy,
    warnings_header,
)
from ironpool.apiserver.endpoints.responses import json_response
from ironpool.apiserver.endpoints.tables import include_object, table_version, writer_for
from ironpool.apiserver.endpoints.watch_stream import WatchStreams
from ironpool.apiserver.registry.generic import PatchKind, Registry
from ironpool.apiserver.registry.subresources import HANDLERS, SubresourceHandler
from ironpool.store.interface import Store

BodyReader = Callable[..., Awaitable[Any]]
"""``read_body(request, *, patch=False, optional=False)``: the decoded request body."""
Handler = Callable[[Request, User, RequestInfo], Awaitable[tuple[str, Response]]]

#: the verb of a method on an object or subresource
_OBJECT_VERBS = {"GET": "get", "PUT": "update", "PATCH": "patch", "DELETE": "delete", "POST": "create"}
_PATCH_KINDS: dict[str, PatchKind] = {STRATEGIC_PATCH: "strategic", JSON_PATCH: "json"}
#: what the object itself answers (a POST creates in its collection)
_ON_OBJECT = frozenset({"get", "update", "patch", "delete"})


class ResourceEndpoints:
    """Serves the resource paths of one apiserver over its registry."""

    def __init__(self, registry: Registry, store: Store, authorize: Authorizer, watches: WatchStreams,
                 read_body: BodyReader) -> None:
        self.registry = registry
        self.store = store
        self.authorize = authorize
        self.watches = watches
        self.seats = watches.seats  # shared: filtered lists and watches' initial events take turns
        self.read_body = read_body
        self._verbs: dict[str, Handler] = {
            "get": self.get, "update": self.write, "patch": self.write, "delete": self.delete,
            "create": self.create_on_object,
        }

    async def serve(self, request: Request, user: User, t: RequestInfo) -> tuple[str, Response]:
        """The answer to one resource request, and its verb for the metrics."""
        if not t.aliased:
            return await self._serve(request, user, t)
        try:
            return await self._serve(request, user, t)
        except errors.ApiError as exc:
            raise served_error(t, exc) from None

    async def _serve(self, request: Request, user: User, t: RequestInfo) -> tuple[str, Response]:
        method = request.method
        if t.name is None:
            if method == "GET":
                return await self.list(request, user, t)
            if method == "POST":
                return await self.create(request, user, t)
            raise errors.MethodNotAllowed(f"{method} is not supported on a collection of {t.info.plural}")
        if t.info.namespaced and t.namespace is None:
            raise errors.NotFound(
                f"namespaced {t.info.plural} live under /namespaces/{{namespace}}/{t.info.plural}"
            )
        verb = _OBJECT_VERBS.get(method)
        sub = t.subresource
        if verb not in (_ON_OBJECT if sub is None else sub.verbs):
            hint = sub.body_hint if sub is not None else ""
            raise errors.MethodNotAllowed(f"{method} is not supported on {request.url.path}"
                                          + (f": {hint}" if hint else ""))
        assert verb is not None
        return await self._verbs[verb](request, user, t)

    # -- collections ---------------------------------------------------------------------------

    async def list(self, request: Request, user: User, t: RequestInfo) -> tuple[str, Response]:
        """``list`` or ``watch``, as JSON or as a kubectl Table."""
        info, ns = t.info, t.namespace
        verb = "watch" if truthy(request.query_params.get("watch")) else "list"
        cond = self.authorize(user, verb, info.plural, ns, None, group=t.group)
        if cond is not None and cond.selector is not None:
            cond.selector(request.query_params.get("fieldSelector", ""))
        if verb == "watch":
            return "WATCH", await self.watches.response(request, t, user.name)
        options = list_options(request)
        table = table_version(request.headers.get("accept"))
        include = include_object(request.query_params.get("includeObject")) if table is not None else "None"
        held = contextlib.AsyncExitStack()
        streams = False
        try:
            if options.label_selector or options.field_selector:
                # A filtered list matches every object, a slice per turn: one of the user's seats,
                # held until its body is written.
                await held.enter_async_context(self.seats.hold(user.name))
            listed = await self.registry.list_stream(info, ns, options)
            response, streams = list_response(t, listed, table, include, held.aclose)
        finally:
            if not streams:
                await held.aclose()
        return "LIST", response

    async def create(self, request: Request, user: User, t: RequestInfo) -> tuple[str, Response]:
        """``create`` in a collection."""
        info, ns = t.info, t.namespace
        cond = self.authorize(user, "create", info.plural, ns, None, group=t.group)
        if info.namespaced and ns is None:
            raise errors.MethodNotAllowed(f"create {info.plural} under /namespaces/{{namespace}}/")
        body = await self.read_body(request)
        stored_body(t, body)
        _record_requester(info, body, user)
        opts = WriteOptions.of(request)
        dropped = opts.unknown_fields(info, body)
        created = await self.registry.create(info, ns, body, dry_run=dry_run(request),
                                             check=cond.objects if cond else None, manager=opts.manager)
        headers = warnings_header(dropped, opts.field_validation)
        return "POST", json_response(served_doc(t, created), 201, headers)

    # -- objects and their subresources --------------------------------------------------------

    async def get(self, request: Request, user: User, t: RequestInfo) -> tuple[str, Response]:
        """``get`` of an object (as JSON or a Table) or of a subresource."""
        info, ns, name, sub = t.info, t.namespace, t.name or "", t.subresource
        cond = self.authorize(user, "get", t.resource, ns, name, group=t.group)
        if cond is not None and cond.objects is not None:  # an index unsure of a get asks the store
            await cond.objects(None, None, self.store)
        if sub is not None:
            raw = await _handler(t).get(self.registry, info, ns, name)
            return "GET", Response(served_raw(t, raw), media_type=JSON)
        raw = served_raw(t, await self.registry.get_raw(info, ns, name))
        table = table_version(request.headers.get("accept"))
        if table is not None:
            include = include_object(request.query_params.get("includeObject"))
            raw = writer_for(info).table([raw], {}, include, table)
        return "GET", Response(raw, media_type=JSON)

    async def write(self, request: Request, user: User, t: RequestInfo) -> tuple[str, Response]:
        """``update`` (PUT) and ``patch`` (PATCH: merge, strategic merge, JSON patch, or server-side
        apply) of an object or of a subresource."""
        info, ns, name, sub = t.info, t.namespace, t.name or "", t.subresource
        method = request.method
        patch = method == "PATCH"
        cond = self.authorize(user, "patch" if patch else "update", t.resource, ns, name, group=t.group)
        ctype = media_type(request)
        body = await self.read_body(request, patch=patch)
        stored_body(t, body)
        opts = WriteOptions.of(request, apply=patch and ctype == APPLY_PATCH)
        dropped = opts.unknown_fields(info, body)
        check = cond.objects if cond else None
        subresource = None if sub is None else sub.name  # its handler's rules make the object to store
        reg, dry = self.registry, dry_run(request)
        if not patch:
            obj = await reg.update(info, ns, name, body, subresource=subresource, dry_run=dry, check=check,
                                   manager=opts.manager)
        elif ctype == APPLY_PATCH:
            _record_requester(info, body, user)  # an apply may create: the same word as a POST

            def may_create() -> ObjectCheck | None:
                # Applying to a missing object creates it: that takes the right to create.
                created = self.authorize(user, "create", info.plural, ns, None, group=t.group)
                return created.objects if created else None

            obj = await reg.apply(info, ns, name, body, manager=opts.manager, force=opts.force,
                                  subresource=subresource, dry_run=dry, check=check, may_create=may_create)
        else:
            obj = await reg.patch(info, ns, name, body, subresource=subresource, dry_run=dry, check=check,
                                  manager=opts.manager, kind=_PATCH_KINDS.get(ctype, "merge"))
        headers = warnings_header(dropped, opts.field_validation)
        return method, json_response(served_doc(t, obj), headers=headers)

    async def create_on_object(self, request: Request, user: User, t: RequestInfo) -> tuple[str, Response]:
        """``create`` of a subresource (POST a Binding, an Eviction): its handler acts on the object."""
        info, ns, name = t.info, t.namespace, t.name or ""
        cond = self.authorize(user, "create", t.resource, ns, name, group=t.group)
        body = await self.read_body(request, optional=True)  # a Binding or Eviction: no object to convert
        status = await _handler(t).create(self.registry, info, ns, name, body, dry_run=dry_run(request),
                                          check=cond.objects if cond else None)
        return "POST", json_response(status, 201)

    async def delete(self, request: Request, user: User, t: RequestInfo) -> tuple[str, Response]:
        """``delete`` of an object."""
        info, ns, name = t.info, t.namespace, t.name or ""
        cond = self.authorize(user, "delete", info.plural, ns, name, group=t.group)
        options = await self.read_body(request, optional=True)
        obj = await self.registry.delete(info, ns, name, options, dry_run=dry_run(request),
                                         check=cond.objects if cond else None)
        return "DELETE", json_response(served_doc(t, obj))


def _record_requester(info: Any, body: Any, user: User) -> None:
    """Who asks is the server's word, not the body's (a CertificateSigningRequest's spec.username)."""
    if isinstance(body, dict):
        strategy_for(info).record_requester(body, user.name, user.uid, sorted(user.groups),
                                            {k: list(v) for k, v in user.extra})


def _handler(t: RequestInfo) -> SubresourceHandler:
    assert t.subresource is not None
    return HANDLERS[t.subresource.name]
