"""The same IRI calls over unix://, tcp:// and ssh:// (a real sshd on loopback)."""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

import grpc
import pytest
from iri_fakes import FakeServers, Sshd, sample_machine
from ironpool.iri.calls import is_not_found
from ironpool.iri.client import AsyncMachineRuntimeClient, MachineRuntimeClient, VolumeRuntimeClient
from ironpool.iri.endpoint import parse_endpoint
from ironpool.iri.gen.machine.v1alpha1 import api_pb2 as machine_pb2
from ironpool.iri.gen.meta.v1alpha1 import api_pb2 as meta_pb2
from ironpool.iri.gen.volume.v1alpha1 import api_pb2 as volume_pb2
from ironpool.iri.ssh import SSHOptions, SSHTunnel, SSHTunnelError
from ironpool.iri.transport import TunnelChannel, connect, connect_aio


def ssh_options(sshd: Sshd, **overrides: object) -> SSHOptions:
    base: dict[str, object] = dict(
        key_filename=str(sshd.client_key),
        known_hosts=str(sshd.known_hosts),
        allow_agent=False,
        look_for_keys=False,
        connect_timeout=5.0,
    )
    base.update(overrides)
    return SSHOptions(**base)  # type: ignore[arg-type]


def endpoint_for(kind: str, servers: FakeServers, sshd: Sshd | None) -> str:
    if kind == "unix":
        return f"unix://{servers.socket_path}"
    if kind == "tcp":
        return f"tcp://127.0.0.1:{servers.tcp_port}"
    assert sshd is not None
    return sshd.endpoint(servers.socket_path)


@pytest.fixture(params=["unix", "tcp", "ssh"])
def machine_client(request: pytest.FixtureRequest, fake_servers: FakeServers):  # type: ignore[no-untyped-def]
    sshd = request.getfixturevalue("sshd") if request.param == "ssh" else None
    opts = ssh_options(sshd) if sshd else None
    client = MachineRuntimeClient(
        endpoint_for(request.param, fake_servers, sshd), ssh_options=opts, timeout=10
    )
    try:
        yield client
    finally:
        client.close()


def test_machine_lifecycle_over_every_transport(
    machine_client: MachineRuntimeClient, fake_servers: FakeServers
) -> None:
    c = machine_client
    assert c.version().runtime_name == "fake-machine"
    created = c.create_machine(sample_machine("web", {"app": "web", "tier": "front"}))
    assert created.metadata.id
    assert getattr(created.spec, "class") == "x3-small"
    assert created.spec.guest_config.hostname == "web"
    c.create_machine(sample_machine("db", {"app": "db"}))

    assert [m.metadata.id for m in c.list_machines(labels={"tier": "front"})] == [created.metadata.id]
    assert len(c.list_machines()) == 2
    assert c.list_machines("nope") == []
    assert c.get_machine(created.metadata.id) == created

    c.update_machine_power(created.metadata.id, machine_pb2.POWER_OFF)
    c.attach_volume(created.metadata.id, machine_pb2.Volume(name="root", device="oda"))
    got = c.get_machine(created.metadata.id)
    assert got is not None
    assert got.spec.power == machine_pb2.POWER_OFF
    assert [v.name for v in got.spec.volumes] == ["root"]
    c.detach_volume(created.metadata.id, "root")

    [st] = c.status()
    assert st.machine_class.name == "x3-small" and st.quantity == 7
    assert st.machine_class.capabilities.resources["memory"] == 2 << 30
    assert c.exec(created.metadata.id).endswith("-token")
    events = c.list_events(labels={"app": "web"})
    assert [e.spec.reason for e in events] == ["Created"]

    assert c.delete_machine(created.metadata.id) is True
    with pytest.raises(grpc.RpcError) as err:
        c.delete_machine(created.metadata.id)
    assert is_not_found(err.value)
    assert c.delete_machine(created.metadata.id, missing_ok=True) is False  # "already gone", as poollets ask
    with pytest.raises(grpc.RpcError) as err:
        c.create_machine(machine_pb2.Machine(metadata=meta_pb2.ObjectMetadata()))
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "spec.class" in (err.value.details() or "")


