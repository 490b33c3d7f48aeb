"""The providers through the real plugin (``python -m pulumi.dynamic``) over gRPC, against a real
apiserver: Configure, Check, Diff, Create, Read, Update and Delete as the engine calls them.

No pools run here, so Machines are created with ``wait_for="none"``; booting is covered by
test_pulumi_example.py on real libvirt.
"""

from __future__ import annotations

import base64
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import yaml
from google.protobuf import empty_pb2
from ironpool.api.errors import NotFound
from ironpool.api.resources import resolve
from ironpool.client import Client, ClientConfig
from ironpool_pulumi.classes import MachineClassProvider, VolumeClassProvider
from ironpool_pulumi.machine import MachineProvider
from ironpool_pulumi.secret import SecretProvider
from ironpool_pulumi.volume import VolumeProvider
from pulumi.runtime import rpc
from pulumi_plugin import DIFF_NONE, DIFF_SOME, Plugin, PluginError, Props, provider_payload

from tests.conftest import ApiServer
from tests.helpers.net import free_port

MACHINES, VOLUMES, SECRETS = resolve("machines"), resolve("volumes"), resolve("secrets")
TYPE = "pulumi-python:dynamic/ironpool:{}"
IGNITION = '{"ignition": {"version": "3.4.0"}}'


def client_of(server: ApiServer) -> Client:
    return Client(ClientConfig(server=server.url, token=server.admin_token))


class Resources:
    """Check-then-create through the plugin, the way the engine registers a new resource."""

    def __init__(self, plugin: Plugin) -> None:
        self.p = plugin

    def urn(self, kind: str, name: str) -> str:
        return self.p.urn(TYPE.format(kind), name)

    def create(self, kind: str, provider: Any, props: dict[str, Any]) -> tuple[str, Props, Props]:
        urn = self.urn(kind, props["name"])
        inputs, failures = self.p.check(urn, {}, {"__provider": provider_payload(provider), **props})
        assert failures == [], failures
        rid, outs = self.p.create(urn, inputs)
        return rid, inputs, outs

    def classes(self) -> None:
        self.create("MachineClass", MachineClassProvider(),
                    {"name": "tiny", "capabilities": {"cpu": 1, "memory": "256Mi"}})
        self.create("VolumeClass", VolumeClassProvider(),
                    {"name": "grow", "capabilities": {"tps": "100Mi", "iops": 1000},
                     "resize_policy": "ExpandOnly"})
        self.create("VolumeClass", VolumeClassProvider(),
                    {"name": "fixed", "capabilities": {"tps": "100Mi", "iops": 1000}})


def machine_props(**extra: Any) -> dict[str, Any]:
    props = {"__provider": provider_payload(MachineProvider()), "name": "web", "machine_class": "tiny",
             "power": "on", "image": "tiny", "volumes": [{"volume": "data"}], "ignition": IGNITION,
             "labels": {"app": "web", "tier": "front"}, "wait_for": "none"}
    return {**props, **extra}


