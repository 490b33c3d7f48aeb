"""Requests that name a resource through an alias group (:mod:`ironpool.api.group_aliases`): what they
send is stored in the resource's own group, what they get back is in the group they named.

The store holds one object per name, with the apiVersion of the group it is stored under
(``compute.ironcore.dev/v1alpha1``). Kubernetes reports a resource it serves in several groups in the
group of the request, so a read through ``compute.openkcm.dev`` answers ``compute.openkcm.dev/v1alpha1``:
the object of a get, a write's answer, each item of a list, each watch event, the objects a Table
embeds, and the group an error names. A body sent through an alias must name that group (its case
folded, :func:`~ironpool.api.group_aliases.fold_group_case`) and is stored under the canonical one.
``metadata.managedFields`` keep naming the stored group-version: a field set is the same in either
group, and it is tracked in the version the object is stored in.

A request through the resource's own group is passed through (the handlers test
:attr:`~.request_parsing.RequestInfo.aliased` first): its only extra work is the case fold of a body
whose apiVersion is not spelled as served.
"""

from __future__ import annotations

import functools
from typing import Any

import orjson

from ironpool.api import errors
from ironpool.api.group_aliases import fold_group_case
from ironpool.api.resource_info import ResourceInfo
from ironpool.apiserver.endpoints.request_parsing import RequestInfo
from ironpool.store.interface import Document


def stored_body(t: RequestInfo, body: Any) -> None:
    """Put the apiVersion of a create, update, patch or apply body into the stored group, in place: a
    body through an alias names the alias, any body may spell its group in capitals. Raises BadRequest
    for a body through an alias that names another group or kind (Kubernetes: the API version in the
    data must be the request's); through the resource's own group that is the registry's to refuse."""
    if not isinstance(body, dict) or "apiVersion" not in body:
        return  # a JSON patch (its operations apply to the stored object), or nothing to convert
    sent = body["apiVersion"]
    if sent == t.info.api_version and not t.aliased:
        return  # the common case
    matches = isinstance(sent, str) and fold_group_case(sent) == t.served.api_version
    if t.aliased and (not matches or body.get("kind", t.served.kind) != t.served.kind):
        served = f"{t.served.api_version}/{t.served.kind}"
        raise errors.BadRequest(f"the body is {sent}/{body.get('kind')} but the path is for {served}",
                                kind=t.info.plural, group=t.group)
    if matches:
        body["apiVersion"] = t.info.api_version


def served_doc(t: RequestInfo, obj: Document) -> Document:
    """An object of the answer as the request's group reports it (a copy; ``obj`` may be cached)."""
    if not t.aliased or obj.get("apiVersion") != t.info.api_version:
        return obj
    return {**obj, "apiVersion": t.served.api_version}


@functools.cache
def _prefixes(served: ResourceInfo) -> tuple[bytes, bytes]:
    """How stored JSON starts (the registry writes apiVersion first), and how the alias's starts."""
    stored = served.canonical.api_version
    return (b'{"apiVersion":' + orjson.dumps(stored), b'{"apiVersion":' + orjson.dumps(served.api_version))


def served_raw(t: RequestInfo, raw: bytes) -> bytes:
    """Stored JSON as the request's group reports it: its leading apiVersion replaced in the bytes,
    or, for JSON not laid out as the registry writes it, decoded and encoded again."""
    if not t.aliased:
        return raw
    stored, served = _prefixes(t.served)
    if raw.startswith(stored):
        return served + raw[len(stored):]
    obj = orjson.loads(raw)
    return orjson.dumps(served_doc(t, obj)) if isinstance(obj, dict) else raw


def served_error(t: RequestInfo, exc: errors.ApiError) -> errors.ApiError:
    """An error about the requested resource naming the request's group (``machines.compute.openkcm.dev
    "x" not found``), as Kubernetes names the group of the request; errors about other resources (a
    Volume a Machine refers to) are left as they are."""
    info, served = t.info, t.served
    if not t.aliased or exc.group != info.group or exc.kind not in (info.plural, info.kind):
        return exc
    exc.group = served.group
    for stored_name, served_name in ((info.group_resource, served.group_resource),
                                     (info.qualified_kind, served.qualified_kind)):
        exc.message = exc.message.replace(stored_name, served_name)
    return exc