@pytest.mark.parametrize("kind", ["unix", "tcp", "ssh"])
def test_volume_client_over_every_transport(
    kind: str, fake_servers: FakeServers, request: pytest.FixtureRequest
) -> None:
    sshd = request.getfixturevalue("sshd") if kind == "ssh" else None
    opts = ssh_options(sshd) if sshd else None
    with VolumeRuntimeClient(endpoint_for(kind, fake_servers, sshd), ssh_options=opts) as c:
        spec = volume_pb2.VolumeSpec(resources=volume_pb2.VolumeResources(storage_bytes=1 << 30))
        setattr(spec, "class", "fast")
        v = c.create_volume(volume_pb2.Volume(metadata=meta_pb2.ObjectMetadata(labels={"a": "b"}), spec=spec))
        c.expand_volume(v.metadata.id, 2 << 30)
        got = c.get_volume(v.metadata.id)
        assert got is not None and got.status.resources.storage_bytes == 2 << 30
        assert c.status()[0].quantity == 10 << 30
        c.delete_volume(v.metadata.id)
        assert c.list_volumes() == []


async def test_aio_channel_over_ssh(fake_servers: FakeServers, sshd: Sshd) -> None:
    from ironpool.iri.gen.machine.v1alpha1 import api_pb2_grpc as machine_grpc

    channel = connect_aio(sshd.endpoint(fake_servers.socket_path), ssh_options=ssh_options(sshd))
    async with channel:
        stub = machine_grpc.MachineRuntimeStub(channel)
        resp = await stub.Version(machine_pb2.VersionRequest(), timeout=10)
        assert resp.runtime_name == "fake-machine"
        tunnel_dir = os.path.dirname(channel.tunnel.local_path)  # type: ignore[attr-defined]
    assert not os.path.exists(tunnel_dir), "closing the channel removes the tunnel socket"


def test_ssh_rejects_unknown_host_key(sshd: Sshd, fake_servers: FakeServers, tmp_path: Path) -> None:
    empty = tmp_path / "known_hosts"
    empty.write_text("")
    with pytest.raises(SSHTunnelError, match=r"not found in known_hosts"):
        connect(
            sshd.endpoint(fake_servers.socket_path), ssh_options=ssh_options(sshd, known_hosts=str(empty))
        )


def test_ssh_accept_new_host_key_records_it(sshd: Sshd, fake_servers: FakeServers, tmp_path: Path) -> None:
    kh = tmp_path / "known_hosts"
    opts = ssh_options(sshd, known_hosts=str(kh), accept_new_host_keys=True)
    with MachineRuntimeClient(sshd.endpoint(fake_servers.socket_path), ssh_options=opts) as c:
        assert c.version().runtime_name == "fake-machine"
    assert sshd.host_public_key.split()[1] in kh.read_text()
    # Now known: the strict policy accepts it.
    with MachineRuntimeClient(
        sshd.endpoint(fake_servers.socket_path), ssh_options=ssh_options(sshd, known_hosts=str(kh))
    ) as c:
        assert c.version().runtime_version == "0.1.0"


def test_ssh_changed_host_key_is_refused(sshd: Sshd, fake_servers: FakeServers, tmp_path: Path) -> None:
    other = tmp_path / "other"
    os.system(f"ssh-keygen -q -t ed25519 -N '' -f {other}")
    fake_pub = " ".join(Path(f"{other}.pub").read_text().split()[:2])
    kh = tmp_path / "known_hosts"
    kh.write_text(f"[127.0.0.1]:{sshd.port} {fake_pub}\n")
    with pytest.raises(SSHTunnelError, match="host key"):
        connect(sshd.endpoint(fake_servers.socket_path), ssh_options=ssh_options(sshd, known_hosts=str(kh)))


