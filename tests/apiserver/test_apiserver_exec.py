"""``machines/exec`` on an in-process apiserver and a machinepoollet console endpoint, with a
websocket echo server standing in for the runtime's console (the real one, on libvirt, is
tests/e2e/test_up_console.py): who may open a console, the refusals before the upgrade, the relay in
Kubernetes' channel framing, and the poollet endpoint admitting only the apiserver's token."""

from __future__ import annotations

import asyncio
import base64
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from ironpool.api.channels import CLOSE, STDIN, STDOUT, V4, V5, frame
from ironpool.apiserver.app import serve
from ironpool.apiserver.auth.authentication import Authenticator, parse_token_file
from ironpool.apiserver.auth.websocket_token import PREFIX as WS_TOKEN_PREFIX
from ironpool.apiserver.options import ServerOptions
from ironpool.apiserver.serving.connections import ConnectionLimits
from ironpool.client import ClientConfig
from ironpool.client.machine_console import ConsoleRefused, MachineConsole
from ironpool.poollet.exec_server import ConsoleEndpoint
from ironpool.store.sqlite import SQLiteStore
from websockets.asyncio.client import connect
from websockets.asyncio.server import ServerConnection
from websockets.asyncio.server import serve as ws_serve
from websockets.exceptions import InvalidStatus
from websockets.typing import Subprotocol

COMPUTE = "/apis/compute.ironcore.dev/v1alpha1"
RBAC = "/apis/rbac.authorization.k8s.io/v1"
POOL_USER = "compute.ironcore.dev:system:machinepool:p1"
TOKENS = ('admin,admin,1,"system:masters"\nalice,alice,2\ncarol,carol,3\n'
          f'pool,{POOL_USER},4,"compute.ironcore.dev:system:machinepools"\n')
POOLLET_TOKEN = "poollet-secret"
MERGE = {"Content-Type": "application/merge-patch+json"}


@dataclass
class Console:
    """The stand-in runtime console: echoes what it gets (and closes on ``bye``, as a console does when
    its machine stops), counts sessions opened and says when one ended."""

    opened: int = 0
    ended: asyncio.Event = field(default_factory=asyncio.Event)
    paths: list[str] = field(default_factory=list)  # the request paths the sessions were opened on

    async def serve(self, ws: ServerConnection) -> None:
        self.opened += 1
        self.paths.append(ws.request.path if ws.request is not None else "")
        try:
            async for message in ws:
                if message == b"bye":
                    await ws.close(1000, "console closed")
                    break
                await ws.send(b"echo:" + (message if isinstance(message, bytes) else message.encode()))
        finally:
            self.ended.set()


@dataclass
class Rig:
    """An apiserver (``url``, an admin client ``api``), the poollet's console endpoint, the stand-in
    runtime console behind it."""

    url: str
    api: httpx.AsyncClient
    console: Console
    endpoint: ConsoleEndpoint

    def config(self, token: str) -> ClientConfig:
        return ClientConfig(server=self.url, token=token)

    async def open(self, token: str, name: str = "m1") -> MachineConsole:
        return await asyncio.to_thread(MachineConsole, self.config(token), "a", name)

    async def refused(self, token: str, name: str = "m1") -> ConsoleRefused:
        with pytest.raises(ConsoleRefused) as exc:
            (await self.open(token, name)).close()
        return exc.value


def ok(r: httpx.Response, *codes: int) -> Any:
    assert r.status_code in (codes or (200, 201)), r.text
    return r.json()


