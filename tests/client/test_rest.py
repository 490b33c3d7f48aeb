"""Client and AsyncClient against a real apiserver: typed CRUD, patch, status, paging, watch, errors."""

from __future__ import annotations

import socket
import threading

import pytest
from ironpool.api.compute import Machine, MachineClass, MachinePool
from ironpool.api.errors import AlreadyExists, Conflict, Invalid, NotFound, Unauthorized
from ironpool.api.resources import resolve
from ironpool.client.config import ClientConfig
from ironpool.client.rest import AsyncClient, Client
from ironpool.client.wire import ServerUnreachable

from tests.helpers.net import free_port


def machine_class(name: str, cpu: str = "2", labels: dict[str, str] | None = None) -> MachineClass:
    return MachineClass.model_validate(
        {"metadata": {"name": name, "labels": labels or {}}, "capabilities": {"cpu": cpu, "memory": "4Gi"}}
    )


def test_typed_crud_round_trip(config: ClientConfig) -> None:
    with Client(config) as client:
        created = client.create(machine_class("small"))
        assert created.metadata.uid and created.metadata.resource_version
        assert client.get(MachineClass, "small").capabilities == created.capabilities
        with pytest.raises(AlreadyExists):
            client.create(machine_class("small"))

        patched = client.patch(MachineClass, "small", {"metadata": {"labels": {"tier": "gold"}}})
        assert patched.metadata.labels == {"tier": "gold"}
        assert int(patched.metadata.resource_version or 0) > int(created.metadata.resource_version or 0)

        # A PUT with the stale resourceVersion is refused.
        with pytest.raises(Conflict):
            client.update(created)
        patched.metadata.annotations = {"note": "x"}
        updated = client.update(patched)
        assert updated.metadata.annotations == {"note": "x"}

        with pytest.raises(Conflict):
            client.delete(MachineClass, "small", resource_version=created.metadata.resource_version)
        client.delete(MachineClass, "small", resource_version=updated.metadata.resource_version)
        with pytest.raises(NotFound):
            client.get(MachineClass, "small")


def test_invalid_objects_raise_invalid_with_causes(config: ClientConfig) -> None:
    with Client(config) as client, pytest.raises(Invalid) as info:
        client.create_raw(
            resolve("machineclass"),
            {"metadata": {"name": "bad"}, "capabilities": {"cpu": "-1", "memory": "1Gi"}},
        )
    assert any(c.field == "capabilities.cpu" for c in info.value.causes)


def test_delete_with_finalizers_returns_the_terminating_object(config: ClientConfig) -> None:
    with Client(config) as client:
        client.create_raw(resolve("machinepool"), {"metadata": {"name": "held", "finalizers": ["test/hold"]}})
        held = client.delete(MachinePool, "held")
        assert held is not None and held.metadata.deletion_timestamp
        assert client.get(MachinePool, "held").metadata.deletion_timestamp
        client.patch(MachinePool, "held", {"metadata": {"finalizers": None}})
        with pytest.raises(NotFound):
            client.get(MachinePool, "held")


def test_dry_run_writes_nothing(config: ClientConfig) -> None:
    with Client(config) as client:
        client.create(machine_class("dry"), dry_run=True)
        with pytest.raises(NotFound):
            client.get(MachineClass, "dry")


def test_namespaced_objects_and_status_subresource(config: ClientConfig) -> None:
    with Client(config) as client:
        client.create(machine_class("c1"))
        m = client.create(
            Machine.model_validate({"metadata": {"name": "m1"}, "spec": {"machineClassRef": {"name": "c1"}}})
        )
        assert m.metadata.namespace == "default"
        status = client.patch(Machine, "m1", {"status": {"state": "Running"}}, subresource="status")
        assert status.status is not None and status.status.state == "Running"
        # The main resource ignores status; the status subresource keeps the spec.
        again = client.patch(Machine, "m1", {"status": {"state": "Shutdown"}, "spec": {"power": "Off"}})
        assert again.status is not None and again.status.state == "Running" and again.spec.power == "Off"
        again.status.state = "Shutdown"
        assert client.update_status(again).status.state == "Shutdown"  # type: ignore[union-attr]
        everywhere = client.list(Machine)
        assert [i.metadata.name for i in everywhere.items] == ["m1"]
        assert client.list(Machine, namespace="other").items == []


def test_paging_and_selectors(config: ClientConfig) -> None:
    with Client(config) as client:
        for i in range(7):
            client.create(machine_class(f"c{i}", labels={"parity": "even" if i % 2 == 0 else "odd"}))
        page = client.list(MachineClass, limit=3)
        assert len(page.items) == 3 and page.continue_
        names = [c.metadata.name for c in client.list_all(MachineClass, page_size=2)]
        assert names == [f"c{i}" for i in range(7)]
        odd = client.list(MachineClass, label_selector="parity=odd")
        assert {c.metadata.name for c in odd.items} == {"c1", "c3", "c5"}


