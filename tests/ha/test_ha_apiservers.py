"""Two apiservers over one etcd serve one API: a watch through one sees writes through the other, and
a client given both URLs carries on through the other when the one it used is gone."""

from __future__ import annotations

import asyncio
import itertools
import signal
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from ironpool.api import MachineClass
from ironpool.client import transport_errors as te
from ironpool.client.config import ClientConfig, ConfigError
from ironpool.client.failover import ServerList
from ironpool.client.rest import AsyncClient, Client
from ironpool.client.wire import ServerUnreachable, resource_for_model

from tests.ha.conftest import ControlPlane, start_control_plane
from tests.helpers.etcd import EtcdCluster
from tests.helpers.net import free_port

CLASSES = resource_for_model(MachineClass)
_NAMES = itertools.count()


def machine_class(name: str) -> dict[str, Any]:
    return {"apiVersion": "compute.ironcore.dev/v1alpha1", "kind": "MachineClass", "metadata": {"name": name},
            "capabilities": {"cpu": "1", "memory": "1Gi"}}


async def test_a_watch_through_one_apiserver_sees_writes_through_the_other(
        two_apiservers: ControlPlane) -> None:
    a, b = two_apiservers.servers
    path = "/apis/compute.ironcore.dev/v1alpha1/machineclasses"
    async with httpx.AsyncClient(timeout=30) as http:
        rv = (await http.get(a.url + path, headers=a.headers())).json()["metadata"]["resourceVersion"]
        async with http.stream("GET", a.url + path, headers=a.headers(),
                               params={"watch": "true", "resourceVersion": rv}) as stream:
            lines = stream.aiter_lines()
            name = f"through-b-{next(_NAMES)}"
            created = await http.post(b.url + path, headers=b.headers(), json=machine_class(name))
            assert created.status_code == 201, created.text
            event = orjson.loads(await asyncio.wait_for(anext(lines), 10))
    assert event["type"] == "ADDED" and event["object"]["metadata"]["name"] == name
    assert event["object"]["metadata"]["resourceVersion"] == created.json()["metadata"]["resourceVersion"]


def test_server_lists_in_config_and_flags(tmp_path: Path) -> None:
    config = tmp_path / "config.yaml"
    config.write_text("server: [https://a:8443, https://b:8443]\ntoken: t\n")
    loaded = ClientConfig.load(config)
    assert loaded.servers == ("https://a:8443", "https://b:8443")
    assert ClientConfig(server="http://a:1, http://b:2").servers == ("http://a:1", "http://b:2")
    with pytest.raises(ConfigError, match="'b:2' must be an http:// or https:// URL"):
        ClientConfig(server="http://a:1,b:2").require_server()
    config.write_text("server: [https://a:8443, 3]\n")
    with pytest.raises(ConfigError, match="server must be a URL or a list of URLs"):
        ClientConfig.load(config)


def test_which_requests_go_to_the_next_server() -> None:
    servers = ServerList(["http://a", "http://b"])
    refused = te.ConnectError("refused")
    assert servers.again("POST", refused, 0, "http://a") and servers.current == "http://b"
    # A write whose answer was lost may have been applied: never sent again.
    assert not servers.again("POST", te.ReadError("reset"), 0, "http://b")
    # A read is: first on a fresh connection to the same server, then on the next one.
    assert servers.again("GET", te.RemoteProtocolError("closed"), 0, "http://b")
    assert servers.current == "http://b"
    assert servers.again("GET", te.RemoteProtocolError("closed"), 1, "http://b")
    assert servers.current == "http://a"
    assert not servers.again("GET", refused, 2, "http://a")  # every server had its chance
    single = ServerList(["http://a"])
    assert not single.again("POST", refused, 0, "http://a")


def test_unreachable_names_the_server(two_apiservers: ControlPlane) -> None:
    dead = f"http://127.0.0.1:{free_port()}"
    with Client(ClientConfig(server=dead, token="x")) as c, pytest.raises(ServerUnreachable, match=dead):
        c.list_raw(CLASSES)


@pytest.fixture
def own_control_plane(etcd: EtcdCluster, tmp_path: Path) -> Any:
    plane = start_control_plane(etcd, tmp_path)
    try:
        yield plane
    finally:
        plane.stop()


async def test_clients_and_watches_carry_on_when_an_apiserver_dies(own_control_plane: ControlPlane) -> None:
    """Fault test: SIGKILL the apiserver a client and its watch use; writes and the watch go on
    through the other, and every acknowledged write is there."""
    a, b = own_control_plane.servers
    config = ClientConfig(server=f"{a.url},{b.url}", token=a.admin_token)
    acknowledged: list[str] = []
    seen: set[str] = set()
    async with AsyncClient(config) as client:
        rv = (await client.list_raw(CLASSES)).resource_version

        async def watch() -> None:
            nonlocal rv
            while True:
                try:
                    async for event in client.watch_raw(CLASSES, resource_version=rv):
                        rv = event.resource_version or rv
                        if event.type == "ADDED":
                            seen.add(event.object["metadata"]["name"])
                except ServerUnreachable:
                    await asyncio.sleep(0.1)  # as an informer backs off, then watches again

        watching = asyncio.ensure_future(watch())
        try:
            for i in range(60):
                if i == 20:
                    a.process.send_signal(signal.SIGKILL)
                    a.process.wait()
                try:
                    await client.create_raw(CLASSES, machine_class(f"c{i}"))
                except ServerUnreachable:
                    continue  # the answer was lost with the server: not acknowledged
                acknowledged.append(f"c{i}")
            assert client.servers.current == b.url
            assert len(acknowledged) >= 59  # at most the one write in flight when A died is unknown

            async def all_seen() -> bool:
                while not set(acknowledged) <= seen:
                    await asyncio.sleep(0.05)
                return True

            await asyncio.wait_for(all_seen(), 20)
        finally:
            watching.cancel()
        stored = {c["metadata"]["name"] for c in (await client.list_raw(CLASSES)).items}
    assert set(acknowledged) <= stored