def test_machine_lifecycle_through_the_plugin(plugin: Plugin, apiserver: ApiServer) -> None:
    res, client = Resources(plugin), client_of(apiserver)
    res.classes()
    assert plugin.stub.GetPluginInfo(empty_pb2.Empty()).version == "0.1.0"
    urn = res.urn("Machine", "web")

    # Check: the API's defaults, with numbers and case normalised; a second check changes nothing.
    inputs, failures = plugin.check(urn, {}, machine_props())
    assert failures == []
    assert inputs["power"] == "On" and inputs["namespace"] == "default" and inputs["wait_timeout"] == 600
    assert inputs["volumes"] == [{"name": "data", "volume": "data", "device": "odb"}]
    # No scheduler runs here to answer where it would go: the preview says so (once per run).
    assert inputs["planned_pool"] == "" and "no scheduler answered" in inputs["placement"], inputs
    started = time.monotonic()
    again, _ = plugin.check(urn, inputs, machine_props())
    assert time.monotonic() - started < 5 and again["placement"] == inputs["placement"]
    assert {k: v for k, v in again.items() if k not in ("planned_pool", "placement")} == \
        {k: v for k, v in inputs.items() if k not in ("planned_pool", "placement")}

    # Create: the Machine and its Ignition Secret; no Ignition in the outputs, only its digest.
    rid, outs = plugin.create(urn, inputs)
    assert rid == "default/web"
    live = client.get_raw(MACHINES, "web", "default")
    assert live["spec"]["ignitionRef"] == {"name": "web-ignition", "key": "ignition.yaml"}
    assert live["spec"]["volumes"][0]["localDisk"]["image"] == "tiny"
    secret = client.get_raw(SECRETS, "web-ignition", "default")
    assert base64.b64decode(secret["data"]["ignition.yaml"]).decode() == IGNITION
    assert outs["uid"] == live["metadata"]["uid"] and outs["created_at"]
    assert "ignition" not in outs and IGNITION not in str(outs) and len(outs["ignition_sha256"]) == 64

    # Diff: nothing changed; what updates in place; what replaces; what never diffs.
    def diff(**change: Any) -> Any:
        news, fails = plugin.check(urn, inputs, machine_props(**change))
        assert fails == []
        return plugin.diff(rid, urn, outs, news, inputs)

    assert diff().changes == DIFF_NONE
    assert diff(wait_timeout=30, wait_for="running").changes == DIFF_NONE
    for change in ({"power": "Off"}, {"labels": {"app": "web"}}, {"ignition": "{}"}, {"volumes": []}):
        d = diff(**change)
        assert d.changes == DIFF_SOME and list(d.replaces) == [], change
    for prop, change in (("machine_class", {"machine_class": "tiny2"}), ("image", {"image": "other"}),
                         ("pool", {"pool": "elsewhere"})):
        if prop == "machine_class":
            res.create("MachineClass", MachineClassProvider(),
                       {"name": "tiny2", "capabilities": {"cpu": 2, "memory": "256Mi"}})
        d = diff(**change)
        assert d.changes == DIFF_SOME and list(d.replaces) == [prop] and d.deleteBeforeReplace, change

    # Update: power, a removed label and new Ignition land in place on the same object.
    news, _ = plugin.check(urn, inputs, machine_props(power="Off", labels={"app": "web"}, ignition="{}"))
    updated = plugin.update(rid, urn, outs, news, inputs)
    live = client.get_raw(MACHINES, "web", "default")
    assert live["metadata"]["uid"] == outs["uid"]
    assert live["spec"]["power"] == "Off" and live["metadata"]["labels"] == {"app": "web"}
    secret = client.get_raw(SECRETS, "web-ignition", "default")
    assert base64.b64decode(secret["data"]["ignition.yaml"]) == b"{}"
    assert updated["power"] == "Off" and updated["ignition_sha256"] != outs["ignition_sha256"]

    # Read (refresh): drift made out of band shows, labels ironpool manages do not.
    client.patch_raw(MACHINES, "web", {"spec": {"power": "On"}, "metadata": {"labels": {
        "team": "blue", "machinepoollet.ironpool.dev/pool": "p1"}}}, "default")
    read_id, read_outs, read_inputs = plugin.read(rid, urn, updated, news)
    assert read_id == rid
    assert read_outs["power"] == "On" and read_inputs is not None and read_inputs["power"] == "On"
    assert read_outs["labels"] == {"app": "web", "team": "blue"} == read_inputs["labels"]
    assert read_inputs["wait_for"] == "none" and "uid" not in read_inputs
    d = plugin.diff(rid, urn, read_outs, news, read_inputs)
    assert d.changes == DIFF_SOME and list(d.replaces) == []

    # A read-only get (`opts=ResourceOptions(id=...)`): the engine sends only the program's inputs.
    given = {"__provider": provider_payload(MachineProvider()), "name": "web"}
    got_id, got, _ = plugin.read(rid, urn, {}, given)
    assert got_id == rid and got["uid"] == outs["uid"] and got["power"] == "On"

    # Delete: the Machine and its Ignition Secret go; a refresh then drops it.
    plugin.delete(rid, urn, read_outs, read_inputs)
    for info, name in ((MACHINES, "web"), (SECRETS, "web-ignition")):
        with pytest.raises(NotFound):
            client.get_raw(info, name, "default")
    assert plugin.read(rid, urn, read_outs, read_inputs)[0] == ""