@contextlib.asynccontextmanager
async def apiserver(tmp_path: Path, token: str | None, name: str, ping_interval: float = 20.0,
                    connections: ConnectionLimits | None = None) -> AsyncIterator[str]:
    store = SQLiteStore(str(tmp_path / f"{name}.db"))
    stop, started = asyncio.Event(), asyncio.Event()
    port: list[int] = []

    def ready(p: int) -> None:
        port.append(p)
        started.set()

    options = ServerOptions(machinepoollet_token=token, stream_ping_interval=ping_interval,
                            connections=connections or ConnectionLimits())
    task = asyncio.create_task(serve(store, Authenticator(parse_token_file(TOKENS)), "127.0.0.1", 0,
                                     options=options, stop=stop, ready=ready))
    await asyncio.wait_for(started.wait(), 30)
    try:
        yield f"http://127.0.0.1:{port[0]}"
    finally:
        stop.set()
        await task
        await store.close()


async def seed(api: httpx.AsyncClient) -> None:
    """Namespace ``a`` where alice may ``edit`` and carol ``view``; class, pool p1, Machine m1."""
    ok(await api.post("/api/v1/namespaces", json={"metadata": {"name": "a"}}))
    for user, role in (("alice", "edit"), ("carol", "view")):
        ok(await api.post(f"{RBAC}/namespaces/a/rolebindings", json={
            "metadata": {"name": f"{user}-{role}"}, "subjects": [{"kind": "User", "name": user}],
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role}}))
    ok(await api.post(f"{COMPUTE}/machineclasses", json={
        "metadata": {"name": "small"}, "capabilities": {"cpu": "1", "memory": "1Gi"}}))
    ok(await api.post(f"{COMPUTE}/machinepools", json={"metadata": {"name": "p1"}}))
    ok(await api.post(f"{COMPUTE}/namespaces/a/machines", json={
        "metadata": {"name": "m1"}, "spec": {"machineClassRef": {"name": "small"}}}))


@pytest.fixture
def ping_interval() -> float:
    return 20.0


@pytest.fixture
async def rig(tmp_path: Path, ping_interval: float) -> AsyncIterator[Rig]:
    console = Console()
    runtime = await ws_serve(console.serve, "127.0.0.1", 0)
    runtime_url = f"ws://127.0.0.1:{runtime.sockets[0].getsockname()[1]}/exec/token"
    machines = {("a", "m1"): "iri-m1"}

    async def find(namespace: str, name: str) -> str:
        if (namespace, name) not in machines:
            raise LookupError(f"Machine {namespace}/{name} is not bound to MachinePool p1")
        return machines[(namespace, name)]

    async def open_console(machine_id: str) -> str:
        assert machine_id == "iri-m1"
        return runtime_url

    endpoint = ConsoleEndpoint(find, open_console, POOLLET_TOKEN, "127.0.0.1", 0)
    await endpoint.start()
    async with apiserver(tmp_path, POOLLET_TOKEN, "api", ping_interval) as url, httpx.AsyncClient(
            base_url=url, headers={"Authorization": "Bearer admin"}) as api:
        await seed(api)
        yield Rig(url, api, console, endpoint)
    await endpoint.stop()
    runtime.close()
    await runtime.wait_closed()


async def bind_and_run(rig: Rig, port: int | None) -> None:
    """m1 bound to p1 and Running; p1 publishing ``port`` as its poollet's endpoint."""
    api = rig.api
    status: dict[str, Any] = {"addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
                              "allocatable": {"cpu": "8", "memory": "8Gi", "class/machine.small": "4"},
                              "capacity": {"cpu": "8", "memory": "8Gi", "class/machine.small": "4"}}
    if port is not None:
        status["daemonEndpoints"] = {"machinepoolletEndpoint": {"port": port}}
    ok(await api.patch(f"{COMPUTE}/machinepools/p1/status", json={"status": status}, headers=MERGE))
    machine = ok(await api.get(f"{COMPUTE}/namespaces/a/machines/m1"))
    if not (machine["spec"].get("machinePoolRef") or {}).get("name"):
        ok(await api.post(f"{COMPUTE}/namespaces/a/machines/m1/binding", json={
            "apiVersion": "v1", "kind": "Binding", "metadata": {"name": "m1"},
            "target": {"kind": "MachinePool", "name": "p1"}}))
    ok(await api.patch(f"{COMPUTE}/namespaces/a/machines/m1/status", json={"status": {"state": "Running"}},
                       headers=MERGE))


