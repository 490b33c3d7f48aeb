"""Fast tests without a server: the pickled providers carry nothing, the diff rules, the value helpers,
the configuration precedence, and what a program registers (under ``pulumi.runtime.set_mocks``)."""

from __future__ import annotations

import asyncio
import base64
from pathlib import Path
from typing import Any

import dill
import pulumi
import pytest
import yaml
from ironpool.api.machine_access import SSH_ENDPOINT_ANNOTATION, SshEndpoint, parse_endpoint, ssh_endpoint
from ironpool.client import ConfigError
from ironpool_pulumi import AttachedVolume, Machine, MachineClass, Secret, Volume, VolumeClass
from ironpool_pulumi.base import object_id, split_id
from ironpool_pulumi.classes import MachineClassProvider, VolumeClassProvider
from ironpool_pulumi.connection import Connection, client_config
from ironpool_pulumi.machine import MachineProvider, ip_addresses
from ironpool_pulumi.secret import SecretProvider
from ironpool_pulumi.values import digest, is_unknown, plain, without_system_keys
from ironpool_pulumi.volume import VolumeProvider
from pulumi.dynamic.dynamic import serialize_provider
from pulumi.output import Unknown
from pulumi.runtime import rpc

PROVIDERS = (MachineProvider, VolumeProvider, MachineClassProvider, VolumeClassProvider, SecretProvider)