def test_invalid_inputs_fail_in_check_naming_the_property_and_create_nothing(
        plugin: Plugin, apiserver: ApiServer) -> None:
    res, client = Resources(plugin), client_of(apiserver)
    res.classes()

    def failed(props: dict[str, Any], kind: str = "Machine") -> dict[str, str]:
        _, failures = plugin.check(res.urn(kind, "x"), {}, props)
        assert failures, props
        return dict(failures)

    assert failed(machine_props(machine_class="nope"))["machine_class"] == \
        "MachineClass 'nope' does not exist (known: tiny)"
    assert "RFC 1123" in failed(machine_props(name="Bad_Name"))["name"]
    assert set(failed(machine_props(power="sideways"))) == {"power"}
    assert set(failed(machine_props(wait_for="forever"))) == {"wait_for"}
    assert set(failed(machine_props(wait_timeout=-1))) == {"wait_timeout"}
    assert set(failed(machine_props(ignition_secret="other"))) == {"ignition_secret"}
    assert set(failed(machine_props(labels={"bad key!": "x"}))) == {"labels"}
    # Every problem at once.
    assert set(failed(machine_props(name="Bad_Name", machine_class="nope"))) == {"name", "machine_class"}

    volume = {"__provider": provider_payload(VolumeProvider()), "name": "v", "volume_class": "grow",
              "size": "1Gi", "wait_for": "none"}
    assert "quantities must match" in failed({**volume, "size": "12x"}, "Volume")["size"]
    assert set(failed({**volume, "volume_class": "nope"}, "Volume")) == {"volume_class"}
    assert set(failed({**volume, "size": None}, "Volume")) == {"size"}
    caps = {"__provider": provider_payload(MachineClassProvider()), "name": "c", "capabilities": {"cpu": 0}}
    assert set(failed(caps, "MachineClass")) == {"capabilities"}
    assert client.list_raw(MACHINES, "default").items == []
    assert client.list_raw(VOLUMES, "default").items == []
    assert client.list_raw(SECRETS, "default").items == []


def test_volume_grows_in_place_and_never_shrinks(plugin: Plugin, apiserver: ApiServer) -> None:
    res, client = Resources(plugin), client_of(apiserver)
    res.classes()
    props = {"__provider": provider_payload(VolumeProvider()), "name": "data", "volume_class": "grow",
             "size": "1024Mi", "labels": {"a": "b"}, "wait_for": "none"}
    rid, inputs, outs = res.create("Volume", VolumeProvider(), props)
    assert inputs["size"] == "1Gi" and outs["state"] == "Pending"  # no volumepoollet here
    urn = res.urn("Volume", "data")

    bigger, failures = plugin.check(urn, inputs, {**props, "size": "2Gi"})
    assert failures == []
    d = plugin.diff(rid, urn, outs, bigger, inputs)
    assert d.changes == DIFF_SOME and list(d.replaces) == []
    outs = plugin.update(rid, urn, outs, bigger, inputs)
    assert client.get_raw(VOLUMES, "data", "default")["spec"]["resources"]["storage"] == "2Gi"
    assert outs["size"] == "2Gi"

    _, failures = plugin.check(urn, bigger, {**props, "size": "1Gi"})
    assert dict(failures)["size"] == "cannot shrink the Volume from 2Gi to 1Gi; a Volume only grows"
    d = plugin.diff(rid, urn, outs, {**bigger, "volume_class": "fixed"}, bigger)
    assert list(d.replaces) == ["volume_class"] and d.deleteBeforeReplace

    fixed = {**props, "name": "static", "volume_class": "fixed"}
    _, static_inputs, _ = res.create("Volume", VolumeProvider(), fixed)
    _, failures = plugin.check(res.urn("Volume", "static"), static_inputs, {**fixed, "size": "2Gi"})
    assert "resize policy Static" in dict(failures)["size"]
    plugin.delete(rid, urn, outs, bigger)
    with pytest.raises(NotFound):
        client.get_raw(VOLUMES, "data", "default")


