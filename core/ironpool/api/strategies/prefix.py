"""Prefix: a range of IP addresses, namespaced; IronCore's prefix defaulting and validation, also
applied to the ephemeral prefix templates of NetworkInterfaces (:func:`validate_prefix_spec`).

Allocation (a child's ``spec.prefix``, ``status``) is the apiserver's IPAM admission, not this
strategy's: it needs every other Prefix of the namespace.
"""

from __future__ import annotations

from ironpool.api.columns import AGE, NAME, Column, count, field
from ironpool.api.fieldpath import FieldErrors, child, validate_annotations, validate_labels
from ironpool.api.ipaddr import FAMILY_BITS, canonical_prefix, family_of, parse_prefix
from ironpool.api.ipam import IPAM_GROUP, IPAM_VERSION, Prefix, PrefixSpec
from ironpool.api.meta import ObjectMeta
from ironpool.api.resource_info import ResourceInfo
from ironpool.api.rules import get, keep_filled_in, label_selector, ref_name
from ironpool.api.strategy import Obj, Strategy

# The parts of a template's metadata a controller copies onto the object it makes (IronCore's
# allow-list for ephemeral prefix and network interface templates).
_TEMPLATE_METADATA = frozenset({"labels", "annotations"})


class PrefixStrategy(Strategy[Prefix]):
    """IronCore's prefix rules; prefix, length and parent set once, everything else fixed."""

    info = ResourceInfo(IPAM_GROUP, IPAM_VERSION, "Prefix", "prefixes", "prefix", ("pfx",), True, Prefix,
                        True)
    columns = (
        NAME, Column("PREFIX", field("spec.prefix")), Column("PARENT", field("spec.parentRef.name")),
        Column("PHASE", field("status.phase")), AGE,
        Column("IPFAMILY", field("spec.ipFamily"), wide=True),
        Column("USED", count("status.used"), wide=True),
    )

    def default(self, obj: Prefix, errs: FieldErrors) -> None:
        default_prefix_spec(obj.spec)

    def validate(self, obj: Prefix, errs: FieldErrors) -> None:
        validate_prefix_spec(obj.spec, "spec", errs)

    def validate_update(self, old: Obj, new: Obj, errs: FieldErrors) -> None:
        for field_name in ("prefix", "parentRef", "ipFamily"):  # the allocation, kept by a replacement
            keep_filled_in(old, new, ("spec", field_name))
        before, after = dict(get(old, "spec") or {}), dict(get(new, "spec") or {})
        # IronCore: prefix and prefixLength may be set once (the allocation), parentRef once for a child.
        for key in ("prefix", "prefixLength"):
            if before.get(key) is None:
                before[key] = after.get(key)
        if before.get("parentRef") is None and before.get("parentSelector") is not None:
            before["parentRef"] = after.get("parentRef")
        for key in sorted(set(before) | set(after)):
            if before.get(key) != after.get(key):
                errs.immutable(f"spec.{key}", after.get(key))


def default_prefix_spec(spec: PrefixSpec) -> None:
    """IronCore's ``SetDefaults_PrefixSpec``: the family of a given prefix; the canonical prefix."""
    if spec.prefix is not None:
        spec.prefix = canonical_prefix(spec.prefix)
        net = parse_prefix(spec.prefix, strict=False)  # host bits are reported by validation
        if net is not None and spec.ip_family is None and not spec.prefix_length:
            spec.ip_family = family_of(net)


def validate_prefix_spec(spec: PrefixSpec, path: str, errs: FieldErrors) -> None:
    """IronCore's ``ValidatePrefixSpec`` for the spec at ``path``."""
    if spec.ip_family is None:
        errs.required(child(path, "ipFamily"), "must specify ipFamily")
    net = None
    if spec.prefix is not None:
        net = parse_prefix(spec.prefix)
        if net is None:
            loose = parse_prefix(spec.prefix, strict=False)
            hint = f" (host bits set; did you mean {loose}?)" if loose is not None else ""
            errs.invalid(child(path, "prefix"), spec.prefix, f"must specify a valid prefix{hint}")
        elif spec.ip_family is not None and family_of(net) != spec.ip_family:
            errs.invalid(child(path, "prefix"), spec.prefix,
                         f"expected ip family {spec.ip_family} but got {family_of(net)}")
    if spec.prefix_length is not None:
        bits = FAMILY_BITS.get(spec.ip_family or "")
        if spec.prefix_length <= 0:
            errs.invalid(child(path, "prefixLength"), spec.prefix_length, "has to be > 0")
        elif bits is not None and spec.prefix_length > bits:
            errs.invalid(child(path, "prefixLength"), spec.prefix_length,
                         f"too large prefix length for {spec.ip_family} (max {bits})")
    if spec.is_root:
        if spec.prefix_length is not None:
            errs.invalid(child(path, "prefixLength"), spec.prefix_length,
                         "cannot specify prefixLength for a root prefix")
        if spec.prefix is None:
            errs.required(child(path, "prefix"), "must specify for root prefix")
        return
    if spec.prefix is None and not spec.prefix_length:
        errs.invalid(path, None, "must specify either prefix or prefixLength")
    if net is not None and spec.prefix_length and spec.prefix_length != net.prefixlen:
        errs.invalid(child(path, "prefixLength"), spec.prefix_length, f"does not match prefix {net}")
    if spec.parent_ref is not None:
        ref_name(spec.parent_ref.name, f"{path}.parentRef.name", errs)
    label_selector(spec.parent_selector, child(path, "parentSelector"), errs)


def validate_template_metadata(meta: ObjectMeta | None, path: str, errs: FieldErrors, what: str) -> None:
    """A template's metadata holds only labels and annotations (the made object's name is derived)."""
    if meta is None:
        return
    validate_labels(meta.labels, child(path, "labels"), errs)
    validate_annotations(meta.annotations, child(path, "annotations"), errs)
    for name in sorted(meta.model_fields_set - _TEMPLATE_METADATA):
        if getattr(meta, name) is not None:
            alias = type(meta).model_fields[name].alias or name
            errs.forbidden(child(path, alias), f"cannot be set for an ephemeral {what}")
