"""The ClusterRoles and ClusterRoleBindings every installation starts with, as Kubernetes' bootstrap
policy has them, for ironpool's resources:

- ``cluster-admin``: everything (bound to ``system:masters``);
- ``admin``: what ``edit`` may, plus Roles and RoleBindings of the namespace (bind it per namespace);
- ``edit``: create, change and delete the workload kinds (Machines, Reservations, Volumes,
  VolumeSnapshots, NICs, Networks, Prefixes, Secrets), evict Machines, open their consoles
  (``machines/exec``), read them and Events, Leases and the Namespace;
- ``view``: read the workload kinds except Secrets, and the namespace's ResourceQuotas (as
  Kubernetes' ``view`` reads ``resourcequotas``: ``admin`` and ``edit``, which include it, read them
  too, and only ``cluster-admin`` changes them, so a namespace's users cannot lift their own limits);
- ``system:discovery``: ``/version``, ``/api``, ``/apis`` and ``/openapi`` (bound to
  ``system:authenticated``).

Every rule on an IronCore group names its alias groups too (``compute.ironcore.dev`` and
``compute.openkcm.dev``, :mod:`ironpool.api.group_aliases`): RBAC matches rules per group, so a role
that grants machines in one group only does not reach them through the other; the default roles grant
the same in both, so their users see one API under either name.

They carry ``rbac.authorization.kubernetes.io/autoupdate: "true"``: the apiserver puts back one that
is missing, and the rules of one whose annotation is still ``true``, at each start.
"""

from __future__ import annotations

from typing import Any

from ironpool.api.group_aliases import aliases_of
from ironpool.api.rbac import RBAC_GROUP, RBAC_VERSION

AUTOUPDATE = "rbac.authorization.kubernetes.io/autoupdate"
COMPUTE, STORAGE, NETWORKING = "compute.ironcore.dev", "storage.ironcore.dev", "networking.ironcore.dev"
QUOTA = "core.ironcore.dev"
_READ = ["get", "list", "watch"]
_WRITE = ["create", "update", "patch", "delete", "deletecollection"]
_WORKLOADS: list[tuple[str, list[str]]] = [
    (COMPUTE, ["machines", "reservations"]),
    (STORAGE, ["volumes", "volumesnapshots"]),
    (NETWORKING, ["networks", "networkinterfaces", "prefixes"]),
]


def _rule(verbs: list[str], group: str, resources: list[str]) -> dict[str, Any]:
    return {"verbs": verbs, "apiGroups": [group, *aliases_of(group)], "resources": resources}


def _view() -> list[dict[str, Any]]:
    rules = [_rule(_READ, g, [*res, *(f"{r}/status" for r in res)]) for g, res in _WORKLOADS]
    rules.append(_rule(_READ, "", ["events", "namespaces"]))
    rules.append(_rule(_READ, "coordination.k8s.io", ["leases"]))
    rules.append(_rule(_READ, QUOTA, ["resourcequotas", "resourcequotas/status"]))
    return rules


def _edit() -> list[dict[str, Any]]:
    rules = [_rule(_WRITE, g, res) for g, res in _WORKLOADS]
    rules.append(_rule(_READ + _WRITE, "", ["secrets"]))
    rules.append(_rule(["create", "update", "patch"], "", ["events"]))
    rules.append(_rule(["create"], COMPUTE, ["machines/eviction"]))  # as edit may create pods/eviction
    rules.append(_rule(["create"], COMPUTE, ["machines/exec"]))  # the console, as edit may create pods/exec
    return rules + _view()


def _admin() -> list[dict[str, Any]]:
    return [_rule(_READ + _WRITE, RBAC_GROUP, ["roles", "rolebindings"]), *_edit()]


def _object(kind: str, name: str, **fields: Any) -> dict[str, Any]:
    meta = {"name": name, "labels": {"kubernetes.io/bootstrapping": "rbac-defaults"},
            "annotations": {AUTOUPDATE: "true"}}
    return {"apiVersion": f"{RBAC_GROUP}/{RBAC_VERSION}", "kind": kind, "metadata": meta, **fields}


def _binding(name: str, role: str, group: str) -> dict[str, Any]:
    return _object("ClusterRoleBinding", name,
                   roleRef={"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": role},
                   subjects=[{"apiGroup": RBAC_GROUP, "kind": "Group", "name": group}])


CLUSTER_ROLES: tuple[dict[str, Any], ...] = (
    _object("ClusterRole", "cluster-admin", rules=[
        {"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]},
        {"verbs": ["*"], "nonResourceURLs": ["*"]},
    ]),
    _object("ClusterRole", "admin", rules=_admin()),
    _object("ClusterRole", "edit", rules=_edit()),
    _object("ClusterRole", "view", rules=_view()),
    _object("ClusterRole", "system:discovery", rules=[
        {"verbs": ["get"], "nonResourceURLs": ["/version", "/version/", "/api", "/api/*", "/apis", "/apis/*",
                                               "/openapi", "/openapi/*", "/openapi.json", "/healthz",
                                               "/livez", "/readyz"]},
    ]),
)
CLUSTER_ROLE_BINDINGS: tuple[dict[str, Any], ...] = (
    _binding("cluster-admin", "cluster-admin", "system:masters"),
    _binding("system:discovery", "system:discovery", "system:authenticated"),
)
