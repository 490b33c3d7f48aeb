"""The resource registry: paths, store keys, lookups by path, kind and CLI name."""

from __future__ import annotations

import pytest
from ironpool.api import errors
from ironpool.api.compute import Machine
from ironpool.api.core import Secret
from ironpool.api.resources import RESOURCES, by_kind, by_path, resolve


def test_machine_paths_and_keys() -> None:
    m = by_kind("compute.ironcore.dev/v1alpha1", "Machine")
    assert m.model is Machine and m.namespaced and m.has_status
    assert m.api_version == "compute.ironcore.dev/v1alpha1"
    assert m.key("default", "web-1") == "/registry/compute.ironcore.dev/machines/default/web-1"
    assert m.prefix("default") == "/registry/compute.ironcore.dev/machines/default/"
    assert m.prefix(None) == "/registry/compute.ironcore.dev/machines/"
    assert m.path("default") == "/apis/compute.ironcore.dev/v1alpha1/namespaces/default/machines"
    assert (
        m.path("default", "web-1") == "/apis/compute.ironcore.dev/v1alpha1/namespaces/default/machines/web-1"
    )
    assert m.path(None) == "/apis/compute.ironcore.dev/v1alpha1/machines"


def test_cluster_scoped_and_core() -> None:
    mp = resolve("mp")
    assert not mp.namespaced
    assert mp.key(None, "pool-a") == "/registry/compute.ironcore.dev/machinepools/_/pool-a"
    assert mp.key("ignored", "pool-a") == "/registry/compute.ironcore.dev/machinepools/_/pool-a"
    assert mp.prefix(None) == "/registry/compute.ironcore.dev/machinepools/_/"
    assert mp.path(None, "pool-a") == "/apis/compute.ironcore.dev/v1alpha1/machinepools/pool-a"
    s = by_path("", "v1", "secrets")
    assert s.model is Secret and s.api_version == "v1" and not s.has_status
    assert s.key("ns1", "ign") == "/registry/core/secrets/ns1/ign"
    assert s.path("ns1", "ign") == "/api/v1/namespaces/ns1/secrets/ign"
    assert resolve("ns").path(None, "default") == "/api/v1/namespaces/default"


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("machine", "Machine"),
        ("machines", "Machine"),
        ("Machine", "Machine"),
        ("ma", "Machine"),
        ("machines.compute.ironcore.dev", "Machine"),
        ("MACHINECLASS", "MachineClass"),
        ("mc", "MachineClass"),
        ("machinepools", "MachinePool"),
        ("vc", "VolumeClass"),
        ("vp", "VolumePool"),
        ("vol", "Volume"),
        ("volumes.storage.ironcore.dev", "Volume"),
        ("secret", "Secret"),
        ("ns", "Namespace"),
        ("ev", "Event"),
    ],
)
def test_resolve(name: str, kind: str) -> None:
    assert resolve(name).kind == kind


def test_lookup_errors_name_what_is_known() -> None:
    with pytest.raises(errors.NotFound, match="machineclasses"):
        resolve("pods")
    with pytest.raises(errors.NotFound):
        by_path("compute.ironcore.dev", "v1alpha1", "pods")
    with pytest.raises(errors.BadRequest, match='no kind "Pod" is registered for version "v1"'):
        by_kind("v1", "Pod")


def test_names_unique() -> None:
    seen: dict[str, str] = {}
    for r in RESOURCES:
        for n in (r.singular, r.plural, r.kind.lower(), *r.short_names):
            assert seen.setdefault(n, r.kind) == r.kind