def test_secret_data_never_becomes_an_output_and_drift_shows(plugin: Plugin, apiserver: ApiServer) -> None:
    res, client = Resources(plugin), client_of(apiserver)
    data = {"ignition.yaml": IGNITION, "extra": "s3cr3t-value"}
    props = {"__provider": provider_payload(SecretProvider()), "name": "ign", "data": data}
    rid, inputs, outs = res.create("Secret", SecretProvider(), props)
    urn = res.urn("Secret", "ign")
    assert "data" not in outs and "s3cr3t-value" not in str(outs)
    assert outs["keys"] == ["extra", "ignition.yaml"] and outs["type"] == "Opaque"

    # Changed out of band: refresh sees another digest, the next up puts the program's data back.
    client.patch_raw(SECRETS, "ign", {"data": {"extra": base64.b64encode(b"tampered").decode()}}, "default")
    _, read_outs, read_inputs = plugin.read(rid, urn, outs, inputs)
    assert read_outs["data_sha256"] != outs["data_sha256"]
    assert read_inputs is not None and "data" not in read_inputs
    news, _ = plugin.check(urn, inputs, props)
    assert plugin.diff(rid, urn, read_outs, news, inputs).changes == DIFF_SOME
    assert plugin.diff(rid, urn, outs, news, inputs).changes == DIFF_NONE

    # A removed key goes; the others are set again.
    news, _ = plugin.check(urn, inputs, {**props, "data": {"ignition.yaml": IGNITION}})
    updated = plugin.update(rid, urn, read_outs, news, inputs)
    live = client.get_raw(SECRETS, "ign", "default")
    assert set(live["data"]) == {"ignition.yaml"} and updated["keys"] == ["ignition.yaml"]


def test_preview_values_not_known_yet(plugin: Plugin, apiserver: ApiServer) -> None:
    res = Resources(plugin)
    res.classes()
    urn = res.urn("Machine", "web")
    # A class name coming from a resource not created yet: the check passes, the value stays unknown.
    inputs, failures = plugin.check(urn, {}, machine_props(machine_class=rpc.UNKNOWN))
    assert failures == []
    known, _ = plugin.check(urn, {}, machine_props())
    rid, outs = plugin.create(urn, known)
    d = plugin.diff(rid, urn, outs, machine_props(machine_class=rpc.UNKNOWN), known)
    assert d.changes == DIFF_SOME and "machine_class" in d.replaces
    d = plugin.diff(rid, urn, outs, {**known, "labels": rpc.UNKNOWN}, known)
    assert d.changes == DIFF_SOME and list(d.replaces) == []
    assert inputs["machine_class"] != "tiny"


def test_a_create_that_times_out_is_rolled_back(plugin: Plugin, apiserver: ApiServer) -> None:
    res, client = Resources(plugin), client_of(apiserver)
    res.classes()
    urn = res.urn("Machine", "web")
    inputs, _ = plugin.check(urn, {}, machine_props(wait_for="scheduled", wait_timeout=1))
    with pytest.raises(PluginError) as err:
        plugin.create(urn, inputs)
    message = err.value.details
    assert "Machine default/web did not become ready within 1s (wait_for=scheduled): not scheduled" in message
    assert "It was deleted again, so nothing is left behind" in message
    assert client.list_raw(MACHINES, "default").items == []
    assert client.list_raw(SECRETS, "default").items == []