async def test_refusals_come_before_the_upgrade_and_name_why(rig: Rig) -> None:
    # Not bound, then bound but not Running, then Running on a pool that publishes no endpoint.
    unbound = await rig.refused("alice")
    assert unbound.code == 400 and "spec.machinePoolRef is unset" in str(unbound), unbound
    await bind_and_run(rig, None)
    ok(await rig.api.patch(f"{COMPUTE}/namespaces/a/machines/m1/status",
                           json={"status": {"state": "Shutdown"}}, headers=MERGE))
    stopped = await rig.refused("alice")
    assert stopped.code == 409 and "status.state is Shutdown" in str(stopped), stopped
    await bind_and_run(rig, None)
    no_endpoint = await rig.refused("alice")
    assert no_endpoint.code == 503 and "daemonEndpoints" in str(no_endpoint), no_endpoint
    missing = await rig.refused("alice", "nope")
    assert missing.code == 404, missing

    # Who may not, whatever the Machine's state: view, no role at all, a pool identity (even its own
    # pool's Machine), nobody.
    denied = await rig.refused("carol")
    assert denied.code == 403 and "machines/exec" in str(denied), denied
    denied = await rig.refused("pool")
    assert denied.code == 403 and "may not open consoles" in str(denied), denied
    assert (await rig.refused("nobody")).code == 401

    # A POST that is no upgrade (kubectl's SPDY, curl) is told how to connect.
    plain = await rig.api.post(f"{COMPUTE}/namespaces/a/machines/m1/exec", json={})
    assert plain.status_code == 400 and "websocket" in plain.json()["message"], plain.text
    # Discovery lists the subresource with its verb, as kubectl sees pods/exec.
    resources = ok(await rig.api.get(COMPUTE))["resources"]
    assert next(r for r in resources if r["name"] == "machines/exec")["verbs"] == ["create"]
    assert rig.console.opened == 0


async def test_the_console_is_relayed_in_channels_and_detach_ends_it_upstream(rig: Rig) -> None:
    await bind_and_run(rig, rig.endpoint.port)
    session = await rig.open("alice")
    try:
        assert session.subprotocol == V5
        await asyncio.to_thread(session.send, b"hello")
        assert "echo:hello" in await asyncio.to_thread(session.read_until, "echo:hello", 10)
        await asyncio.to_thread(session.detach)
        assert session.status == {"metadata": {}, "status": "Success"}  # the server ended it first
    finally:
        session.close()
    await asyncio.wait_for(rig.console.ended.wait(), 10)  # the runtime's session closed too

    # v4 has no close frame for stdin; the channel bytes are the same. Input on other channels
    # (a resize) reaches nobody.
    rig.console.ended.clear()
    async with connect(f"{rig.url.replace('http', 'ws')}{COMPUTE}/namespaces/a/machines/m1/exec",
                       subprotocols=[Subprotocol(V4)],
                       additional_headers={"Authorization": "Bearer alice"}) as ws:
        assert ws.subprotocol == V4
        await ws.send(frame(4, b'{"Width":80,"Height":24}'))
        await ws.send(frame(STDIN, b"x"))
        assert await asyncio.wait_for(ws.recv(), 10) == frame(STDOUT, b"echo:x")
        await ws.send(bytes((CLOSE, STDIN)))  # not v5: no meaning, the session goes on
        await ws.send(frame(STDIN, b"y"))
        assert await asyncio.wait_for(ws.recv(), 10) == frame(STDOUT, b"echo:y")
    await asyncio.wait_for(rig.console.ended.wait(), 10)

    # The runtime's console ending ends the client's session, with a Success Status first.
    rig.console.ended.clear()
    session = await rig.open("alice")
    try:
        await asyncio.to_thread(session.send, b"bye")
        while (await asyncio.to_thread(session.recv, 10)) is not None:
            pass
        assert session.status == {"metadata": {}, "status": "Success"}
    finally:
        session.close()
    await asyncio.wait_for(rig.console.ended.wait(), 10)


