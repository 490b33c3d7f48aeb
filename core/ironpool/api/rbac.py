"""``rbac.authorization.k8s.io/v1``: Role, ClusterRole, RoleBinding, ClusterRoleBinding, shaped as in
Kubernetes so ``kubectl create role``/``rolebinding`` and manifests written for Kubernetes work as
they are. Aggregation (``aggregationRule``) is not served."""

from __future__ import annotations

from pydantic import Field

from ironpool.api.meta import ApiModel, ObjectMeta

RBAC_GROUP = "rbac.authorization.k8s.io"
RBAC_VERSION = "v1"


def path_segment_name(value: str) -> tuple[str, ...]:
    """Kubernetes' ``ValidatePathSegmentName`` (the rule for RBAC names such as ``system:discovery``):
    any name a URL path segment can carry."""
    if value in (".", ".."):
        return (f"may not be '{value}'",)
    return tuple(f"may not contain '{c}'" for c in ("/", "%") if c in value)


class PolicyRule(ApiModel):
    """What a rule allows: ``verbs`` on ``resources`` (``plural`` or ``plural/subresource``) of
    ``apiGroups``, optionally only the objects named in ``resourceNames``; or ``verbs`` on
    ``nonResourceURLs`` (ClusterRoles only)."""

    verbs: list[str] = Field(default_factory=list)
    api_groups: list[str] | None = None
    resources: list[str] | None = None
    resource_names: list[str] | None = None
    non_resource_urls: list[str] | None = Field(default=None, alias="nonResourceURLs")


class Subject(ApiModel):
    """Who a binding is for: a ``User`` or a ``Group``, by name."""

    kind: str
    api_group: str | None = None
    name: str
    namespace: str | None = None


class RoleRef(ApiModel):
    """The Role or ClusterRole a binding grants; immutable once the binding exists."""

    api_group: str
    kind: str
    name: str


class Role(ApiModel):
    """Rules that apply in the Role's namespace."""

    api_version: str | None = None
    kind: str | None = None
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    rules: list[PolicyRule] | None = None


class ClusterRole(ApiModel):
    """Rules that apply cluster-wide through a ClusterRoleBinding, or in one namespace through a
    RoleBinding."""

    api_version: str | None = None
    kind: str | None = None
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    rules: list[PolicyRule] | None = None


class RoleBinding(ApiModel):
    """Grants a Role, or a ClusterRole within this namespace, to its subjects."""

    api_version: str | None = None
    kind: str | None = None
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    subjects: list[Subject] | None = None
    role_ref: RoleRef


class ClusterRoleBinding(ApiModel):
    """Grants a ClusterRole everywhere to its subjects."""

    api_version: str | None = None
    kind: str | None = None
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    subjects: list[Subject] | None = None
    role_ref: RoleRef