@pytest.fixture
def no_client_config(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    for var in ("IRONPOOL_SERVER", "IRONPOOL_TOKEN", "IRONPOOL_NAMESPACE"):
        monkeypatch.delenv(var, raising=False)
    path = tmp_path / "config.yaml"
    monkeypatch.setenv("IRONPOOL_CONFIG", str(path))
    return path


@pytest.mark.parametrize("provider", PROVIDERS)
def test_the_pickled_provider_is_a_reference_without_attributes(provider: type,
                                                                no_client_config: Path) -> None:
    from ironpool_pulumi.connection import connection

    # Configured as the plugin configures it: the token lives in the process, not in the provider.
    connection.configure({"server": "https://ironpool.example:6443", "token": "tok-s3cret"})
    instance = provider()
    payload = base64.b64decode(serialize_provider(instance))
    assert vars(instance) == {}
    assert b"tok-s3cret" not in payload and b"ironpool.example" not in payload
    assert provider.__module__.encode() in payload  # by reference: the code comes from the package
    assert type(dill.loads(payload)) is provider
    assert provider.serialize_as_secret_always is False
    connection.configure({})


def test_ids_and_values() -> None:
    assert split_id(object_id("default", "web")) == ("default", "web")
    assert split_id(object_id(None, "small")) == (None, "small")
    assert plain({"cpu": 2.0, "ratio": 0.5, "l": [1.0, "x"]}) == {"cpu": 2, "ratio": 0.5, "l": [1, "x"]}
    assert is_unknown({"a": [1, Unknown()]}) and not is_unknown({"a": [1, None]})
    assert digest({"b": "2", "a": "1"}) == digest({"a": "1", "b": "2"}) and digest(None) is None
    live = {"app": "web", "machinepoollet.ironpool.dev/pool": "p1", "x.ironcore.dev/y": "z",
            "ironpool.dev": "k"}
    assert without_system_keys(live, {}) == {"app": "web", "ironpool.dev": "k"}
    assert without_system_keys(live, {"x.ironcore.dev/y": "old"}) == {"app": "web", "ironpool.dev": "k",
                                                                     "x.ironcore.dev/y": "z"}
    assert without_system_keys({"machinepoollet.ironpool.dev/pool": "p1"}, None) is None


def test_addresses_come_from_the_interfaces_status_once_networking_reports_them() -> None:
    status = {"networkInterfaces": [{"name": "a", "ips": ["10.0.0.5", {"value": "fd00::5"}]},
                                    {"name": "b", "state": "Pending"}]}
    assert ip_addresses({"status": status}) == ["10.0.0.5", "fd00::5"]
    assert ip_addresses({"status": {"networkInterfaces": [{"name": "a", "state": "Attached"}]}}) == []
    assert ip_addresses({}) == []
    # where SSH answers: the forward the pool reports, else the first address on port 22
    assert ssh_endpoint({"status": status}) == SshEndpoint("10.0.0.5", 22)
    forwarded = {"metadata": {"annotations": {SSH_ENDPOINT_ANNOTATION: "127.0.0.1:40022"}}, "status": status}
    assert str(ssh_endpoint(forwarded)) == "127.0.0.1:40022"
    assert ssh_endpoint({}) is None and parse_endpoint("nonsense") is None
    assert str(parse_endpoint("[fd00::1]:22")) == "[fd00::1]:22"


def machine_outputs(**extra: Any) -> dict[str, Any]:
    outs = {"name": "web", "namespace": "default", "machine_class": "small", "power": "On", "image": "tiny",
            "labels": {"app": "web"}, "wait_for": "running", "wait_timeout": 600, "machine_pool": "host-1",
            "ignition_sha256": digest("ign"), "uid": "u1", "state": "Running"}
    return {**outs, **extra}


def machine_inputs(**extra: Any) -> dict[str, Any]:
    ins = {"name": "web", "namespace": "default", "machine_class": "small", "power": "On", "image": "tiny",
           "labels": {"app": "web"}, "wait_for": "running", "wait_timeout": 600, "ignition": "ign"}
    return {**ins, **extra}


@pytest.mark.parametrize(("change", "changes", "replaces"), [
    ({}, False, []),
    ({"wait_for": "none", "wait_timeout": 5}, False, []),
    ({"power": "Off"}, True, []),
    ({"labels": None}, True, []),
    ({"ignition": "new"}, True, []),
    ({"volumes": [{"name": "d", "volume": "d", "device": "odb"}]}, True, []),
    ({"machine_class": "large"}, True, ["machine_class"]),
    ({"image": "other"}, True, ["image"]),
    ({"name": "web2"}, True, ["name"]),
    ({"pool": "host-1"}, True, []),  # pinning to where it runs: nothing to replace
    ({"pool": "host-2"}, True, ["pool"]),
    ({"power": Unknown()}, True, []),
    ({"machine_class": Unknown()}, True, ["machine_class"]),
])
def test_machine_diff(change: dict[str, Any], changes: bool, replaces: list[str]) -> None:
    result = MachineProvider().diff("default/web", machine_outputs(), machine_inputs(**change))
    assert result.changes is changes
    assert result.replaces == replaces
    assert result.delete_before_replace is bool(replaces)


def test_machine_update_declares_the_new_state_but_never_the_scheduler_s_binding() -> None:
    patch = MachineProvider().update_patch(machine_outputs(pool="host-1"), machine_inputs(power="Off"))
    assert patch is not None and patch["spec"]["power"] == "Off"
    assert "machinePoolRef" not in patch["spec"]  # neither set nor removed: the scheduler owns it
    dropped = MachineProvider().update_patch(machine_outputs(), machine_inputs(labels=None))
    assert dropped is not None and dropped["metadata"] == {"labels": None}
    assert MachineProvider().update_patch(machine_outputs(), machine_inputs(wait_for="none")) is None


def test_client_config_precedence(no_client_config: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    no_client_config.write_text(yaml.safe_dump({"server": "http://file:1", "token": "file-token",
                                                "namespace": "from-file"}))
    assert client_config({}).server == "http://file:1"
    monkeypatch.setenv("IRONPOOL_SERVER", "http://env:2")
    monkeypatch.setenv("IRONPOOL_TOKEN", "env-token")
    config = client_config({})
    assert (config.server, config.token, config.namespace) == ("http://env:2", "env-token", "from-file")
    config = client_config({"server": "https://stack:3", "token": "stack-token", "namespace": "team",
                            "caFile": "/etc/ca.pem"})
    assert (config.server, config.token, config.namespace, config.ca_file) == \
        ("https://stack:3", "stack-token", "team", "/etc/ca.pem")


def test_no_server_anywhere_says_how_to_configure_one(no_client_config: Path) -> None:
    connection = Connection()
    connection.configure({})
    with pytest.raises(ConfigError, match="pulumi config set ironpool:server URL"):
        connection.client()


class Recorder(pulumi.runtime.Mocks):
    """Records every registration and echoes the inputs as outputs (plus a uid)."""

    def __init__(self) -> None:
        self.registered: dict[str, Any] = {}

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict[str, Any]]:
        self.registered[args.name] = (args.typ, dict(args.inputs))
        return f"id-{args.name}", {**args.inputs, "uid": f"uid-{args.name}"}

    def call(self, args: pulumi.runtime.MockCallArgs) -> tuple[dict[str, Any], None]:
        return {}, None


@pytest.fixture
def event_loop_for_pulumi() -> Any:
    """The Pulumi SDK creates futures on the thread's current loop; an earlier asyncio test may have
    left the main thread without one."""
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)
    yield loop
    asyncio.set_event_loop(None)
    loop.close()