def test_ssh_wrong_key_fails_authentication(sshd: Sshd, fake_servers: FakeServers, tmp_path: Path) -> None:
    other = tmp_path / "id_other"
    os.system(f"ssh-keygen -q -t ed25519 -N '' -f {other}")
    with pytest.raises(SSHTunnelError, match=r"(?i)authentication"):
        connect(
            sshd.endpoint(fake_servers.socket_path), ssh_options=ssh_options(sshd, key_filename=str(other))
        )


def test_ssh_missing_remote_socket_is_unavailable(sshd: Sshd) -> None:
    d = tempfile.mkdtemp(prefix="iri-")
    try:
        ch = connect(sshd.endpoint(os.path.join(d, "absent.sock")), ssh_options=ssh_options(sshd))
        assert isinstance(ch, TunnelChannel)
        with ch, MachineRuntimeClient(ch, retries=0, timeout=5) as c, pytest.raises(grpc.RpcError) as err:
            c.version()
        assert err.value.code() == grpc.StatusCode.UNAVAILABLE
    finally:
        shutil.rmtree(d, ignore_errors=True)


def test_tunnel_reconnects_after_the_ssh_session_drops(sshd: Sshd, fake_servers: FakeServers) -> None:
    tunnel = SSHTunnel(parse_endpoint(sshd.endpoint(fake_servers.socket_path)), ssh_options(sshd)).start()
    try:
        for _ in range(2):
            channel = grpc.insecure_channel(tunnel.grpc_target)
            with MachineRuntimeClient(channel, timeout=10) as c:
                assert c.version().runtime_name == "fake-machine"
            channel.close()
            # Kill the SSH session under the tunnel; the next connection must open a new one.
            assert tunnel._client is not None
            tunnel._client.close()
    finally:
        tunnel.close()
    assert not os.path.exists(tunnel.local_path)


def test_unavailable_reads_are_retried_writes_are_not(tmp_path: Path) -> None:
    slept: list[float] = []
    c = MachineRuntimeClient(
        f"unix://{tmp_path}/absent.sock", retries=2, backoff=0.01, timeout=2, sleep=slept.append
    )
    with c:
        with pytest.raises(grpc.RpcError) as err:
            c.version()
        assert err.value.code() == grpc.StatusCode.UNAVAILABLE
        assert slept == [0.01, 0.02]
        slept.clear()
        with pytest.raises(grpc.RpcError):
            c.delete_machine("m1")
        assert slept == []


async def test_async_client_retries_reads_and_answers_missing_like_the_blocking_one(
        fake_servers: FakeServers, tmp_path: Path) -> None:
    absent = AsyncMachineRuntimeClient.connect(f"unix://{tmp_path}/absent.sock", retries=2, backoff=0.01,
                                               timeout=2)
    started = time.monotonic()
    with pytest.raises(grpc.RpcError) as err:
        await absent.version()
    assert err.value.code() == grpc.StatusCode.UNAVAILABLE
    assert time.monotonic() - started >= 0.03  # slept 0.01 + 0.02 between the three attempts
    await absent.close()
    c = AsyncMachineRuntimeClient.connect(f"unix://{fake_servers.socket_path}")
    try:
        assert await c.delete_machine("never-issued", missing_ok=True) is False
        assert await c.detach_volume("never-issued", "root", missing_ok=True) is False
        with pytest.raises(grpc.RpcError) as err:
            await c.delete_machine("never-issued")
        assert is_not_found(err.value)
    finally:
        await c.close()


def test_ssh_defaults_use_home_ssh_keys_and_known_hosts(
    sshd: Sshd, fake_servers: FakeServers, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    shutil.copy(sshd.client_key, home / ".ssh" / "id_ed25519")
    shutil.copy(sshd.known_hosts, home / ".ssh" / "known_hosts")
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.delenv("SSH_AUTH_SOCK", raising=False)
    with MachineRuntimeClient(sshd.endpoint(fake_servers.socket_path)) as c:
        assert c.version().runtime_name == "fake-machine"
