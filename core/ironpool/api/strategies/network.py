"""Network: an isolated network NetworkInterfaces connect to, namespaced. Its provider ID (the IRI
``network_id`` hosts realise it by) is set when it is created, and fixed once set."""

from __future__ import annotations

from ironpool.api.columns import AGE, NAME, Column, field
from ironpool.api.fieldpath import FieldErrors
from ironpool.api.networking import (
    BRIDGE_LABEL,
    MODE_LABEL,
    NETWORKING_GROUP,
    NETWORKING_VERSION,
    Network,
)
from ironpool.api.resource_info import ResourceInfo
from ironpool.api.rules import get, immutable, keep_filled_in
from ironpool.api.strategy import Obj, Strategy

PROVIDER_ID_PREFIX = "ironpool://networks/"
#: How hosts may realise a Network (label ``networking.ironpool.dev/mode``).
MODES = ("user", "nat", "isolated", "bridge")


class NetworkStrategy(Strategy[Network]):
    """IronCore's network rules (provider ID fixed once set), and the ironpool mode labels."""

    info = ResourceInfo(NETWORKING_GROUP, NETWORKING_VERSION, "Network", "networks", "network", ("net",),
                        True, Network, True)
    columns = (
        NAME, Column("STATE", field("status.state")), Column("PROVIDERID", field("spec.providerID")), AGE,
        Column("MODE", lambda obj: (get(obj, "metadata", "labels") or {}).get(MODE_LABEL), wide=True),
    )

    def validate(self, obj: Network, errs: FieldErrors) -> None:
        labels = obj.metadata.labels or {}
        mode = labels.get(MODE_LABEL)
        path = f"metadata.labels[{MODE_LABEL}]"
        if mode is not None and mode not in MODES:
            errs.not_supported(path, mode, MODES)
        bridge = labels.get(BRIDGE_LABEL)
        if mode == "bridge" and not bridge:
            errs.required(f"metadata.labels[{BRIDGE_LABEL}]", "the host bridge to attach to in mode bridge")
        if bridge is not None and mode != "bridge":
            errs.forbidden(f"metadata.labels[{BRIDGE_LABEL}]", f"only with {MODE_LABEL}=bridge")
        if bridge and len(bridge) > 15:
            errs.invalid(f"metadata.labels[{BRIDGE_LABEL}]", bridge,
                         "a Linux interface name has at most 15 characters")

    def prepare_for_create(self, obj: Obj) -> None:
        spec = obj.setdefault("spec", {})
        uid = (obj.get("metadata") or {}).get("uid")
        if not spec.get("providerID") and uid:  # a client-side check has no uid yet
            spec["providerID"] = PROVIDER_ID_PREFIX + str(uid)
        obj["status"] = {"state": "Available"}

    def validate_update(self, old: Obj, new: Obj, errs: FieldErrors) -> None:
        keep_filled_in(old, new, ("spec", "providerID"))
        if get(old, "spec", "providerID"):
            immutable(old, new, ("spec", "providerID"), errs)
