"""Who is asking and what they may do: authentication from client certificates and the static-token
file (:mod:`.authentication`, :mod:`.tokenfile`), and authorization (what an authorizer is:
:mod:`.interface`) as Kubernetes' ``Node,RBAC`` chain (:mod:`.authorizer`): pool identities by the
pool rules and the pool graph (:mod:`.pool_authorizer`, :mod:`.pool_graph`), everyone else by RBAC
(:mod:`.rbac`). The SelfSubjectAccessReview endpoint that asks it is
:mod:`ironpool.apiserver.endpoints.access_review`."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ironpool.lazy import lazy_exports

if TYPE_CHECKING:
    from ironpool.apiserver.auth.authentication import ADMIN_GROUP, Authenticator, User, parse_token_file
    from ironpool.apiserver.auth.interface import Authorizer, Conditions, ObjectCheck

# Imported on first use: the registry needs only the authorization types, not the RBAC indexes.
_MODULES = {
    "ADMIN_GROUP": "authentication", "Authenticator": "authentication", "User": "authentication",
    "parse_token_file": "authentication", "Authorizer": "interface", "Conditions": "interface",
    "ObjectCheck": "interface",
}

__all__ = ["ADMIN_GROUP", "Authenticator", "Authorizer", "Conditions", "ObjectCheck", "User",
           "parse_token_file"]

__getattr__ = lazy_exports(__name__, _MODULES)
