"""NetworkInterface: a NIC on a Network, namespaced; IronCore's NIC defaulting and validation, also
applied to a Machine's ephemeral NIC templates (:func:`default_nic_spec`, :func:`validate_nic_spec`).

Addresses and the MAC are allocated by the apiserver's IPAM admission (it needs the other NICs);
this strategy checks their form.
"""

from __future__ import annotations

from ironpool.api.columns import AGE, NAME, Column, Getter, dig, field
from ironpool.api.fieldpath import FieldErrors, child, dns1123_label, dns1123_subdomain, index
from ironpool.api.ipaddr import FAMILY_BITS, canonical_ip, family_of, mac_problems, normalize_mac, parse_ip
from ironpool.api.ipam import PrefixSpec
from ironpool.api.networking import (
    NETWORKING_GROUP,
    NETWORKING_VERSION,
    IPSource,
    NetworkInterface,
    NetworkInterfaceSpec,
    VirtualIPSource,
    ephemeral_prefix_name,
)
from ironpool.api.resource_info import ResourceInfo
from ironpool.api.rules import get, keep_filled_in, ref_name
from ironpool.api.strategies.prefix import (
    default_prefix_spec,
    validate_prefix_spec,
    validate_template_metadata,
)
from ironpool.api.strategy import Obj, Strategy

# IronCore lets these change after creation; everything else in the spec is fixed.
_MUTABLE = frozenset({"providerID", "ips", "machineRef"})


def joined(path: str) -> Getter:
    """The strings of a list, comma-separated."""
    return lambda obj: ",".join(str(v) for v in dig(obj, path) or []) or None


class NetworkInterfaceStrategy(Strategy[NetworkInterface]):
    """IronCore's NIC rules; network, families, attributes and MAC fixed after creation."""

    info = ResourceInfo(NETWORKING_GROUP, NETWORKING_VERSION, "NetworkInterface", "networkinterfaces",
                        "networkinterface", ("nic",), True, NetworkInterface, True)
    columns = (
        NAME, Column("NETWORK", field("spec.networkRef.name")),
        Column("MACHINE", field("spec.machineRef.name")),
        Column("IPS", joined("status.ips")), Column("STATE", field("status.state")), AGE,
        Column("MAC", field("spec.macAddress"), wide=True),
        Column("ADDRESSES", joined("status.addresses"), wide=True),
        Column("PROVIDERID", field("spec.providerID"), wide=True),
    )

    def default(self, obj: NetworkInterface, errs: FieldErrors) -> None:
        default_nic_spec(obj.spec)

    def validate(self, obj: NetworkInterface, errs: FieldErrors) -> None:
        validate_nic_spec(obj.spec, "spec", errs, obj.metadata.name)

    def validate_update(self, old: Obj, new: Obj, errs: FieldErrors) -> None:
        keep_filled_in(old, new, ("spec", "macAddress"))
        before, after = get(old, "spec") or {}, get(new, "spec") or {}
        for key in sorted((set(before) | set(after)) - _MUTABLE):
            if before.get(key) != after.get(key):
                errs.immutable(f"spec.{key}", after.get(key))


def default_nic_spec(spec: NetworkInterfaceSpec) -> None:
    """IronCore's ``SetDefaults_NetworkInterfaceSpec`` (families from the IP sources and back, a
    single-address length for ephemeral templates), plus the canonical forms of IPs and MAC."""
    if spec.mac_address:
        spec.mac_address = normalize_mac(spec.mac_address)
    ips = spec.ips or []
    for ip in ips:
        if ip.value is not None:
            ip.value = canonical_ip(ip.value)
        template = _template_spec(ip)
        if template is not None:
            default_prefix_spec(template)
    families = spec.ip_families or []
    if families:
        if len(families) == len(ips):
            for family, ip in zip(families, ips, strict=True):
                template = _template_spec(ip)
                if template is not None and template.ip_family is None:
                    template.ip_family = family
    elif ips:
        for ip in ips:
            parsed = parse_ip(ip.value) if ip.value is not None else None
            template = _template_spec(ip)
            if parsed is not None:
                families.append(family_of(parsed))
            elif template is not None and template.ip_family is not None:
                families.append(template.ip_family)
        spec.ip_families = families or None
    for ip in ips:
        template = _template_spec(ip)
        if template is not None and template.prefix is None and not template.prefix_length:
            template.prefix_length = FAMILY_BITS.get(template.ip_family or "")


def _template_spec(ip: IPSource) -> PrefixSpec | None:
    if ip.ephemeral is None or ip.ephemeral.prefix_template is None:
        return None
    return ip.ephemeral.prefix_template.spec


