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
  ``system:authenticated``);
- ``system:node-bootstrapper``: create and read CertificateSigningRequests, nothing else (bound to
  ``system:bootstrappers``, the group of every bootstrap token, as in Kubernetes: a joining host's
  token buys it a certificate request, which the certificate controller approves for the token's pool).

As in Kubernetes, ``admin``, ``edit`` and ``view`` are aggregated (:mod:`.aggregation`): their rules
come from the ClusterRoles labelled ``rbac.authorization.k8s.io/aggregate-to-admin``, ``-edit`` and
``-view`` (``system:aggregate-to-*`` hold the rules above; ``view`` is labelled aggregate-to-edit and
``edit`` aggregate-to-admin, so each role holds the one below it), and a ClusterRole anyone labels so
extends them. ``ironpool:fleet-reader``, labelled aggregate-to-view, reads the cluster-scoped
MachinePools, VolumePools and their classes (the fleet, which the web console draws): bound
cluster-wide (a ClusterRoleBinding), ``view`` sees the fleet; bound in a namespace (a RoleBinding) it
grants no cluster-scoped object, as a RoleBinding never does.

Every rule on an IronCore group names its alias groups too (``compute.ironcore.dev`` and
``compute.openkcm.dev``, :mod:`ironpool.api.group_aliases`): RBAC matches rules per group, so a role
that grants machines in one group only does not reach them through the other; the default roles grant
the same in both, so their users see one API under either name.

They carry ``rbac.authorization.kubernetes.io/autoupdate: "true"``: the apiserver puts back one that
is missing, and the rules (the ``aggregationRule`` of an aggregated one) of one whose annotation is
still ``true``, at each start.
"""

from __future__ import annotations

from typing import Any

from ironpool.api.group_aliases import aliases_of
from ironpool.api.rbac import RBAC_GROUP, RBAC_VERSION
from ironpool.apiserver.auth.rbac.aggregation import AGGREGATE_TO, aggregated_rules

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


def _fleet() -> list[dict[str, Any]]:
    return [_rule(_READ, COMPUTE, ["machinepools", "machinepools/status", "machineclasses"]),
            _rule(_READ, STORAGE, ["volumepools", "volumepools/status", "volumeclasses"])]


def _edit() -> list[dict[str, Any]]:
    rules = [_rule(_WRITE, g, res) for g, res in _WORKLOADS]
    rules.append(_rule(_READ + _WRITE, "", ["secrets"]))
    rules.append(_rule(["create", "update", "patch"], "", ["events"]))
    rules.append(_rule(["create"], COMPUTE, ["machines/eviction"]))  # as edit may create pods/eviction
    rules.append(_rule(["create"], COMPUTE, ["machines/exec"]))  # the console, as edit may create pods/exec
    return rules


def _admin() -> list[dict[str, Any]]:
    return [_rule(_READ + _WRITE, RBAC_GROUP, ["roles", "rolebindings"])]


def _object(kind: str, name: str, labels: dict[str, str] | None = None, **fields: Any) -> dict[str, Any]:
    meta = {"name": name, "labels": {"kubernetes.io/bootstrapping": "rbac-defaults", **(labels or {})},
            "annotations": {AUTOUPDATE: "true"}}
    return {"apiVersion": f"{RBAC_GROUP}/{RBAC_VERSION}", "kind": kind, "metadata": meta, **fields}


def _to(role: str) -> dict[str, str]:
    return {AGGREGATE_TO + role: "true"}


def _aggregated(name: str, labels: dict[str, str] | None = None) -> dict[str, Any]:
    """``admin``, ``edit`` or ``view``: the rules of the ClusterRoles labelled aggregate-to-``name``."""
    return _object("ClusterRole", name, labels,
                   aggregationRule={"clusterRoleSelectors": [{"matchLabels": _to(name)}]}, rules=[])


def _filled(roles: tuple[dict[str, Any], ...]) -> tuple[dict[str, Any], ...]:
    """``roles`` with the aggregated ones' rules filled in: they start complete, before the
    controller first looks."""
    rules = aggregated_rules({r["metadata"]["name"]: r for r in roles})
    return tuple({**r, "rules": rules[r["metadata"]["name"]]} if r["metadata"]["name"] in rules else r
                 for r in roles)


def _binding(name: str, role: str, group: str) -> dict[str, Any]:
    return _object("ClusterRoleBinding", name,
                   roleRef={"apiGroup": RBAC_GROUP, "kind": "ClusterRole", "name": role},
                   subjects=[{"apiGroup": RBAC_GROUP, "kind": "Group", "name": group}])


FULL_AUTHORITY: list[dict[str, Any]] = [
    {"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"]},
    {"verbs": ["*"], "nonResourceURLs": ["*"]},
]
CLUSTER_ROLES: tuple[dict[str, Any], ...] = _filled((
    _object("ClusterRole", "cluster-admin", rules=FULL_AUTHORITY),
    _aggregated("admin"),
    _aggregated("edit", _to("admin")),
    _aggregated("view", _to("edit")),
    _object("ClusterRole", "system:aggregate-to-admin", _to("admin"), rules=_admin()),
    _object("ClusterRole", "system:aggregate-to-edit", _to("edit"), rules=_edit()),
    _object("ClusterRole", "system:aggregate-to-view", _to("view"), rules=_view()),
    _object("ClusterRole", "ironpool:fleet-reader", _to("view"), rules=_fleet()),
    _object("ClusterRole", "system:discovery", rules=[
        {"verbs": ["get"], "nonResourceURLs": ["/version", "/version/", "/api", "/api/*", "/apis", "/apis/*",
                                               "/openapi", "/openapi/*", "/openapi.json", "/healthz",
                                               "/livez", "/readyz"]},
    ]),
    _object("ClusterRole", "system:node-bootstrapper", rules=[
        _rule(["create", "get", "list", "watch"], "certificates.k8s.io", ["certificatesigningrequests"]),
    ]),
))
CLUSTER_ROLE_BINDINGS: tuple[dict[str, Any], ...] = (
    _binding("cluster-admin", "cluster-admin", "system:masters"),
    _binding("system:discovery", "system:discovery", "system:authenticated"),
    _binding("system:node-bootstrapper", "system:node-bootstrapper", "system:bootstrappers"),
)
