"""The RBAC kinds (``rbac.authorization.k8s.io/v1``): rules and bindings validated as Kubernetes
validates them (``ValidatePolicyRule``, ``ValidateRoleBinding``), names as path segments, and a
binding's ``roleRef`` immutable (delete and re-create a binding to grant another role)."""

from __future__ import annotations

from typing import Any

from ironpool.api.columns import AGE, NAME, Column, field
from ironpool.api.fieldpath import FieldErrors, index
from ironpool.api.rbac import (
    RBAC_GROUP,
    RBAC_VERSION,
    ClusterRole,
    ClusterRoleBinding,
    PolicyRule,
    Role,
    RoleBinding,
    Subject,
    path_segment_name,
)
from ironpool.api.resource_info import ResourceInfo
from ironpool.api.strategy import Obj, Strategy

SUBJECT_KINDS = ("User", "Group")


def validate_rules(rules: list[PolicyRule] | None, namespaced: bool, errs: FieldErrors) -> None:
    for i, rule in enumerate(rules or []):
        path = index("rules", i)
        if not rule.verbs:
            errs.required(f"{path}.verbs", "verbs must contain at least one value")
        if rule.non_resource_urls:
            if namespaced:
                errs.invalid(f"{path}.nonResourceURLs", rule.non_resource_urls,
                             "namespaced rules cannot apply to non-resource URLs")
            if rule.api_groups or rule.resources:
                errs.invalid(f"{path}.nonResourceURLs", rule.non_resource_urls,
                             "rules cannot apply to both regular resources and non-resource URLs")
            for j, url in enumerate(rule.non_resource_urls):
                if url != "*" and not url.startswith("/"):
                    errs.invalid(index(f"{path}.nonResourceURLs", j), url, "must start with '/' or be '*'")
            continue
        if not rule.api_groups:
            errs.required(f"{path}.apiGroups", "resource rules must supply at least one api group")
        if not rule.resources:
            errs.required(f"{path}.resources", "resource rules must supply at least one resource")


def validate_binding(role_ref_kinds: tuple[str, ...], subjects: list[Subject] | None, ref_group: str,
                     ref_kind: str, ref_name: str, errs: FieldErrors) -> None:
    if ref_group != RBAC_GROUP:
        errs.not_supported("roleRef.apiGroup", ref_group, (RBAC_GROUP,))
    if ref_kind not in role_ref_kinds:
        errs.not_supported("roleRef.kind", ref_kind, role_ref_kinds)
    if not ref_name:
        errs.required("roleRef.name")
    else:
        for msg in path_segment_name(ref_name):
            errs.invalid("roleRef.name", ref_name, msg)
    for i, s in enumerate(subjects or []):
        path = index("subjects", i)
        if s.kind not in SUBJECT_KINDS:
            errs.not_supported(f"{path}.kind", s.kind, SUBJECT_KINDS)
        if not s.name:
            errs.required(f"{path}.name")
        if s.api_group not in (None, "", RBAC_GROUP):
            errs.not_supported(f"{path}.apiGroup", s.api_group, (RBAC_GROUP,))


def default_subjects(subjects: list[Subject] | None) -> None:
    """Users and Groups belong to the RBAC group (Kubernetes' ``SetDefaults_Subject``)."""
    for s in subjects or []:
        if not s.api_group and s.kind in SUBJECT_KINDS:
            s.api_group = RBAC_GROUP


def role_ref_immutable(old: Obj, new: Obj, errs: FieldErrors) -> None:
    if old.get("roleRef") != new.get("roleRef"):
        errs.invalid("roleRef", new.get("roleRef"), "cannot change roleRef")


_ROLE_COLUMNS = (NAME, Column("CREATED AT", field("metadata.creationTimestamp")))
_BINDING_COLUMNS = (NAME, Column("ROLE", lambda o: _role(o)), AGE)


def _role(obj: Obj) -> Any:
    ref = obj.get("roleRef") or {}
    return f"{ref.get('kind')}/{ref.get('name')}" if ref else None


class RoleStrategy(Strategy[Role]):
    """Roles: namespaced rules, no non-resource URLs."""

    info = ResourceInfo(RBAC_GROUP, RBAC_VERSION, "Role", "roles", "role", (), True, Role, False)
    name_is_path_segment = True
    columns = _ROLE_COLUMNS

    def validate(self, obj: Role, errs: FieldErrors) -> None:
        validate_rules(obj.rules, True, errs)


class ClusterRoleStrategy(Strategy[ClusterRole]):
    """ClusterRoles: rules for resources and non-resource URLs."""

    info = ResourceInfo(RBAC_GROUP, RBAC_VERSION, "ClusterRole", "clusterroles", "clusterrole", (), False,
                        ClusterRole, False)
    name_is_path_segment = True
    columns = _ROLE_COLUMNS

    def validate(self, obj: ClusterRole, errs: FieldErrors) -> None:
        validate_rules(obj.rules, False, errs)


class RoleBindingStrategy(Strategy[RoleBinding]):
    """RoleBindings: a Role of the namespace, or a ClusterRole scoped to it."""

    info = ResourceInfo(RBAC_GROUP, RBAC_VERSION, "RoleBinding", "rolebindings", "rolebinding", (), True,
                        RoleBinding, False)
    name_is_path_segment = True
    columns = _BINDING_COLUMNS

    def default(self, obj: RoleBinding, errs: FieldErrors) -> None:
        default_subjects(obj.subjects)

    def validate(self, obj: RoleBinding, errs: FieldErrors) -> None:
        ref = obj.role_ref
        validate_binding(("Role", "ClusterRole"), obj.subjects, ref.api_group, ref.kind, ref.name, errs)

    def validate_update(self, old: Obj, new: Obj, errs: FieldErrors) -> None:
        role_ref_immutable(old, new, errs)


class ClusterRoleBindingStrategy(Strategy[ClusterRoleBinding]):
    """ClusterRoleBindings: a ClusterRole everywhere."""

    info = ResourceInfo(RBAC_GROUP, RBAC_VERSION, "ClusterRoleBinding", "clusterrolebindings",
                        "clusterrolebinding", (), False, ClusterRoleBinding, False)
    name_is_path_segment = True
    columns = _BINDING_COLUMNS

    def default(self, obj: ClusterRoleBinding, errs: FieldErrors) -> None:
        default_subjects(obj.subjects)

    def validate(self, obj: ClusterRoleBinding, errs: FieldErrors) -> None:
        ref = obj.role_ref
        validate_binding(("ClusterRole",), obj.subjects, ref.api_group, ref.kind, ref.name, errs)

    def validate_update(self, old: Obj, new: Obj, errs: FieldErrors) -> None:
        role_ref_immutable(old, new, errs)