def validate_nic_spec(spec: NetworkInterfaceSpec, path: str, errs: FieldErrors, nic_name: str | None) -> None:
    """IronCore's ``ValidateNetworkInterfaceSpec`` for the spec at ``path`` of the NIC ``nic_name``."""
    if spec.network_ref is None:
        errs.required(child(path, "networkRef"), "must specify a network ref")
    else:
        ref_name(spec.network_ref.name, f"{path}.networkRef.name", errs)
    if spec.machine_ref is not None:
        ref_name(spec.machine_ref.name, f"{path}.machineRef.name", errs, dns1123_label)
    families = spec.ip_families or []
    fam_path = child(path, "ipFamilies")
    if not families:
        errs.required(fam_path, "must specify ip families")
    seen: set[str] = set()
    for i, family in enumerate(families):
        if family in seen:
            errs.duplicate(index(fam_path, i), family)
        seen.add(family)
    ips = spec.ips or []
    if len(families) != len(ips):
        errs.invalid(child(path, "ips"), families, "ip families must match ips")
    for i, ip in enumerate(ips):
        _ip_source(ip, families[i] if i < len(families) else None, index(child(path, "ips"), i), errs,
                   ephemeral_prefix_name(nic_name, i) if nic_name else None)
    if spec.virtual_ip is not None:
        _virtual_ip(spec.virtual_ip, child(path, "virtualIP"), errs)
    if spec.mac_address is not None:
        for msg in mac_problems(spec.mac_address):
            errs.invalid(child(path, "macAddress"), spec.mac_address, msg)


def _virtual_ip(source: VirtualIPSource, path: str, errs: FieldErrors) -> None:
    """IronCore's ``validateVirtualIPSource``: one source, a DNS-label name or a template."""
    if source.virtual_ip_ref is not None:
        ref_name(source.virtual_ip_ref.name, f"{path}.virtualIPRef.name", errs, dns1123_label)
        if source.ephemeral is not None:
            errs.invalid(child(path, "ephemeral"), None, "cannot specify multiple sources")
    elif source.ephemeral is None:
        errs.invalid(path, None, "must specify a virtual ip source")
    elif source.ephemeral.virtual_ip_template is None:
        errs.required(f"{path}.ephemeral.virtualIPTemplate")
    else:
        validate_template_metadata(source.ephemeral.virtual_ip_template.metadata,
                                   f"{path}.ephemeral.virtualIPTemplate.metadata", errs, "virtual ip")


def _ip_source(ip: IPSource, family: str | None, path: str, errs: FieldErrors,
               prefix_name: str | None) -> None:
    """IronCore's ``validateIPSource``: one source; a literal of the family, or a single-address
    ephemeral prefix whose name is valid."""
    if ip.value is not None:
        parsed = parse_ip(ip.value)
        if parsed is None:
            errs.invalid(child(path, "value"), ip.value, "must specify a valid ip")
        elif family is not None and family_of(parsed) != family:
            errs.invalid(child(path, "value"), ip.value,
                         f"expected ip family {family} but got {family_of(parsed)}")
        if ip.ephemeral is not None:
            errs.invalid(child(path, "ephemeral"), None, "cannot specify multiple ip sources")
        return
    if ip.ephemeral is None:
        errs.invalid(path, None, "must specify an ip source (value or ephemeral)")
        return
    tp = f"{path}.ephemeral.prefixTemplate"
    template = ip.ephemeral.prefix_template
    if template is None:
        errs.required(tp)
        return
    validate_template_metadata(template.metadata, child(tp, "metadata"), errs, "prefix")
    validate_prefix_spec(template.spec, child(tp, "spec"), errs)
    spec = template.spec
    if family is not None and spec.ip_family is not None and spec.ip_family != family:
        errs.forbidden(f"{tp}.spec.ipFamily", f"has to match network interface ip family {family!r}")
    bits = FAMILY_BITS.get(family or spec.ip_family or "")
    if spec.prefix is not None and bits is not None and not spec.prefix.endswith(f"/{bits}"):
        errs.forbidden(f"{tp}.spec.prefix", "must be a single IP")
    if spec.prefix_length and bits is not None and spec.prefix_length != bits:
        errs.forbidden(f"{tp}.spec.prefixLength", "must be a single IP")
    if prefix_name is not None:
        for msg in dns1123_subdomain(prefix_name):
            errs.invalid(path, prefix_name, f"resulting prefix name {prefix_name!r} is invalid: {msg}")
