"""``rbac.authorization.k8s.io/v1``: Role, ClusterRole, RoleBinding, ClusterRoleBinding, shaped as in
Kubernetes so ``kubectl create role``/``rolebinding`` and manifests written for Kubernetes work as
they are. A ClusterRole with an ``aggregationRule`` gets its rules from the ClusterRoles its selectors
pick (the apiserver's aggregation controller writes them, as Kubernetes' does)."""

from __future__ import annotations

from pydantic import Field

from ironpool.api.meta import ApiModel, LabelSelectorSpec, ObjectMeta

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
    """Verbs the rule allows (get, list, create, ...; * for all)."""
    api_groups: list[str] | None = None
    """API groups of the resources (empty string: the core group; * for all)."""
    resources: list[str] | None = None
    """Resources the rule applies to (plural names, <plural>/<subresource>; * for all)."""
    resource_names: list[str] | None = None
    """Names of the objects the rule is limited to (never applies to list, watch or create)."""
    non_resource_urls: list[str] | None = Field(default=None, alias="nonResourceURLs")
    """Paths that are not resources (/version, /healthz, ...; a trailing * matches a prefix)."""


class Subject(ApiModel):
    """Who a binding is for: a ``User`` or a ``Group``, by name."""

    kind: str
    """User, Group or ServiceAccount."""
    api_group: str | None = None
    """rbac.authorization.k8s.io for users and groups; empty for service accounts."""
    name: str
    """Name of the user, group or service account."""
    namespace: str | None = None
    """Namespace of a service account."""


class RoleRef(ApiModel):
    """The Role or ClusterRole a binding grants; immutable once the binding exists."""

    api_group: str
    """rbac.authorization.k8s.io."""
    kind: str
    """Role or ClusterRole."""
    name: str
    """Name of the role."""


class Role(ApiModel):
    """Rules that apply in the Role's namespace."""

    api_version: str | None = None
    kind: str | None = None
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    """Standard object metadata: name, namespace, labels, annotations and what the server sets."""
    rules: list[PolicyRule] | None = None
    """What the role allows, in its namespace."""


class AggregationRule(ApiModel):
    """Where an aggregated ClusterRole's rules come from."""

    cluster_role_selectors: list[LabelSelectorSpec] | None = None
    """Selectors of the ClusterRoles whose rules the role carries (any selector matching picks one);
    the controller overwrites the role's own rules with theirs."""


class ClusterRole(ApiModel):
    """Rules that apply cluster-wide through a ClusterRoleBinding, or in one namespace through a
    RoleBinding."""

    api_version: str | None = None
    kind: str | None = None
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    """Standard object metadata: name, namespace, labels, annotations and what the server sets."""
    rules: list[PolicyRule] | None = None
    """What the role allows, in every namespace (or in one, through a RoleBinding)."""
    aggregation_rule: AggregationRule | None = None
    """If set, the rules are those of the ClusterRoles it selects, kept by the apiserver; writing such
    a role needs every permission (or ``escalate``), as it may gather any rules."""


class RoleBinding(ApiModel):
    """Grants a Role, or a ClusterRole within this namespace, to its subjects."""

    api_version: str | None = None
    kind: str | None = None
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    """Standard object metadata: name, namespace, labels, annotations and what the server sets."""
    subjects: list[Subject] | None = None
    """Who gets the role's rights."""
    role_ref: RoleRef
    """The Role or ClusterRole granted in the binding's namespace. Cannot be changed."""


class ClusterRoleBinding(ApiModel):
    """Grants a ClusterRole everywhere to its subjects."""

    api_version: str | None = None
    kind: str | None = None
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    """Standard object metadata: name, namespace, labels, annotations and what the server sets."""
    subjects: list[Subject] | None = None
    """Who gets the role's rights."""
    role_ref: RoleRef
    """The ClusterRole granted everywhere. Cannot be changed."""
