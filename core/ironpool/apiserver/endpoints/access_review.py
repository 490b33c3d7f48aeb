"""SelfSubjectAccessReview (``authorization.k8s.io/v1``): "may I ...?", asked by ``kubectl auth
can-i`` and ``ironpool auth can-i``. Not stored: the answer comes back in ``status``, as in Kubernetes.
Every authenticated user may ask about themselves (Kubernetes' ``system:basic-user``). The review
may come as JSON or, as kubectl sends it, as Kubernetes protobuf (:mod:`.protobuf`); the
answer is JSON (both clients accept it)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any, Protocol

import orjson
from starlette.requests import Request
from starlette.responses import Response

from ironpool.api import errors
from ironpool.apiserver.auth.authentication import User
from ironpool.apiserver.auth.authorizer import Authorization, Decision
from ironpool.apiserver.auth.interface import Authorizer
from ironpool.apiserver.endpoints.bodies import LargeBodies, media_type, read_bytes
from ironpool.apiserver.endpoints.protobuf import PROTOBUF, review_spec

SSAR_PATH = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"
_KIND = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview"}


class Server(Protocol):
    authorize: Authorizer
    large_bodies: LargeBodies

    async def identify(self, request: Request) -> User: ...

    async def read_body(self, request: Request, *, patch: bool = False, optional: bool = False) -> Any: ...


async def read_review(server: Server, request: Request,
                      from_protobuf: Callable[[bytes], dict[str, Any]]) -> tuple[User, dict[str, Any]]:
    """Who asks (after impersonation), and the review they sent, as JSON or as Kubernetes protobuf
    (its ``spec`` read by ``from_protobuf``)."""
    user = await server.identify(request)  # the first request may be this one: the indexes must be up
    async with contextlib.AsyncExitStack() as stack:
        request.state.exit_stack = stack
        if media_type(request) == PROTOBUF:
            body: Any = {"spec": from_protobuf(await read_bytes(request, server.large_bodies, stack))}
        else:
            body = await server.read_body(request, optional=True) or {}
    if not isinstance(body, dict):
        raise errors.BadRequest("the body must be a review object")
    return user, body


def review_response(kind: dict[str, str], spec: Any, status: dict[str, Any]) -> Response:
    """A review's answer (201, as Kubernetes answers a create): what was asked, and the status."""
    out = {**kind, "metadata": {"creationTimestamp": None}, "status": status}
    if spec is not None:
        out["spec"] = spec
    return Response(orjson.dumps(out), status_code=201, media_type="application/json")


def error_json(exc: errors.ApiError) -> Response:
    return Response(orjson.dumps(exc.to_status()), status_code=exc.code, media_type="application/json")


def _string(spec: dict[str, Any], key: str, path: str) -> str:
    value = spec.get(key)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise _invalid(f"{path}.{key}", "Invalid value: must be a string")
    return value


def review(authorization: Authorizer, user: User, spec: Any) -> Decision:
    """The answer to a review's ``spec``; 422 naming the field for a malformed one."""
    if not isinstance(spec, dict):
        raise _invalid("spec", "Required value: resourceAttributes or nonResourceAttributes")
    res, non = spec.get("resourceAttributes"), spec.get("nonResourceAttributes")
    if (res is None) == (non is None):
        raise _invalid("spec", "Invalid value: exactly one of resourceAttributes and nonResourceAttributes "
                               "must be set")
    if not isinstance(authorization, Authorization):  # a custom authorizer: what it answers for the plural
        return Decision(True)
    if non is not None:
        if not isinstance(non, dict):
            raise _invalid("spec.nonResourceAttributes", "Invalid value: must be an object")
        path = "spec.nonResourceAttributes"
        return authorization.decide_url(user, _string(non, "verb", path), _string(non, "path", path))
    if not isinstance(res, dict):
        raise _invalid("spec.resourceAttributes", "Invalid value: must be an object")
    path = "spec.resourceAttributes"
    verb, resource = _string(res, "verb", path), _string(res, "resource", path)
    if not verb:
        raise _invalid(f"{path}.verb", "Required value")
    return authorization.decide(
        user, verb, _string(res, "group", path), resource, _string(res, "subresource", path),
        _string(res, "namespace", path) or None, _string(res, "name", path) or None)


def _invalid(field: str, message: str) -> errors.ApiError:
    reason = "FieldValueRequired" if message.startswith("Required") else "FieldValueInvalid"
    return errors.Invalid(f"SelfSubjectAccessReview is invalid: {field}: {message}",
                          kind="SelfSubjectAccessReview", group="authorization.k8s.io",
                          causes=[errors.Cause(field, message, reason)])


async def self_subject_access_review(server: Server, request: Request) -> Response:
    """``POST /apis/authorization.k8s.io/v1/selfsubjectaccessreviews``."""
    try:
        user, body = await read_review(server, request, review_spec)
        decision = review(server.authorize, user, body.get("spec"))
    except errors.ApiError as exc:
        return error_json(exc)
    status: dict[str, Any] = {"allowed": decision.allowed}
    if decision.reason:
        status["reason"] = decision.reason
    return review_response(_KIND, body.get("spec"), status)