def test_existing_objects_are_never_taken_over(plugin: Plugin, apiserver: ApiServer) -> None:
    res, client = Resources(plugin), client_of(apiserver)
    res.classes()
    urn = res.urn("Machine", "web")
    inputs, _ = plugin.check(urn, {}, machine_props())

    def create_fails(message: str) -> None:
        with pytest.raises(PluginError) as err:
            plugin.create(urn, inputs)
        assert message in err.value.details
        secret = client.get_raw(SECRETS, "web-ignition", "default")
        assert base64.b64decode(secret["data"]["ignition.yaml"]) == b"theirs"

    # Someone else's Secret under the name of this Machine's Ignition Secret.
    theirs = {"metadata": {"name": "web-ignition", "namespace": "default"},
              "stringData": {"ignition.yaml": "theirs"}}
    client.create_raw(SECRETS, theirs, "default")
    create_fails("Secret default/web-ignition exists and does not hold this Machine's Ignition")
    assert client.list_raw(MACHINES, "default").items == []
    # A Machine of that name (from another stack, say) with its own Ignition Secret.
    client.delete_raw(SECRETS, "web-ignition", "default")
    theirs["metadata"]["labels"] = {"pulumi.ironpool.dev/ignition-of": "web"}
    client.create_raw(SECRETS, theirs, "default")
    client.create_raw(MACHINES, {"metadata": {"name": "web", "namespace": "default"},
                                 "spec": {"machineClassRef": {"name": "tiny"}}}, "default")
    create_fails("Machine default/web already exists and is not managed by this stack")


def test_concurrent_creates_share_one_client(plugin: Plugin, apiserver: ApiServer) -> None:
    res, client = Resources(plugin), client_of(apiserver)
    res.classes()
    errors: list[BaseException] = []

    def one(i: int) -> None:
        try:
            res.create("Volume", VolumeProvider(), {"name": f"v{i}", "volume_class": "grow", "size": "1Gi",
                                                    "wait_for": "none"})
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(12)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert errors == []
    assert len(client.list_raw(VOLUMES, "default").items) == 12


def check_class_with(env: dict[str, str], config: dict[str, str]) -> list[tuple[str, str]]:
    """Check a Machine of an unknown class through a plugin configured by ``env`` and ``config``."""
    with Plugin(env=env) as p:
        p.configure(config, ("ironpool:token",))
        _, failures = p.check(p.urn(TYPE.format("Machine"), "m"), {}, machine_props(machine_class="nope"))
        return failures


def test_configuration_stack_config_then_environment_then_client_config_file(
        apiserver: ApiServer, tmp_path: Path) -> None:
    reachable = {"ironpool:server": apiserver.url, "ironpool:token": apiserver.admin_token}
    nowhere = tmp_path / "absent.yaml"
    unset = {"IRONPOOL_SERVER": "", "IRONPOOL_TOKEN": ""}  # empty counts as unset
    # The stack config alone.
    assert dict(check_class_with({**unset, "IRONPOOL_CONFIG": str(nowhere)}, reachable))["machine_class"]
    # The environment alone.
    env = {"IRONPOOL_CONFIG": str(nowhere), "IRONPOOL_SERVER": apiserver.url,
           "IRONPOOL_TOKEN": apiserver.admin_token}
    assert dict(check_class_with(env, {}))["machine_class"]
    # The client config file alone (what `ironpool up` writes).
    config_file = tmp_path / "config.yaml"
    config_file.write_text(yaml.safe_dump({"server": apiserver.url, "token": apiserver.admin_token}))
    assert dict(check_class_with({**unset, "IRONPOOL_CONFIG": str(config_file)}, {}))["machine_class"]
    # The stack config wins over the environment: a wrong token from the stack is used (and refused),
    # which the user reads in one line that says what to do, not as a traceback.
    with pytest.raises(PluginError) as err:
        check_class_with(env, {"ironpool:token": "wrong"})
    assert err.value.details == ("ironpool: the apiserver refused the token (Unauthorized): set it with "
                                 "`pulumi config set --secret ironpool:token TOKEN` (or IRONPOOL_TOKEN)")
    # An apiserver that is not there: one line naming it.
    with pytest.raises(PluginError) as err:
        check_class_with(env, {"ironpool:server": f"http://127.0.0.1:{free_port()}"})
    assert err.value.details.startswith("ironpool: cannot reach the apiserver at http://127.0.0.1:")
    assert "\n" not in err.value.details and "Traceback" not in err.value.details
    # Nothing configured anywhere: the error says how to configure it.
    with pytest.raises(PluginError) as err:
        check_class_with({**unset, "IRONPOOL_CONFIG": str(nowhere)}, {})
    assert err.value.details.startswith("ironpool: no apiserver configured: run `pulumi config set "
                                        "ironpool:server URL`")
    assert "\n" not in err.value.details


