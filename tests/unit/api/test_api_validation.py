"""Validation and defaulting: IronCore's documentation samples and every rule, by field path."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import yaml
from ironpool.api import errors
from ironpool.api.resources import resolve
from ironpool.api.validation import (
    spec_of,
    validate_create,
    validate_status_update,
    validate_update,
    validate_volume_resize,
)

COMPUTE = "compute.ironcore.dev/v1alpha1"
STORAGE = "storage.ironcore.dev/v1alpha1"


def invalid(kind: str, obj: dict[str, Any], old: dict[str, Any] | None = None) -> errors.Invalid:
    info = resolve(kind)
    with pytest.raises(errors.Invalid) as exc:
        if old is None:
            validate_create(info, obj)
        else:
            validate_update(info, old, obj)
    return exc.value


def fields(err: errors.Invalid) -> dict[str, str]:
    return {c.field: c.reason for c in err.causes}


def machine(**spec: Any) -> dict[str, Any]:
    base: dict[str, Any] = {"machineClassRef": {"name": "t3-small"}}
    base.update(spec)
    return {
        "apiVersion": COMPUTE,
        "kind": "Machine",
        "metadata": {"name": "web-1", "namespace": "default"},
        "spec": base,
    }


def volume(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": STORAGE,
        "kind": "Volume",
        "metadata": {"name": "vol-1", "namespace": "default"},
        "spec": spec,
    }


# -- IronCore's documentation samples ------------------------------------------------------------

MACHINE_POOL_SAMPLE: dict[str, Any] = {
    "apiVersion": COMPUTE,
    "kind": "MachinePool",
    "metadata": {"name": "machinepool-sample", "labels": {"ironcore.dev/az": "az1"}},
    "spec": {"providerID": "ironcore://shared"},
}
MACHINE_CLASS_SAMPLE: dict[str, Any] = {
    "apiVersion": COMPUTE,
    "kind": "MachineClass",
    "metadata": {"name": "machineclass-sample"},
    "capabilities": {"cpu": 4, "memory": "16Gi"},
}
MACHINE_SAMPLE: dict[str, Any] = {
    "apiVersion": COMPUTE,
    "kind": "Machine",
    "metadata": {"name": "machine-sample", "namespace": "default"},
    "spec": {
        "machineClassRef": {"name": "machineclass-sample"},
        "volumes": [{"name": "rootdisk", "volumeRef": {"name": "my-volume"}}],
        "networkInterfaces": [
            {"name": "primary", "networkInterfaceRef": {"name": "networkinterface-sample"}}
        ],
        "ignitionRef": {"name": "my-ignition-secret"},
    },
}
EPHEMERAL_MACHINE_SAMPLE: dict[str, Any] = {
    "apiVersion": COMPUTE,
    "kind": "Machine",
    "metadata": {"name": "machine-sample", "namespace": "default"},
    "spec": {
        "machineClassRef": {"name": "machineclass-sample"},
        "ignitionRef": {"name": "ignition", "key": "ignition.yaml"},
        "networkInterfaces": [
            {
                "name": "primary",
                "ephemeral": {
                    "networkInterfaceTemplate": {
                        "spec": {
                            "ipFamilies": ["IPv4"],
                            "ips": [{"value": "10.0.0.12"}],
                            "networkRef": {"name": "network-sample"},
                            "virtualIP": {
                                "ephemeral": {
                                    "virtualIPTemplate": {"spec": {"type": "Public", "ipFamily": "IPv4"}}
                                }
                            },
                        }
                    }
                },
            }
        ],
        "volumes": [
            {
                "name": "root-disk",
                "ephemeral": {
                    "volumeTemplate": {
                        "spec": {
                            "volumeClassRef": {"name": "volumeclass-sample"},
                            "resources": {"storage": "10Gi"},
                            "dataSource": {"osImage": {"image": "gardenlinux:rootfs-image"}},
                        }
                    }
                },
            }
        ],
    },
}
VOLUME_SAMPLE: dict[str, Any] = {
    "apiVersion": STORAGE,
    "kind": "Volume",
    "metadata": {"name": "volume-sample", "namespace": "default"},
    "spec": {"volumeClassRef": {"name": "volumeclass-sample"}, "resources": {"storage": "100Gi"}},
}
VOLUME_CLASS_SAMPLE: dict[str, Any] = {
    "apiVersion": STORAGE,
    "kind": "VolumeClass",
    "metadata": {"name": "volumeclass-sample"},
    "capabilities": {"tps": "100Mi", "iops": 100},
}
VOLUME_POOL_SAMPLE: dict[str, Any] = {
    "apiVersion": STORAGE,
    "kind": "VolumePool",
    "metadata": {"name": "volumepool-sample"},
    "spec": {"providerID": "ironcore://shared"},
}
IGNITION_SECRET_SAMPLE: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Secret",
    "metadata": {"creationTimestamp": None, "name": "ignition", "namespace": "default"},
    "data": {"ignition.yaml": "eyJpZ25pdGlvbiI6eyJ2ZXJzaW9uIjoiMy4zLjAifX0K"},
}


def test_machine_pool_sample_unchanged() -> None:
    assert validate_create(resolve("machinepool"), MACHINE_POOL_SAMPLE) == MACHINE_POOL_SAMPLE


def test_machine_class_sample_canonical() -> None:
    out = validate_create(resolve("machineclass"), MACHINE_CLASS_SAMPLE)
    assert out == {**MACHINE_CLASS_SAMPLE, "capabilities": {"cpu": "4", "memory": "16Gi"}}


def test_machine_sample_defaulted() -> None:
    src = copy.deepcopy(MACHINE_SAMPLE)
    out = validate_create(resolve("machine"), src)
    assert src == MACHINE_SAMPLE  # input untouched
    expected = copy.deepcopy(MACHINE_SAMPLE)
    expected["spec"]["power"] = "On"
    expected["spec"]["volumes"][0]["device"] = "oda"
    expected["spec"]["ignitionRef"]["key"] = "ignition.yaml"
    assert out == expected


def test_ephemeral_machine_sample_unchanged_but_defaults() -> None:
    out = validate_create(resolve("machine"), EPHEMERAL_MACHINE_SAMPLE)
    assert out["spec"]["networkInterfaces"] == EPHEMERAL_MACHINE_SAMPLE["spec"]["networkInterfaces"]
    assert (
        out["spec"]["volumes"][0]["ephemeral"] == EPHEMERAL_MACHINE_SAMPLE["spec"]["volumes"][0]["ephemeral"]
    )
    assert out["spec"]["volumes"][0]["device"] == "oda"


def test_volume_samples() -> None:
    assert validate_create(resolve("volume"), VOLUME_SAMPLE) == VOLUME_SAMPLE
    vc = validate_create(resolve("volumeclass"), VOLUME_CLASS_SAMPLE)
    assert vc == {
        **VOLUME_CLASS_SAMPLE,
        "capabilities": {"tps": "100Mi", "iops": "100"},
        "resizePolicy": "Static",
    }
    assert validate_create(resolve("volumepool"), VOLUME_POOL_SAMPLE) == VOLUME_POOL_SAMPLE


def test_ignition_secret_sample() -> None:
    out = validate_create(resolve("secret"), IGNITION_SECRET_SAMPLE)
    assert out == {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "ignition", "namespace": "default"},
        "data": IGNITION_SECRET_SAMPLE["data"],
        "type": "Opaque",
    }


@pytest.mark.parametrize(
    ("kind", "obj"),
    [
        ("machinepool", MACHINE_POOL_SAMPLE),
        ("machineclass", MACHINE_CLASS_SAMPLE),
        ("machine", MACHINE_SAMPLE),
        ("machine", EPHEMERAL_MACHINE_SAMPLE),
        ("volume", VOLUME_SAMPLE),
        ("volumeclass", VOLUME_CLASS_SAMPLE),
        ("volumepool", VOLUME_POOL_SAMPLE),
        ("secret", IGNITION_SECRET_SAMPLE),
    ],
)
def test_output_is_a_fixed_point(kind: str, obj: dict[str, Any]) -> None:
    info = resolve(kind)
    once = validate_create(info, obj)
    assert validate_create(info, once) == once
    assert validate_update(info, once, once) == once
    assert spec_of(info, once) == {
        k: v for k, v in once.items() if k not in ("apiVersion", "kind", "metadata", "status")
    }


# -- type meta and metadata ----------------------------------------------------------------------


def test_missing_type_meta_is_defaulted() -> None:
    obj = machine()
    del obj["apiVersion"], obj["kind"]
    out = validate_create(resolve("machine"), obj)
    assert out["apiVersion"] == COMPUTE and out["kind"] == "Machine"


def test_wrong_type_meta() -> None:
    obj = {**machine(), "apiVersion": STORAGE, "kind": "Volume"}
    assert fields(invalid("machine", obj)) == {"apiVersion": "FieldValueInvalid", "kind": "FieldValueInvalid"}


def test_message_format_like_kubernetes() -> None:
    obj = machine()
    del obj["spec"]["machineClassRef"]
    err = invalid("machine", obj)
    assert (
        err.message == 'Machine.compute.ironcore.dev "web-1" is invalid: spec.machineClassRef: Required value'
    )
    assert err.kind == "Machine" and err.name == "web-1" and err.group == "compute.ironcore.dev"
    status = err.to_status()
    assert status["code"] == 422 and status["details"]["causes"][0]["field"] == "spec.machineClassRef"
    secret_err = invalid("secret", {**IGNITION_SECRET_SAMPLE, "data": {"k": "%%%"}})
    assert secret_err.message.startswith('Secret "ignition" is invalid: data.k: Invalid value')


def test_every_problem_reported_at_once() -> None:
    obj = machine(
        power="Maybe",
        foo=1,
        volumes=[
            {"name": "a", "volumeRef": {"name": "v"}, "emptyDisk": {}},
            {"name": "a", "device": "x1"},
        ],
    )
    obj["metadata"]["name"] = "Web_1"
    err = invalid("machine", obj)
    assert fields(err) == {
        "metadata.name": "FieldValueInvalid",
        "spec.power": "FieldValueNotSupported",
        "spec.foo": "FieldValueNotSupported",
        "spec.volumes[0].emptyDisk": "FieldValueForbidden",
        "spec.volumes[1].name": "FieldValueDuplicate",
        "spec.volumes[1].device": "FieldValueInvalid",
        "spec.volumes[1]": "FieldValueRequired",
    }
    assert err.message.startswith('Machine.compute.ironcore.dev "Web_1" is invalid: [')


def test_unknown_fields_rejected_everywhere() -> None:
    obj = machine(volumes=[{"name": "a", "volumeRef": {"name": "v", "extra": 1}}])
    obj["metadata"]["bogus"] = "x"
    obj["bogusTop"] = 1
    err = invalid("machine", obj)
    assert fields(err) == {
        "spec.volumes[0].volumeRef.extra": "FieldValueNotSupported",
        "metadata.bogus": "FieldValueNotSupported",
        "bogusTop": "FieldValueNotSupported",
    }
    assert 'unknown field "spec.volumes[0].volumeRef.extra"' in err.message


@pytest.mark.parametrize(
    ("meta", "field"),
    [
        ({"namespace": "default"}, "metadata.name"),
        ({"name": "Web", "namespace": "default"}, "metadata.name"),
        ({"name": "web.1", "namespace": "default"}, "metadata.name"),  # Machine names are DNS labels
        ({"name": "x" * 64, "namespace": "default"}, "metadata.name"),
        ({"name": "web"}, "metadata.namespace"),
        ({"name": "web", "namespace": "Bad_NS"}, "metadata.namespace"),
        ({"name": "web", "namespace": "default", "labels": {"bad key": "v"}}, "metadata.labels"),
        ({"name": "web", "namespace": "default", "labels": {"k": "bad value"}}, "metadata.labels"),
        ({"name": "web", "namespace": "default", "labels": {"k": "x" * 64}}, "metadata.labels"),
        ({"name": "web", "namespace": "default", "annotations": {"/x": "v"}}, "metadata.annotations"),
        ({"name": "web", "namespace": "default", "finalizers": ["a/b/c"]}, "metadata.finalizers[0]"),
        ({"name": "web", "namespace": "default", "generation": "many"}, "metadata.generation"),
        ({"generateName": "Web-", "namespace": "default"}, "metadata.generateName"),
    ],
)
def test_metadata_rules(meta: dict[str, Any], field: str) -> None:
    obj = machine()
    obj["metadata"] = meta
    assert field in fields(invalid("machine", obj))


def test_metadata_accepted_forms() -> None:
    obj = machine()
    obj["metadata"] = {
        "generateName": "web-",
        "namespace": "default",
        "labels": {"app.kubernetes.io/name": "web", "empty": ""},
        "annotations": {"Example.COM/Thing": "anything goes here"},
        "uid": "u-1",
        "resourceVersion": "7",
        "generation": 3,
        "creationTimestamp": "2026-01-01T00:00:00Z",
        "finalizers": ["compute.ironcore.dev/x"],
    }
    out = validate_create(resolve("machine"), obj)
    assert out["metadata"] == obj["metadata"]  # server-managed fields kept; the apiserver sets them
    vol = volume(volumeClassRef={"name": "c"}, resources={"storage": "1Gi"})
    vol["metadata"]["name"] = "vol.with.dots"  # Volume names are DNS subdomains
    assert validate_create(resolve("volume"), vol)["metadata"]["name"] == "vol.with.dots"


def test_cluster_scoped_namespace_dropped() -> None:
    obj = {**MACHINE_POOL_SAMPLE, "metadata": {"name": "p", "namespace": "default"}}
    assert "namespace" not in validate_create(resolve("machinepool"), obj)["metadata"]


def test_metadata_name_and_namespace_immutable() -> None:
    old = validate_create(resolve("machine"), machine())
    new = copy.deepcopy(old)
    new["metadata"]["name"] = "web-2"
    new["metadata"]["namespace"] = "other"
    assert set(fields(invalid("machine", new, old))) == {"metadata.name", "metadata.namespace"}


# -- Machine -------------------------------------------------------------------------------------


def test_machine_class_ref_required_and_immutable() -> None:
    assert fields(invalid("machine", {**machine(), "spec": {}})) == {
        "spec.machineClassRef": "FieldValueRequired"
    }
    assert "spec" not in machine(power="On") or True
    no_spec = machine()
    del no_spec["spec"]
    assert fields(invalid("machine", no_spec)) == {"spec.machineClassRef": "FieldValueRequired"}
    assert fields(invalid("machine", machine(machineClassRef={"name": "Bad_Name"}))) == {
        "spec.machineClassRef.name": "FieldValueInvalid"
    }
    old = validate_create(resolve("machine"), machine())
    err = invalid("machine", machine(machineClassRef={"name": "t3-large"}), old)
    assert fields(err) == {"spec.machineClassRef": "FieldValueInvalid"}
    assert "field is immutable" in err.message


def test_machine_pool_ref_set_once() -> None:
    info = resolve("machine")
    unbound = validate_create(info, machine())
    bound = validate_update(info, unbound, machine(machinePoolRef={"name": "pool-a"}))
    assert bound["spec"]["machinePoolRef"] == {"name": "pool-a"}
    assert fields(invalid("machine", machine(machinePoolRef={"name": "pool-b"}), bound)) == {
        "spec.machinePoolRef": "FieldValueInvalid"
    }
    assert fields(invalid("machine", machine(), bound)) == {"spec.machinePoolRef": "FieldValueInvalid"}


def test_power() -> None:
    assert validate_create(resolve("machine"), machine())["spec"]["power"] == "On"
    assert validate_create(resolve("machine"), machine(power="Off"))["spec"]["power"] == "Off"
    err = invalid("machine", machine(power="off"))
    assert fields(err) == {"spec.power": "FieldValueNotSupported"}
    assert 'supported values: "On", "Off"' in err.message


def test_volume_devices_defaulted_skipping_taken() -> None:
    vols = [
        {"name": "a", "volumeRef": {"name": "va"}},
        {"name": "b", "device": "oda", "volumeRef": {"name": "vb"}},
        {"name": "c", "emptyDisk": {"sizeLimit": "1024Mi"}},
        {"name": "d", "device": "odc", "localDisk": {"image": "img"}},
        {"name": "e", "volumeRef": {"name": "ve"}},
    ]
    out = validate_create(resolve("machine"), machine(volumes=vols))
    assert [v["device"] for v in out["spec"]["volumes"]] == ["odb", "oda", "odd", "odc", "ode"]
    assert out["spec"]["volumes"][2]["emptyDisk"] == {"sizeLimit": "1Gi"}


def test_many_volumes_get_two_letter_devices() -> None:
    vols = [{"name": f"v{i}", "volumeRef": {"name": f"v{i}"}} for i in range(28)]
    out = validate_create(resolve("machine"), machine(volumes=vols))
    devices = [v["device"] for v in out["spec"]["volumes"]]
    assert devices[25:] == ["odz", "odaa", "odab"]


@pytest.mark.parametrize(
    ("vols", "field", "reason"),
    [
        (
            [{"name": "a", "volumeRef": {"name": "x"}}, {"name": "a", "volumeRef": {"name": "y"}}],
            "spec.volumes[1].name",
            "FieldValueDuplicate",
        ),
        (
            [
                {"name": "a", "device": "odb", "volumeRef": {"name": "x"}},
                {"name": "b", "device": "odb", "emptyDisk": {}},
            ],
            "spec.volumes[1].device",
            "FieldValueDuplicate",
        ),
        (
            [{"name": "a", "device": "sd1", "volumeRef": {"name": "x"}}],
            "spec.volumes[0].device",
            "FieldValueInvalid",
        ),
        ([{"name": "a"}], "spec.volumes[0]", "FieldValueRequired"),
        (
            [{"name": "a", "volumeRef": {"name": "x"}, "localDisk": {}}],
            "spec.volumes[0].localDisk",
            "FieldValueForbidden",
        ),
        (
            [{"name": "a", "emptyDisk": {}, "ephemeral": {"volumeTemplate": {"spec": {}}}}],
            "spec.volumes[0].ephemeral",
            "FieldValueForbidden",
        ),
        (
            [{"name": "a", "emptyDisk": {"sizeLimit": "-1Gi"}}],
            "spec.volumes[0].emptyDisk.sizeLimit",
            "FieldValueInvalid",
        ),
        (
            [{"name": "a", "localDisk": {"sizeLimit": "ten"}}],
            "spec.volumes[0].localDisk.sizeLimit",
            "FieldValueInvalid",
        ),
        ([{"name": "a", "ephemeral": {}}], "spec.volumes[0].ephemeral.volumeTemplate", "FieldValueRequired"),
        (
            [{"name": "a", "ephemeral": {"volumeTemplate": {"spec": {"volumeClassRef": {"name": "c"}}}}}],
            "spec.volumes[0].ephemeral.volumeTemplate.spec.resources.storage",
            "FieldValueRequired",
        ),
        (
            [{"name": "a", "ephemeral": {"volumeTemplate": {"spec": {"claimRef": {"name": "m"}}}}}],
            "spec.volumes[0].ephemeral.volumeTemplate.spec.claimRef",
            "FieldValueForbidden",
        ),
        ([{"name": "Bad", "volumeRef": {"name": "x"}}], "spec.volumes[0].name", "FieldValueInvalid"),
        ([{"name": "a", "volumeRef": {}}], "spec.volumes[0].volumeRef.name", "FieldValueRequired"),
    ],
)
def test_machine_volume_rules(vols: list[dict[str, Any]], field: str, reason: str) -> None:
    assert fields(invalid("machine", machine(volumes=vols))).get(field) == reason


@pytest.mark.parametrize(
    ("nics", "field", "reason"),
    [
        ([{"name": "a"}], "spec.networkInterfaces[0]", "FieldValueRequired"),
        (
            [
                {
                    "name": "a",
                    "networkInterfaceRef": {"name": "n"},
                    "ephemeral": {"networkInterfaceTemplate": {}},
                }
            ],
            "spec.networkInterfaces[0].ephemeral",
            "FieldValueForbidden",
        ),
        (
            [
                {"name": "a", "networkInterfaceRef": {"name": "n"}},
                {"name": "a", "networkInterfaceRef": {"name": "m"}},
            ],
            "spec.networkInterfaces[1].name",
            "FieldValueDuplicate",
        ),
        (
            [{"name": "a", "ephemeral": {}}],
            "spec.networkInterfaces[0].ephemeral.networkInterfaceTemplate",
            "FieldValueRequired",
        ),
    ],
)
def test_machine_nic_rules(nics: list[dict[str, Any]], field: str, reason: str) -> None:
    assert fields(invalid("machine", machine(networkInterfaces=nics))).get(field) == reason


def test_ignition_ref() -> None:
    out = validate_create(resolve("machine"), machine(ignitionRef={"name": "ign"}))
    assert out["spec"]["ignitionRef"] == {"name": "ign", "key": "ignition.yaml"}
    out = validate_create(resolve("machine"), machine(ignitionRef={"name": "ign", "key": "config.ign"}))
    assert out["spec"]["ignitionRef"]["key"] == "config.ign"
    assert fields(invalid("machine", machine(ignitionRef={"name": "ign", "key": "a b"}))) == {
        "spec.ignitionRef.key": "FieldValueInvalid"
    }


def test_local_disk_image_immutable() -> None:
    info = resolve("machine")
    old = validate_create(info, machine(volumes=[{"name": "root", "localDisk": {"image": "img:1"}}]))
    path = "spec.volumes[root].localDisk.image"
    assert path in fields(
        invalid("machine", machine(volumes=[{"name": "root", "localDisk": {"image": "img:2"}}]), old)
    )
    assert path in fields(invalid("machine", machine(volumes=[{"name": "root", "localDisk": {}}]), old))
    assert path in fields(invalid("machine", machine(volumes=[]), old))
    # Changing the size limit (not the image) is allowed.
    validate_update(
        info, old, machine(volumes=[{"name": "root", "localDisk": {"image": "img:1", "sizeLimit": "5Gi"}}])
    )


def test_guest_config_hostname() -> None:
    info = resolve("machine")
    assert fields(invalid("machine", machine(guestConfig={"hostname": "bad.host"}))) == {
        "spec.guestConfig.hostname": "FieldValueInvalid"
    }
    without = validate_create(info, machine())
    with_host = validate_create(info, machine(guestConfig={"hostname": "web"}))
    assert "spec.guestConfig.hostname" in fields(
        invalid("machine", machine(guestConfig={"hostname": "w"}), without)
    )
    assert "spec.guestConfig.hostname" in fields(invalid("machine", machine(), with_host))
    assert "spec.guestConfig.hostname" in fields(
        invalid("machine", machine(guestConfig={"hostname": "x"}), with_host)
    )
    validate_update(info, with_host, machine(guestConfig={"hostname": "web"}))


@pytest.mark.parametrize(
    ("tols", "field", "reason"),
    [
        ([{"key": "k", "operator": "Maybe"}], "spec.tolerations[0].operator", "FieldValueNotSupported"),
        (
            [{"key": "k", "effect": "PreferNoSchedule"}],
            "spec.tolerations[0].effect",
            "FieldValueNotSupported",
        ),
        (
            [{"key": "k", "operator": "Exists", "value": "v"}],
            "spec.tolerations[0].value",
            "FieldValueInvalid",
        ),
        ([{"operator": "Equal", "value": "v"}], "spec.tolerations[0].operator", "FieldValueInvalid"),
        ([{"key": "bad key"}], "spec.tolerations[0].key", "FieldValueInvalid"),
    ],
)
def test_toleration_rules(tols: list[dict[str, Any]], field: str, reason: str) -> None:
    assert fields(invalid("machine", machine(tolerations=tols))).get(field) == reason


def test_tolerations_accepted() -> None:
    tols = [
        {"operator": "Exists"},
        {"key": "k", "operator": "Equal", "value": "v", "effect": "NoExecute"},
        {"key": "k2", "value": "v"},
    ]
    assert validate_create(resolve("machine"), machine(tolerations=tols))["spec"]["tolerations"] == tols


def test_machine_pool_selector_labels() -> None:
    assert fields(invalid("machine", machine(machinePoolSelector={"zone": "bad value"}))) == {
        "spec.machinePoolSelector": "FieldValueInvalid"
    }


# -- MachineClass / pools --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("caps", "field", "reason"),
    [
        ({"memory": "1Gi"}, "capabilities.cpu", "FieldValueRequired"),
        ({"cpu": "2"}, "capabilities.memory", "FieldValueRequired"),
        ({"cpu": "0", "memory": "1Gi"}, "capabilities.cpu", "FieldValueInvalid"),
        ({"cpu": "2", "memory": "-1Gi"}, "capabilities.memory", "FieldValueInvalid"),
        ({"cpu": "2", "memory": "lots"}, "capabilities.memory", "FieldValueInvalid"),
        (
            {"cpu": "2", "memory": "1Gi", "nvidia.com/gpu": "-1"},
            "capabilities[nvidia.com/gpu]",
            "FieldValueInvalid",
        ),
    ],
)
def test_machine_class_capabilities(caps: dict[str, Any], field: str, reason: str) -> None:
    obj = {**MACHINE_CLASS_SAMPLE, "capabilities": caps}
    assert fields(invalid("machineclass", obj)).get(field) == reason


def test_machine_class_capabilities_immutable() -> None:
    info = resolve("mc")
    old = validate_create(info, MACHINE_CLASS_SAMPLE)
    # The same value written differently is no change.
    validate_update(
        info, old, {**MACHINE_CLASS_SAMPLE, "capabilities": {"cpu": "4000m", "memory": "16384Mi"}}
    )
    err = invalid("machineclass", {**MACHINE_CLASS_SAMPLE, "capabilities": {"cpu": 8, "memory": "16Gi"}}, old)
    assert fields(err) == {"capabilities": "FieldValueInvalid"}


@pytest.mark.parametrize("kind", ["machinepool", "volumepool"])
def test_pool_provider_id_immutable_once_set(kind: str) -> None:
    info = resolve(kind)
    sample = MACHINE_POOL_SAMPLE if kind == "machinepool" else VOLUME_POOL_SAMPLE
    empty = validate_create(info, {**sample, "spec": {}})
    set_ = validate_update(info, empty, sample)
    assert set_["spec"]["providerID"] == "ironcore://shared"
    assert fields(invalid(kind, {**sample, "spec": {"providerID": "ironcore://other"}}, set_)) == {
        "spec.providerID": "FieldValueInvalid"
    }


@pytest.mark.parametrize(
    ("taints", "field", "reason"),
    [
        ([{"key": "k", "effect": "PreferNoSchedule"}], "spec.taints[0].effect", "FieldValueNotSupported"),
        ([{"key": "k"}], "spec.taints[0].effect", "FieldValueRequired"),
        ([{"key": "bad key", "effect": "NoSchedule"}], "spec.taints[0].key", "FieldValueInvalid"),
        (
            [{"key": "k", "effect": "NoSchedule"}, {"key": "k", "value": "x", "effect": "NoSchedule"}],
            "spec.taints[1]",
            "FieldValueDuplicate",
        ),
    ],
)
def test_pool_taints(taints: list[dict[str, Any]], field: str, reason: str) -> None:
    obj = {**MACHINE_POOL_SAMPLE, "spec": {"taints": taints}}
    assert fields(invalid("machinepool", obj)).get(field) == reason


def test_machine_pool_status_update() -> None:
    info = resolve("machinepool")
    old = validate_create(info, MACHINE_POOL_SAMPLE)
    old["metadata"]["resourceVersion"] = "5"
    new = {
        "metadata": {"name": "machinepool-sample", "resourceVersion": "5"},
        "spec": {"providerID": "ignored://spec-change"},
        "status": {
            "state": "Ready",
            "conditions": [
                {
                    "type": "Ready",
                    "status": True,
                    "reason": "HeartbeatReceived",
                    "observedGeneration": 4,
                    "lastTransitionTime": "2026-05-01T13:18:48Z",
                }
            ],
            "availableMachineClasses": [{"name": "machineclass-sample"}],
            "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}],
            "daemonEndpoints": {"machinepoolletEndpoint": {"port": 20250}},
            "capacity": {"cpu": 8, "memory": "32768Mi", "class/machine.machineclass-sample": 2},
            "allocatable": {"cpu": "4", "memory": "16Gi"},
        },
    }
    out = validate_status_update(info, old, new)
    assert out["spec"] == {"providerID": "ironcore://shared"}  # spec changes are ignored
    assert out["status"]["conditions"][0]["status"] == "True"
    assert out["status"]["capacity"] == {
        "cpu": "8",
        "memory": "32Gi",
        "class/machine.machineclass-sample": "2",
    }
    bad = {"status": {"state": "Sleeping", "addresses": [{"type": "Pigeon", "address": "x"}]}}
    with pytest.raises(errors.Invalid) as exc:
        validate_status_update(info, old, bad)
    assert fields(exc.value) == {
        "status.state": "FieldValueNotSupported",
        "status.addresses[0].type": "FieldValueNotSupported",
    }


def test_status_update_on_kind_without_status() -> None:
    with pytest.raises(errors.NotFound):
        validate_status_update(resolve("machineclass"), MACHINE_CLASS_SAMPLE, MACHINE_CLASS_SAMPLE)


def test_machine_status_update_keeps_spec_and_metadata() -> None:
    info = resolve("machine")
    old = validate_create(info, machine())
    new = machine(power="Off")
    new["metadata"]["labels"] = {"sneaky": "yes"}
    new["status"] = {
        "machineID": "libvirt-provider://abc",
        "state": "Running",
        "observedGeneration": 1,
        "volumes": [{"name": "root", "state": "Attached", "handle": "h"}],
        "networkInterfaces": [{"name": "primary", "state": "Pending"}],
    }
    out = validate_status_update(info, old, new)
    assert out["spec"] == old["spec"] and out["metadata"] == old["metadata"]
    assert out["status"]["machineID"] == "libvirt-provider://abc"
    with pytest.raises(errors.Invalid) as exc:
        validate_status_update(info, old, {"status": {"state": "Exploded"}})
    assert fields(exc.value) == {"status.state": "FieldValueNotSupported"}


# -- storage ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "field", "reason"),
    [
        ({"volumeClassRef": {"name": "c"}}, "spec.resources.storage", "FieldValueRequired"),
        (
            {"volumeClassRef": {"name": "c"}, "resources": {"storage": "0"}},
            "spec.resources.storage",
            "FieldValueInvalid",
        ),
        (
            {"volumeClassRef": {"name": "c"}, "resources": {"storage": "ten"}},
            "spec.resources.storage",
            "FieldValueInvalid",
        ),
        ({"resources": {"storage": "1Gi"}}, "spec.resources", "FieldValueForbidden"),
        ({"volumePoolRef": {"name": "p"}}, "spec.volumePoolRef", "FieldValueForbidden"),
        ({"volumePoolSelector": {"a": "b"}}, "spec.volumePoolSelector", "FieldValueForbidden"),
        ({"tolerations": []}, "spec.tolerations", "FieldValueForbidden"),
        ({"dataSource": {"osImage": {"image": "i"}}}, "spec.dataSource.osImage", "FieldValueForbidden"),
        (
            {
                "volumeClassRef": {"name": "c"},
                "resources": {"storage": "1Gi"},
                "dataSource": {"osImage": {"image": "i"}, "volumeSnapshotRef": {"name": "s"}},
            },
            "spec.dataSource.osImage",
            "FieldValueForbidden",
        ),
        (
            {"unclaimable": True, "claimRef": {"name": "m", "uid": "u"}},
            "spec.claimRef",
            "FieldValueForbidden",
        ),
        (
            {"encryption": {"secretRef": {"name": "Bad_Secret"}}},
            "spec.encryption.secretRef.name",
            "FieldValueInvalid",
        ),
        (
            {"volumeClassRef": {"name": "c"}, "resources": {"storage": "1Gi"}, "unclaimable": "sometimes"},
            "spec.unclaimable",
            "FieldValueTypeInvalid",
        ),
    ],
)
def test_volume_rules(spec: dict[str, Any], field: str, reason: str) -> None:
    assert fields(invalid("volume", volume(**spec))).get(field) == reason


def test_externally_provisioned_volume_accepted() -> None:
    obj = volume(claimRef={"name": "web-1", "uid": "u-1"})
    assert validate_create(resolve("volume"), obj) == obj


def test_volume_update_rules() -> None:
    info = resolve("volume")
    old = validate_create(
        info,
        volume(
            volumeClassRef={"name": "fast"},
            resources={"storage": "10Gi"},
            encryption={"secretRef": {"name": "key"}},
        ),
    )
    assert fields(
        invalid(
            "volume",
            volume(
                volumeClassRef={"name": "slow"},
                resources={"storage": "10Gi"},
                encryption={"secretRef": {"name": "key"}},
            ),
            old,
        )
    ) == {"spec.volumeClassRef": "FieldValueInvalid"}
    assert fields(
        invalid("volume", volume(volumeClassRef={"name": "fast"}, resources={"storage": "10Gi"}), old)
    ) == {"spec.encryption": "FieldValueInvalid"}
    bound = validate_update(info, old, {**old, "spec": {**old["spec"], "volumePoolRef": {"name": "vp"}}})
    assert fields(
        invalid("volume", {**bound, "spec": {**bound["spec"], "volumePoolRef": {"name": "vp2"}}}, bound)
    ) == {"spec.volumePoolRef": "FieldValueInvalid"}
    # Growing the volume passes validation (the resize policy is enforced by admission, with the class).
    grown = validate_update(
        info, bound, {**bound, "spec": {**bound["spec"], "resources": {"storage": "20480Mi"}}}
    )
    assert grown["spec"]["resources"] == {"storage": "20Gi"}


def test_volume_status() -> None:
    info = resolve("volume")
    old = validate_create(info, VOLUME_SAMPLE)
    out = validate_status_update(
        info,
        old,
        {
            "status": {
                "volumeID": "ceph://v1",
                "state": "Available",
                "resources": {"storage": "107374182400"},
                "access": {
                    "driver": "ceph",
                    "handle": "h",
                    "volumeAttributes": {"image": "pool/v1"},
                    "secretRef": {"name": "s"},
                },
            }
        },
    )
    assert out["status"]["resources"] == {"storage": "107374182400"}  # decimal stays decimal, as in Go
    with pytest.raises(errors.Invalid) as exc:
        validate_status_update(info, old, {"status": {"access": {"handle": "h"}}})
    assert fields(exc.value) == {"status.access.driver": "FieldValueRequired"}


@pytest.mark.parametrize(
    ("obj", "field", "reason"),
    [
        ({"capabilities": {"iops": 100}}, "capabilities.tps", "FieldValueRequired"),
        ({"capabilities": {"tps": "100Mi", "iops": 0}}, "capabilities.iops", "FieldValueInvalid"),
        ({"resizePolicy": "Sometimes"}, "resizePolicy", "FieldValueNotSupported"),
    ],
)
def test_volume_class_rules(obj: dict[str, Any], field: str, reason: str) -> None:
    assert fields(invalid("volumeclass", {**VOLUME_CLASS_SAMPLE, **obj})).get(field) == reason


def test_volume_class_update() -> None:
    info = resolve("vc")
    old = validate_create(info, VOLUME_CLASS_SAMPLE)
    assert validate_update(info, old, {**old, "resizePolicy": "ExpandOnly"})["resizePolicy"] == "ExpandOnly"
    assert fields(invalid("volumeclass", {**old, "capabilities": {"tps": "1Gi", "iops": "100"}}, old)) == {
        "capabilities": "FieldValueInvalid"
    }


# -- core ------------------------------------------------------------------------------------------


def test_secret_rules_and_string_data() -> None:
    info = resolve("secret")
    out = validate_create(
        info,
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "s", "namespace": "default"},
            "data": {"a": "eA=="},
            "stringData": {"ignition.yaml": "hello"},
        },
    )
    assert out["data"] == {"a": "eA==", "ignition.yaml": "aGVsbG8="} and "stringData" not in out
    err = invalid(
        "secret",
        {
            "metadata": {"name": "s", "namespace": "default"},
            "data": {"ok": "eA==", "bad": "not base64!", "bad key": "eA=="},
        },
    )
    assert fields(err) == {"data.bad": "FieldValueInvalid", "data[bad key]": "FieldValueInvalid"}
    assert "not base64" not in err.message  # secret contents are never echoed
    immutable = validate_create(
        info, {"metadata": {"name": "s", "namespace": "d"}, "data": {"a": "eA=="}, "immutable": True}
    )
    assert fields(invalid("secret", {**immutable, "data": {"a": "eQ=="}}, immutable)) == {
        "data": "FieldValueForbidden"
    }


def test_namespace_and_event() -> None:
    ns = validate_create(
        resolve("namespace"), {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}}
    )
    assert ns["status"] == {"phase": "Active"}
    assert fields(invalid("namespace", {"metadata": {"name": "team.a"}})) == {
        "metadata.name": "FieldValueInvalid"
    }
    ev = {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": "web-1.17a", "namespace": "default"},
        "involvedObject": {
            "apiVersion": COMPUTE,
            "kind": "Machine",
            "name": "web-1",
            "namespace": "default",
            "uid": "u",
        },
        "reason": "Scheduled",
        "message": "bound to pool-a",
        "type": "Normal",
        "count": 1,
        "firstTimestamp": "2026-01-01T00:00:00Z",
        "lastTimestamp": "2026-01-01T00:00:00Z",
        "source": {"component": "ironpool-scheduler"},
        "reportingComponent": "ironpool-scheduler",
    }
    assert validate_create(resolve("event"), ev) == ev
    assert fields(invalid("event", {**ev, "type": "Info"})) == {"type": "FieldValueNotSupported"}


def test_not_an_object() -> None:
    with pytest.raises(errors.BadRequest):
        validate_create(resolve("machine"), ["not", "a", "dict"])  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("policy", "size", "ok"),
    [
        ("Static", "10Gi", True),
        ("Static", "10240Mi", True),
        ("Static", "20Gi", False),
        ("ExpandOnly", "20Gi", True),
        ("ExpandOnly", "5Gi", False),
    ],
)
def test_volume_resize_policy(policy: str, size: str, ok: bool) -> None:
    vc = {**VOLUME_CLASS_SAMPLE, "resizePolicy": policy}
    old = volume(volumeClassRef={"name": "volumeclass-sample"}, resources={"storage": "10Gi"})
    new = volume(volumeClassRef={"name": "volumeclass-sample"}, resources={"storage": size})
    if ok:
        validate_volume_resize(vc, old, new)
    else:
        with pytest.raises(errors.Invalid) as exc:
            validate_volume_resize(vc, old, new)
        assert fields(exc.value) == {"spec.resources.storage": "FieldValueForbidden"}


HEALTHY_POOL_YAML = """
apiVersion: compute.ironcore.dev/v1alpha1
kind: MachinePool
metadata:
  name: machinepool-sample
  creationTimestamp: 2026-05-01T13:00:00Z
spec:
  providerID: ironcore://shared
status:
  conditions:
  - type: Ready
    status: True
    reason: HeartbeatReceived
    message: A heartbeat for the machine pool has been received within the allotted time.
    observedGeneration: 4
    lastTransitionTime: "2026-05-01T13:18:48.065888Z"
"""


def test_yaml_manifest_with_bare_timestamps_and_booleans() -> None:
    doc = yaml.safe_load(HEALTHY_POOL_YAML)
    info = resolve("machinepool")
    out = validate_status_update(info, validate_create(info, doc), doc)
    assert out["metadata"]["creationTimestamp"] == "2026-05-01T13:00:00Z"
    cond = out["status"]["conditions"][0]
    assert cond["status"] == "True" and cond["lastTransitionTime"] == "2026-05-01T13:18:48.065888Z"