async def test_a_subprotocol_is_required(rig: Rig) -> None:
    await bind_and_run(rig, rig.endpoint.port)
    with pytest.raises(InvalidStatus) as exc:
        async with connect(f"{rig.url.replace('http', 'ws')}{COMPUTE}/namespaces/a/machines/m1/exec",
                           additional_headers={"Authorization": "Bearer alice"}):
            pass
    assert exc.value.response.status_code == 400
    assert b"v5.channel.k8s.io" in (exc.value.response.body or b"")


def bearer_protocol(token: str) -> Subprotocol:
    """The token as a browser offers it: ``base64url.bearer.authorization.k8s.io.<base64url>``."""
    return Subprotocol(WS_TOKEN_PREFIX + base64.urlsafe_b64encode(token.encode()).decode().rstrip("="))


async def test_a_browser_carries_its_token_as_a_subprotocol(rig: Rig) -> None:
    # A browser cannot set an Authorization header on a websocket (the web console): the token in the
    # subprotocol authenticates as the header would, and RBAC decides as for the header.
    await bind_and_run(rig, rig.endpoint.port)
    url = f"{rig.url.replace('http', 'ws')}{COMPUTE}/namespaces/a/machines/m1/exec"
    async with connect(url, subprotocols=[Subprotocol(V5), bearer_protocol("alice")]) as ws:
        assert ws.subprotocol == V5  # the token's protocol is never the one chosen
        await ws.send(frame(STDIN, b"hi"))
        assert await asyncio.wait_for(ws.recv(), 10) == frame(STDOUT, b"echo:hi")
    for protocols, code, says in (
            ([bearer_protocol("carol")], 403, b"machines/exec"),  # view: no console
            ([bearer_protocol("nobody")], 401, b"invalid bearer token"),
            ([Subprotocol(WS_TOKEN_PREFIX + "%%%")], 401, b"base64url"),
            ([Subprotocol(WS_TOKEN_PREFIX)], 401, b"empty token")):
        with pytest.raises(InvalidStatus) as exc:
            async with connect(url, subprotocols=[Subprotocol(V5), *protocols]):
                pass
        assert exc.value.response.status_code == code, exc.value.response.body
        assert says in (exc.value.response.body or b""), exc.value.response.body
    # The web console asks for the console's recent output first: the query reaches the runtime's URL
    # through the poollet; a value that is no boolean is refused before anything is dialled.
    async with connect(url + "?history=true", subprotocols=[Subprotocol(V5), bearer_protocol("alice")]):
        pass
    assert rig.console.paths[-1] == "/exec/token?history=true", rig.console.paths
    assert rig.console.paths[0] == "/exec/token"  # not asked: not passed on
    opened = rig.console.opened
    with pytest.raises(InvalidStatus) as bad:
        async with connect(url + "?history=maybe", subprotocols=[Subprotocol(V5), bearer_protocol("alice")]):
            pass
    assert bad.value.response.status_code == 400 and b"history must be true or false" in (
        bad.value.response.body or b"")
    assert rig.console.opened == opened
    # Plain HTTP requests are not read so: their token goes in the header.
    refused = await rig.api.get(f"{COMPUTE}/namespaces/a/machines", headers={
        "Authorization": "", "Sec-WebSocket-Protocol": str(bearer_protocol("alice"))})
    assert refused.status_code == 401, refused.text