def test_what_a_program_registers(event_loop_for_pulumi: Any) -> None:
    recorder = Recorder()
    pulumi.runtime.set_mocks(recorder, preview=False)

    @pulumi.runtime.test
    def program() -> Any:
        small = MachineClass("small", capabilities={"cpu": 2, "memory": "1Gi"})
        fast = VolumeClass("fast", capabilities={"tps": "1Mi", "iops": 10})
        data = Volume("data", volume_class=fast, size="1Gi")
        logs = Volume("logs", name="logs-volume", volume_class="fast", size="1Gi")
        ign = Secret("ign", data={"ignition.yaml": "{}"})
        web = Machine("web", machine_class=small, image="tiny", ignition="{secret}",
                      volumes=[data, AttachedVolume(logs, name="logs", device="odz"), "scratch"])
        Machine("db", machine_class="small", ignition_secret=ign)
        return web.uid

    program()
    reg = recorder.registered
    assert {name: typ for name, (typ, _) in reg.items()} == {
        "small": "pulumi-python:dynamic/ironpool:MachineClass",
        "fast": "pulumi-python:dynamic/ironpool:VolumeClass",
        "data": "pulumi-python:dynamic/ironpool:Volume", "logs": "pulumi-python:dynamic/ironpool:Volume",
        "ign": "pulumi-python:dynamic/ironpool:Secret", "web": "pulumi-python:dynamic/ironpool:Machine",
        "db": "pulumi-python:dynamic/ironpool:Machine"}
    web = reg["web"][1]
    assert web["name"] == "web" and web["machine_class"] == "small" and web["wait_for"] == "running"
    assert web["volumes"] == [{"volume": "data"},
                              {"name": "logs", "volume": "logs-volume", "device": "odz"},
                              {"volume": "scratch"}]
    # Secrets are Pulumi secrets; the serialized provider is not (it carries nothing secret).
    assert rpc.is_rpc_secret(web["ignition"]) and rpc.unwrap_rpc_secret(web["ignition"]) == "{secret}"
    assert rpc.is_rpc_secret(reg["ign"][1]["data"])
    assert isinstance(web["__provider"], str) and not rpc.is_rpc_secret(web["__provider"])
    assert reg["db"][1]["ignition_secret"] == "ign"
    assert reg["data"][1]["volume_class"] == "fast"


def test_secret_diff_compares_data_by_digest_and_replaces_on_type() -> None:
    data = {"k": "v"}
    outs = {"name": "s", "namespace": "default", "type": "Opaque", "data_sha256": digest(data), "keys": ["k"]}
    ins = {"name": "s", "namespace": "default", "type": "Opaque", "data": data}
    provider = SecretProvider()
    assert provider.diff("default/s", outs, ins).changes is False
    changed = provider.diff("default/s", outs, {**ins, "data": {"k": "w"}})
    assert changed.changes is True and changed.replaces == []
    retyped = provider.diff("default/s", outs, {**ins, "type": "kubernetes.io/tls"})
    assert retyped.replaces == ["type"] and retyped.delete_before_replace is True
    assert provider.update_patch(outs, {**ins, "data": {"n": "x"}}) == {
        "data": {"k": None, "n": base64.b64encode(b"x").decode()}}
