"""The OpenKCM groups as aliases of IronCore's in the resource table: names, paths, store keys, and
lookups with the group's case folded."""

from __future__ import annotations

import re

import pytest
from ironpool.api import errors
from ironpool.api.fieldpath import dns1123_subdomain
from ironpool.api.group_aliases import GROUP_ALIASES, aliases_of, fold_group_case
from ironpool.api.resources import (
    ALIASES,
    RESOURCES,
    SERVED,
    by_kind,
    by_path,
    resolve,
    strategy_for,
    subresources_of,
)

OPENKCM = {"compute.openkcm.dev": "compute.ironcore.dev", "storage.openkcm.dev": "storage.ironcore.dev",
           "networking.openkcm.dev": "networking.ironcore.dev", "ipam.openkcm.dev": "ipam.ironcore.dev",
           "core.openkcm.dev": "core.ironcore.dev"}


def test_every_openkcm_group_is_an_alias_and_every_served_group_is_lower_case() -> None:
    assert dict(GROUP_ALIASES) == OPENKCM
    for group in {r.group for r in SERVED if r.group}:
        # Kubernetes' rule for API group names: a DNS-1123 subdomain (lower case).
        assert dns1123_subdomain(group) == (), group
    assert aliases_of("compute.ironcore.dev") == ("compute.openkcm.dev",)
    assert aliases_of("rbac.authorization.k8s.io") == ()


def test_each_kind_of_an_aliased_group_is_served_under_the_alias_too() -> None:
    served = {(a.group, a.kind) for a in ALIASES}
    expected = {(alias, r.kind) for alias, home in OPENKCM.items() for r in RESOURCES if r.group == home}
    assert served == expected
    assert ("compute.openkcm.dev", "MachinePool") in served and ("ipam.openkcm.dev", "Prefix") in served
    assert ("core.openkcm.dev", "ResourceQuota") in served


def test_an_alias_has_its_own_paths_and_apiversion_and_the_canonical_store_keys() -> None:
    home = by_path("compute.ironcore.dev", "v1alpha1", "machines")
    alias = by_path("compute.openkcm.dev", "v1alpha1", "machines")
    assert alias is not home and alias.canonical is home and home.canonical is home
    assert alias.api_version == "compute.openkcm.dev/v1alpha1"
    assert alias.path("default", "w") == "/apis/compute.openkcm.dev/v1alpha1/namespaces/default/machines/w"
    assert alias.key("default", "w") == home.key("default", "w")
    assert alias.key("default", "w") == "/registry/compute.ironcore.dev/machines/default/w"
    assert alias.prefix(None) == home.prefix(None) and alias.prefix("a") == home.prefix("a")
    assert alias.namespace_of_key(home.key("team", "w")) == "team"
    assert (alias.group_resource, alias.qualified_kind) == ("machines.compute.openkcm.dev",
                                                             "Machine.compute.openkcm.dev")
    assert strategy_for(alias) is strategy_for(home)
    assert list(subresources_of(alias)) == list(subresources_of(home))
    assert list(subresources_of(home)) == ["status", "binding", "eviction", "exec"]


@pytest.mark.parametrize(("api_version", "folded"), [
    ("compute.OpenKCM.dev/v1alpha1", "compute.openkcm.dev/v1alpha1"),
    ("STORAGE.openkcm.DEV/v1alpha1", "storage.openkcm.dev/v1alpha1"),
    ("compute.openkcm.dev/V1alpha1", "compute.openkcm.dev/V1alpha1"),  # only the group is folded
    ("v1", "v1"),
])
def test_fold_group_case(api_version: str, folded: str) -> None:
    assert fold_group_case(api_version) == folded


def test_by_kind_folds_the_case_of_the_group() -> None:
    assert by_kind("compute.OpenKCM.dev/v1alpha1", "MachineClass") is by_path(
        "compute.openkcm.dev", "v1alpha1", "machineclasses")
    assert by_kind("Networking.IronCore.dev/v1alpha1", "Network") is resolve("networks")
    unknown = re.escape('no kind "Machine" is registered for version "compute.openkcm.dev/V1alpha1"')
    with pytest.raises(errors.BadRequest, match=unknown):
        by_kind("compute.openkcm.dev/V1alpha1", "Machine")  # a version is not a group: not folded
    assert by_kind("core.OpenKCM.dev/v1alpha1", "ResourceQuota").canonical is resolve("resourcequotas")
    with pytest.raises(errors.BadRequest, match=re.escape("compute.openkcm.dev/v1alpha1/Machine,")):
        by_kind("core.OpenKCM.dev/v1alpha1", "Bucket")  # the error lists the aliases as known


@pytest.mark.parametrize(("name", "group"), [
    ("machines", "compute.ironcore.dev"),
    ("ma", "compute.ironcore.dev"),
    ("machines.compute.ironcore.dev", "compute.ironcore.dev"),
    ("machines.compute.openkcm.dev", "compute.openkcm.dev"),
    ("Machine.Compute.OpenKCM.dev", "compute.openkcm.dev"),
    ("ma.compute.openkcm.dev", "compute.openkcm.dev"),
    ("machinepool.v1alpha1.compute.openkcm.dev", "compute.openkcm.dev"),
    ("prefixes.ipam.openkcm.dev", "ipam.openkcm.dev"),
])
def test_a_plain_name_is_the_own_group_and_an_alias_is_named_with_its_group(name: str, group: str) -> None:
    assert resolve(name).group == group