def test_lookups_read_pools_classes_and_a_machine(apiserver: ApiServer, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    import pulumi
    from ironpool_pulumi import get_machine, get_machine_classes, get_machine_pools

    client = client_of(apiserver)
    client.create_raw(resolve("machineclasses"), {"metadata": {"name": "tiny"},
                                                  "capabilities": {"cpu": "1", "memory": "256Mi"}})
    pools = resolve("machinepools")
    client.create_raw(pools, {"metadata": {"name": "host-1", "labels": {"zone": "a"}}})
    status = {"state": "Ready", "availableMachineClasses": [{"name": "tiny"}], "capacity": {"cpu": "4"},
              "allocatable": {"cpu": "3"}}
    client.patch_raw(pools, "host-1", {"status": status}, subresource="status")
    client.create_raw(MACHINES, {"metadata": {"name": "web", "namespace": "default"},
                                 "spec": {"machineClassRef": {"name": "tiny"}}}, "default")
    client.patch_raw(MACHINES, "web", {"status": {"state": "Running"}}, "default", subresource="status")
    monkeypatch.setenv("IRONPOOL_CONFIG", str(tmp_path / "absent.yaml"))
    pulumi.runtime.set_all_config({"ironpool:server": apiserver.url, "ironpool:token": apiserver.admin_token},
                                  ["ironpool:token"])
    try:
        (pool,) = get_machine_pools()
        assert (pool.name, pool.state, pool.machine_classes, pool.labels) == ("host-1", "Ready", ["tiny"],
                                                                             {"zone": "a"})
        assert pool.capacity == {"cpu": "4"} and pool.allocatable == {"cpu": "3"}
        assert [(c.name, c.capabilities) for c in get_machine_classes()] == [
            ("tiny", {"cpu": "1", "memory": "256Mi"})]
        web = get_machine("web")
        assert (web.namespace, web.machine_class, web.state, web.power) == \
            ("default", "tiny", "Running", "On")
        assert web.ip_addresses == []  # the API reports no addresses yet
        with pytest.raises(LookupError, match="Machine default/nope does not exist"):
            get_machine("nope")
    finally:
        pulumi.runtime.set_all_config({}, [])


def test_state_output_is_as_of_the_current_spec_when_nothing_waits(plugin: Plugin,
                                                                   apiserver: ApiServer) -> None:
    """After a create or replace that does not wait the state is there (Pending); after an update
    that does not wait it is not the state of the spec before (a change not acted on is Pending)."""
    res, client = Resources(plugin), client_of(apiserver)
    res.classes()
    props = {"__provider": provider_payload(MachineProvider()), "name": "web", "machine_class": "tiny",
             "power": "On", "wait_for": "none"}
    rid, inputs, outs = res.create("Machine", MachineProvider(), props)
    assert outs["state"] == "Pending"
    live = client.patch_raw(MACHINES, "web", {"status": {"state": "Running", "observedGeneration": 1}},
                            "default", subresource="status")
    assert live["metadata"]["generation"] == 1
    urn = res.urn("Machine", "web")
    _, running, _ = plugin.read(rid, urn, outs, inputs)
    assert running["state"] == "Running"
    news, _ = plugin.check(urn, inputs, {**props, "power": "Off"})
    updated = plugin.update(rid, urn, running, news, inputs)
    assert updated["state"] == "Pending"  # the poollet has not acted on power Off yet
    client.patch_raw(MACHINES, "web", {"status": {"state": "Shutdown", "observedGeneration": 2}}, "default",
                     subresource="status")
    assert plugin.read(rid, urn, updated, news)[1]["state"] == "Shutdown"
