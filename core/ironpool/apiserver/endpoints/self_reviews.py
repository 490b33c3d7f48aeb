"""What a user may ask about themselves besides "may I ...?" (:mod:`.access_review`):

- SelfSubjectRulesReview (``authorization.k8s.io/v1``): every rule that applies to them in a
  namespace, which ``kubectl auth can-i --list`` prints;
- SelfSubjectReview (``authentication.k8s.io/v1``): who the server takes them for (user, uid,
  groups, extra), which ``kubectl auth whoami`` prints.

Neither is stored, both answer whoever asks about themselves (Kubernetes' ``system:basic-user``), and
both see the user a request impersonates. The three reviews are listed in discovery
(:data:`REVIEW_RESOURCES`).
"""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from ironpool.api import errors
from ironpool.apiserver.auth.authorizer import Authorization, RulesReview
from ironpool.apiserver.auth.rbac.index import AUTHENTICATED_GROUP
from ironpool.apiserver.auth.rbac.rules import Rule
from ironpool.apiserver.endpoints.access_review import (
    SSAR_PATH,
    Server,
    error_json,
    read_review,
    review_response,
)
from ironpool.apiserver.endpoints.protobuf import rules_review_spec

AUTHORIZATION, AUTHENTICATION = "authorization.k8s.io", "authentication.k8s.io"
SSRR_PATH = f"/apis/{AUTHORIZATION}/v1/selfsubjectrulesreviews"
SSR_PATH = f"/apis/{AUTHENTICATION}/v1/selfsubjectreviews"
REVIEW_PATHS = frozenset({SSAR_PATH, SSRR_PATH, SSR_PATH})
#: what discovery lists of each review group (they take a create, nothing else)
REVIEW_RESOURCES: dict[tuple[str, str], tuple[tuple[str, str, str], ...]] = {
    (AUTHORIZATION, "v1"): (
        ("selfsubjectaccessreviews", "selfsubjectaccessreview", "SelfSubjectAccessReview"),
        ("selfsubjectrulesreviews", "selfsubjectrulesreview", "SelfSubjectRulesReview"),
    ),
    (AUTHENTICATION, "v1"): (("selfsubjectreviews", "selfsubjectreview", "SelfSubjectReview"),),
}
#: what every user may do whatever their roles: ask these reviews (Kubernetes' system:basic-user)
_BASIC_USER = (
    {"verbs": ["create"], "apiGroups": [AUTHORIZATION],
     "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"]},
    {"verbs": ["create"], "apiGroups": [AUTHENTICATION], "resources": ["selfsubjectreviews"]},
)


def _resource_rule(rule: Rule) -> dict[str, Any]:
    out: dict[str, Any] = {"verbs": sorted(rule.verbs), "apiGroups": sorted(rule.groups),
                           "resources": sorted(rule.resources)}
    if rule.names:
        out["resourceNames"] = sorted(rule.names)
    return out


def rules_status(review: RulesReview) -> dict[str, Any]:
    """A SelfSubjectRulesReview's ``status`` in Kubernetes' form."""
    status: dict[str, Any] = {
        "resourceRules": [*_BASIC_USER, *(_resource_rule(r) for r in review.resource_rules)],
        "nonResourceRules": [{"verbs": sorted(r.verbs), "nonResourceURLs": list(r.urls)}
                             for r in review.non_resource_rules],
        "incomplete": review.incomplete,
    }
    if review.error:
        status["evaluationError"] = review.error
    return status


async def self_subject_rules_review(server: Server, request: Request) -> Response:
    """``POST /apis/authorization.k8s.io/v1/selfsubjectrulesreviews``: 422 without ``spec.namespace``
    (as Kubernetes); the cluster-wide rules come with every namespace's."""
    try:
        user, body = await read_review(server, request, rules_review_spec)
        spec = body.get("spec")
        namespace = spec.get("namespace") if isinstance(spec, dict) else None
        if not isinstance(namespace, str) or not namespace:
            required = errors.Cause("spec.namespace", "Required value", "FieldValueRequired")
            raise errors.Invalid("SelfSubjectRulesReview is invalid: spec.namespace: Required value",
                                 kind="SelfSubjectRulesReview", group=AUTHORIZATION, causes=[required])
        authorize = server.authorize
        if isinstance(authorize, Authorization):
            review = authorize.rules_review(user, namespace)
        else:
            review = RulesReview((), (), incomplete=True, error="this apiserver's authorizer lists no rules")
    except errors.ApiError as exc:
        return error_json(exc)
    return review_response({"apiVersion": f"{AUTHORIZATION}/v1", "kind": "SelfSubjectRulesReview"},
                           {"namespace": namespace}, rules_status(review))


async def self_subject_review(server: Server, request: Request) -> Response:
    """``POST /apis/authentication.k8s.io/v1/selfsubjectreviews``: the user's attributes."""
    try:
        user, _ = await read_review(server, request, lambda body: {})
    except errors.ApiError as exc:
        return error_json(exc)
    info: dict[str, Any] = {"username": user.name, "groups": sorted(user.groups | {AUTHENTICATED_GROUP})}
    if user.uid:
        info["uid"] = user.uid
    if user.extra:
        info["extra"] = {key: list(values) for key, values in user.extra}
    return review_response({"apiVersion": f"{AUTHENTICATION}/v1", "kind": "SelfSubjectReview"}, None,
                           {"userInfo": info})
