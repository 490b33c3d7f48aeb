"""Kubernetes' RBAC escalation check: a user may write a Role or ClusterRole only with rules they
hold themselves (or with the ``escalate`` verb on it), and a binding only to a role whose rules they
hold (or with the ``bind`` verb on that role); held means in the namespace of the Role or
RoleBinding, cluster-wide for the cluster kinds. So the ``admin`` of a namespace can hand out
``edit`` there, but cannot bind ``cluster-admin``. A ClusterRole with an ``aggregationRule`` may
gather any rules, so writing one needs every permission (or ``escalate``), as in Kubernetes."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ironpool.apiserver.auth.authentication import User
from ironpool.apiserver.auth.pool_authorizer import forbidden
from ironpool.apiserver.auth.rbac.defaults import FULL_AUTHORITY
from ironpool.apiserver.auth.rbac.index import RBACIndex
from ironpool.apiserver.auth.rbac.rules import Rule, compile_rules
from ironpool.store.interface import Document

RBAC_GROUP = "rbac.authorization.k8s.io"
ROLE_KINDS = frozenset({"roles", "clusterroles"})
BINDING_KINDS = frozenset({"rolebindings", "clusterrolebindings"})


def _atoms(rule: Rule) -> Iterator[tuple[str, ...]]:
    """The single permissions a rule grants, with its ``*`` taken literally (only ``*`` covers ``*``)."""
    for verb in sorted(rule.verbs):
        for url in rule.urls:
            yield ("url", verb, url)
        for group in sorted(rule.groups):
            for resource in sorted(rule.resources):
                for name in sorted(rule.names) or [""]:
                    yield ("resource", verb, group, resource, name)


def not_held(owner: tuple[Rule, ...], wanted: tuple[Rule, ...]) -> list[str]:
    """The permissions of ``wanted`` that no rule of ``owner`` covers, described."""
    missing: list[str] = []
    for rule in wanted:
        for atom in _atoms(rule):
            if atom[0] == "url":
                held = any(r.allows_url(atom[1], atom[2]) for r in owner)
                what = f"{{nonResourceURLs: [{atom[2]}], verbs: [{atom[1]}]}}"
            else:
                _, verb, group, resource, name = atom
                base, _, sub = resource.partition("/")
                held = any(r.allows(verb, group, base, sub, name or None) for r in owner)
                names = f", resourceNames: [{name}]" if name else ""
                what = f"{{apiGroups: [{group!r}], resources: [{resource}]{names}, verbs: [{verb}]}}"
            if not held and what not in missing:
                missing.append(what)
    return missing


def check_escalation(index: RBACIndex, user: User, verb: str, resource: str, namespace: str | None,
                     name: str | None, new: Document | None) -> None:
    """Raise Forbidden if writing ``new`` (a role or binding) would grant what ``user`` does not hold."""
    if new is None:
        return  # deleting grants nothing
    held = index.rules_for(user, namespace)
    if resource in ROLE_KINDS:
        if index.allows(user, "escalate", RBAC_GROUP, resource, "", namespace, name):
            return
        wanted = compile_rules(FULL_AUTHORITY if new.get("aggregationRule") else new.get("rules"))
    else:
        ref: Any = new.get("roleRef") or {}
        kind, role = str(ref.get("kind") or ""), str(ref.get("name") or "")
        role_resource = "clusterroles" if kind == "ClusterRole" else "roles"
        if index.allows(user, "bind", RBAC_GROUP, role_resource, "", namespace, role):
            return
        if kind == "ClusterRole":
            wanted = index.cluster_roles.get(role, ())
        else:
            wanted = index.roles.get((namespace or "", role), ())
    missing = not_held(held, wanted)
    if missing:
        shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
        name = name or str((new.get("metadata") or {}).get("name") or "")
        reason = f'user "{user.name}" is attempting to grant RBAC permissions not currently held: {shown}'
        raise forbidden(user, verb, resource, namespace, name, reason)
