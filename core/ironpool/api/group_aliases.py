"""API groups served under a second name: the OpenKCM groups, aliases of IronCore's.

OpenKCM writes IronCore's model under its own group names: ``compute.openkcm.dev`` is
``compute.ironcore.dev`` (MachineClass, MachinePool, Machine, ...), and likewise ``storage``,
``networking``, ``ipam`` and ``core`` (ResourceQuota). Every kind of an aliased group is served under
the alias too (:data:`ironpool.api.resources.SERVED`): one stored object, read and written through
either group, reported in the group the request named, as Kubernetes reports a resource it serves in
several groups.

Kubernetes API group names are DNS subdomains (RFC 1123: lower case; ``IsDNS1123Subdomain`` in
apimachinery's validation), so the aliases are served in lower case. Manifests may spell a group with
capitals (``compute.OpenKCM.dev/v1alpha1``): the ironpool client and the apiserver fold the case of the
group in an ``apiVersion`` (:func:`fold_group_case`); request paths are matched exactly, as in
Kubernetes.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from ironpool.api.compute import COMPUTE_GROUP
from ironpool.api.ipam import IPAM_GROUP
from ironpool.api.networking import NETWORKING_GROUP
from ironpool.api.quota import QUOTA_GROUP
from ironpool.api.storage import STORAGE_GROUP

#: alias group -> the group whose kinds it serves (the group objects are stored under)
GROUP_ALIASES: Mapping[str, str] = MappingProxyType({
    "compute.openkcm.dev": COMPUTE_GROUP,
    "storage.openkcm.dev": STORAGE_GROUP,
    "networking.openkcm.dev": NETWORKING_GROUP,
    "ipam.openkcm.dev": IPAM_GROUP,
    "core.openkcm.dev": QUOTA_GROUP,
})


def aliases_of(group: str) -> tuple[str, ...]:
    """The alias groups that serve ``group``'s kinds (none for most groups)."""
    return tuple(alias for alias, home in GROUP_ALIASES.items() if home == group)


def fold_group_case(api_version: str) -> str:
    """``api_version`` with its group in lower case (``compute.OpenKCM.dev/v1alpha1`` ->
    ``compute.openkcm.dev/v1alpha1``); the version, and a core ``v1``, as they are."""
    group, slash, version = api_version.rpartition("/")
    return f"{group.lower()}{slash}{version}"