async def test_the_poollet_endpoint_admits_only_the_apiserver(rig: Rig, tmp_path: Path) -> None:
    path = f"ws://127.0.0.1:{rig.endpoint.port}/apis/compute.ironcore.dev/v1alpha1/namespaces/a/machines"
    for headers in ({}, {"Authorization": "Bearer alice"}, {"Authorization": f"Basic {POOLLET_TOKEN}"}):
        with pytest.raises(InvalidStatus) as exc:
            async with connect(f"{path}/m1/exec", additional_headers=headers):
                pass
        assert exc.value.response.status_code == 401, headers
    auth = {"Authorization": f"Bearer {POOLLET_TOKEN}"}
    with pytest.raises(InvalidStatus) as exc:
        async with connect(f"{path}/other/exec", additional_headers=auth):
            pass
    assert exc.value.response.status_code == 404 and b"not bound to MachinePool p1" in exc.value.response.body
    assert rig.console.opened == 0
    async with connect(f"{path}/m1/exec", additional_headers=auth) as ws:
        await ws.send(b"raw")
        assert await asyncio.wait_for(ws.recv(), 10) == b"echo:raw"

    # An apiserver holding another token is refused by the poollet, and says so as a 503.
    await bind_and_run(rig, rig.endpoint.port)
    async with apiserver(tmp_path, "wrong", "other") as other_url, httpx.AsyncClient(
            base_url=other_url, headers={"Authorization": "Bearer admin"}) as api:
        other = Rig(other_url, api, rig.console, rig.endpoint)
        await seed(api)
        await bind_and_run(other, rig.endpoint.port)
        refused = await other.refused("alice")
        assert refused.code == 503 and "refused this apiserver's credentials" in str(refused), refused
    assert rig.console.opened == 1


@pytest.mark.parametrize("ping_interval", [0.3])
async def test_a_client_that_stops_answering_pings_is_dropped_and_frees_the_console(rig: Rig) -> None:
    """The pings that keep an idle console open also find a client that vanished without a close
    (a laptop lid shut): the apiserver drops it and ends the runtime's session, which would otherwise
    hold the machine's one console forever. The client here completes the handshake over a raw
    socket, then never reads again, so it answers no ping."""
    await bind_and_run(rig, rig.endpoint.port)
    host, port = rig.url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    writer.write((f"GET {COMPUTE}/namespaces/a/machines/m1/exec HTTP/1.1\r\nHost: {host}\r\n"
                  "Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
                  "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                  f"Sec-WebSocket-Protocol: {V5}\r\nAuthorization: Bearer alice\r\n\r\n").encode())
    await writer.drain()
    head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
    assert head.startswith(b"HTTP/1.1 101"), head
    assert rig.console.opened == 1
    await asyncio.wait_for(rig.console.ended.wait(), 15)  # a few ping intervals, not the default 20 s
    writer.close()


async def test_console_connections_leave_the_connection_count(tmp_path: Path) -> None:
    """An upgraded connection leaves the HTTP protocol that counted it; its end must still be counted,
    or every console (refused ones too) would hold a place under --max-connections for good."""
    limits = ConnectionLimits(max_connections=64, max_unauthenticated=64)
    async with apiserver(tmp_path, POOLLET_TOKEN, "count", connections=limits) as url, httpx.AsyncClient(
            base_url=url, headers={"Authorization": "Bearer admin"}) as api:
        await seed(api)
        ws_url = f"{url.replace('http', 'ws')}{COMPUTE}/namespaces/a/machines/m1/exec"
        for _ in range(80):  # more than the cap: m1 is on no pool, each is a 400 after the upgrade began
            with pytest.raises(InvalidStatus) as exc:
                async with connect(ws_url, subprotocols=[Subprotocol(V5)],
                                   additional_headers={"Authorization": "Bearer alice"}):
                    pass
            assert exc.value.response.status_code == 400
        async with httpx.AsyncClient(base_url=url, headers={"Authorization": "Bearer admin"}) as fresh:
            ok(await fresh.get("/api/v1/namespaces"))  # a new connection is still accepted