def test_sync_watch_sees_changes_from_a_resource_version(config: ClientConfig) -> None:
    with Client(config) as client:
        # Revision "0" means "current state first" (Kubernetes semantics): start from a real revision.
        client.create(machine_class("seed"))
        start = client.list(MachinePool).resource_version
        assert start != "0"
        client.create_raw(
            resolve("machinepool"), {"metadata": {"name": "p1"}, "spec": {"providerID": "x://1"}}
        )
        client.patch(MachinePool, "p1", {"metadata": {"labels": {"a": "b"}}})
        client.delete(MachinePool, "p1")
        seen = []
        for event in client.watch(MachinePool, resource_version=start, timeout_seconds=5):
            seen.append((event.type, event.object.metadata.name))
            if event.type == "DELETED":
                break
        assert seen == [("ADDED", "p1"), ("MODIFIED", "p1"), ("DELETED", "p1")]


async def test_async_client_crud_and_watch(config: ClientConfig) -> None:
    async with AsyncClient(config) as client:
        await client.create(machine_class("a0"))
        start = (await client.list(MachineClass)).resource_version
        await client.create(machine_class("a1"))
        got = await client.get(MachineClass, "a1")
        assert got.metadata.name == "a1"
        names = [c.metadata.name async for c in client.list_all(MachineClass)]
        assert names == ["a0", "a1"]
        async for event in client.watch(MachineClass, resource_version=start, timeout_seconds=5):
            assert (event.type, event.object.metadata.name) == ("ADDED", "a1")
            break


def test_auth_and_unreachable_errors(config: ClientConfig) -> None:
    with Client(ClientConfig(server=config.server, token="wrong")) as client, pytest.raises(Unauthorized):
        client.list(MachineClass)
    with (
        Client(ClientConfig(server="http://127.0.0.1:1")) as client,
        pytest.raises(ServerUnreachable, match=r"cannot reach the apiserver at http://127\.0\.0\.1:1"),
    ):
        client.list(MachineClass)


class _HangUpOnce:
    """A loopback HTTP server that closes the first request's connection without answering (as a
    restarting apiserver does to a pooled connection), then answers every request with an empty list."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.requests: list[str] = []
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.sock.getsockname()[1]}"

    def _serve(self) -> None:
        body = b'{"apiVersion":"v1","kind":"List","metadata":{},"items":[]}'
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            with conn:
                head = conn.recv(65536).decode(errors="replace")
                self.requests.append(head.split(" ", 2)[0])
                if len(self.requests) == 1:
                    continue  # hang up without a word
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n"
                             b"Content-Length: %d\r\n\r\n%s" % (len(body), body))

    def close(self) -> None:
        self.sock.close()


def test_a_safe_request_is_sent_again_when_the_server_hangs_up_but_a_write_is_not() -> None:
    server = _HangUpOnce()
    try:
        with Client(ClientConfig(server=server.url, token="t")) as c:
            assert c.list(MachineClass).items == []
            assert server.requests == ["GET", "GET"]
        server.requests.clear()
        with Client(ClientConfig(server=server.url, token="t")) as c, pytest.raises(ServerUnreachable):
            c.create(MachineClass.model_validate({"metadata": {"name": "x"}, "capabilities": {"cpu": "1"}}))
        assert server.requests == ["POST"]  # a create is never sent twice: it may have been stored
    finally:
        server.close()


def test_sync_client_goes_to_the_next_server_when_one_refuses(config: ClientConfig) -> None:
    dead = f"http://127.0.0.1:{free_port()}"  # nothing listens there: connections are refused
    both = ClientConfig(server=f"{dead},{config.server}", token=config.token)
    with Client(both) as c:
        c.create(machine_class("failover-1"))  # a write too: nothing was sent to the dead one
        assert c.servers.current == config.server
        assert c.get(MachineClass, "failover-1").metadata.name == "failover-1"
        events = c.watch(MachineClass, resource_version=c.list(MachineClass).resource_version,
                         timeout_seconds=1)
        assert list(events) == []  # a watch on the live server ends with its timeout, no error


def test_one_sync_client_serves_several_threads_at_once(config: ClientConfig) -> None:
    """As the Pulumi provider's worker threads share one client: each request on a connection of
    its own, the connections kept for the next ones."""
    from concurrent.futures import ThreadPoolExecutor

    with Client(config) as c:
        c.create(machine_class("shared"))
        with ThreadPoolExecutor(8) as pool:
            names = list(pool.map(lambda i: c.get(MachineClass, "shared").metadata.name, range(80)))
        assert names == ["shared"] * 80
        idle = c._pools[config.server]._idle
        assert 1 <= len(idle) <= 8
