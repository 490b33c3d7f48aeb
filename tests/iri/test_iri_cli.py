"""``ironpool iri ...`` against the fake runtimes, over unix:// and ssh://."""

from __future__ import annotations

import json
import sys
import types
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner, Result
from iri_fakes import FakeServers, Sshd
from ironpool.cli.iri_common import parse_size
from ironpool.cli.main import cli
from ironpool.iri.gen.machine.v1alpha1 import api_pb2 as machine_pb2

MACHINE_YAML = """
metadata:
  labels: {app: web, tier: front}
spec:
  class: x3-small
  power: POWER_ON
  ignition_data: e30=
  guest_config: {hostname: web-1}
  volumes:
    - name: root
      device: oda
      local_disk: {size_bytes: 1073741824, image: {image: "ghcr.io/example/os:1"}}
  network_interfaces:
    - {name: eth0, network_id: net-1, ips: [10.0.0.5]}
"""


def run(servers: FakeServers, *args: str, address: str | None = None, stdin: str | None = None) -> Result:
    addr = address or f"unix://{servers.socket_path}"
    return CliRunner().invoke(cli, ["iri", "-a", addr, *args], input=stdin, catch_exceptions=False)


def create(servers: FakeServers, tmp_path: Path, text: str = MACHINE_YAML) -> str:
    f = tmp_path / "machine.yaml"
    f.write_text(text)
    res = run(servers, "create", "machine", "-f", str(f))
    assert res.exit_code == 0, res.output
    return res.output.strip()


def test_create_get_power_delete(fake_servers: FakeServers, tmp_path: Path) -> None:
    mid = create(fake_servers, tmp_path)
    stored = fake_servers.machine.machines[mid]
    assert stored.spec.ignition_data == b"{}"
    assert stored.spec.volumes[0].local_disk.size_bytes == 1 << 30
    assert stored.spec.guest_config.hostname == "web-1"

    table = run(fake_servers, "get", "machines")
    assert table.exit_code == 0
    header, row = table.output.splitlines()
    assert header.split() == ["ID", "CLASS", "POWER", "STATE", "VOLUMES", "NICS", "AGE"]
    assert row.split()[:6] == [mid, "x3-small", "ON", "PENDING", "1", "1"]

    res = run(fake_servers, "get", "machines", mid, "-o", "json")
    doc = json.loads(res.output)
    assert doc["metadata"]["id"] == mid
    assert doc["spec"]["guest_config"]["hostname"] == "web-1"  # snake_case, as irictl
    assert run(fake_servers, "get", "machines", "-l", "tier=back").output.count("\n") == 1

    assert run(fake_servers, "power", mid, "off").exit_code == 0
    assert fake_servers.machine.machines[mid].spec.power == machine_pb2.POWER_OFF
    as_yaml = yaml.safe_load(run(fake_servers, "get", "machines", "-o", "yaml").output)
    assert as_yaml[0]["spec"]["power"] == "POWER_OFF"

    res = run(fake_servers, "delete", "machine", mid, "nope")
    assert res.exit_code == 1
    assert f"machine {mid} deleted" in res.output
    assert "nope: NOT_FOUND" in res.output
    assert fake_servers.machine.machines == {}


def test_yaml_output_can_be_fed_back(fake_servers: FakeServers, tmp_path: Path) -> None:
    mid = create(fake_servers, tmp_path)
    dumped = run(fake_servers, "get", "machines", mid, "-o", "yaml").output
    mid2 = create(fake_servers, tmp_path, dumped)
    a, b = fake_servers.machine.machines[mid], fake_servers.machine.machines[mid2]
    assert a.spec == b.spec


def test_attach_update_detach_volume(fake_servers: FakeServers, tmp_path: Path) -> None:
    mid = create(fake_servers, tmp_path)
    vol = tmp_path / "vol.yaml"
    vol.write_text(
        "name: data\ndevice: odb\nconnection: {driver: local, handle: v1, effective_storage_bytes: 1024}\n"
    )
    assert run(fake_servers, "attach", "volume", mid, "-f", str(vol)).exit_code == 0
    vol.write_text(
        "name: data\ndevice: odb\nconnection: {driver: local, handle: v1, effective_storage_bytes: 4096}\n"
    )
    assert run(fake_servers, "update", "volume", mid, "-f", str(vol)).exit_code == 0
    vols = {v.name: v for v in fake_servers.machine.machines[mid].spec.volumes}
    assert vols["data"].connection.effective_storage_bytes == 4096
    assert run(fake_servers, "detach", "volume", mid, "data").exit_code == 0
    res = run(fake_servers, "detach", "volume", mid, "data")
    assert res.exit_code == 1 and "NOT_FOUND" in res.output


def test_bad_files_name_the_problem(fake_servers: FakeServers, tmp_path: Path) -> None:
    f = tmp_path / "m.yaml"
    f.write_text("spec: {image: {image: old}}\n")  # the pre-Nov-2025 field, as irictl's stale samples
    res = run(fake_servers, "create", "machine", "-f", str(f))
    assert res.exit_code == 2
    assert "image" in res.output and str(f) in res.output
    f.write_text("- a list\n")
    res = run(fake_servers, "create", "machine", "-f", str(f))
    assert res.exit_code == 2 and "machine.v1alpha1.Machine" in res.output
    res = run(fake_servers, "create", "machine", "-f", str(tmp_path / "missing.yaml"))
    assert res.exit_code == 2 and "missing.yaml" in res.output
    # Server-side validation errors come back with their gRPC code.
    res = run(fake_servers, "create", "machine", "-f", "-", stdin="metadata: {labels: {a: b}}\n")
    assert res.exit_code == 1 and "INVALID_ARGUMENT: machine.spec.class" in res.output
    assert fake_servers.machine.machines == {}
    res = run(fake_servers, "get", "machines", "-l", "novalue")
    assert res.exit_code == 2 and "KEY=VALUE" in res.output


def test_status_classes_version_events(fake_servers: FakeServers, tmp_path: Path) -> None:
    create(fake_servers, tmp_path)
    res = run(fake_servers, "get", "status")
    assert res.output.splitlines()[1].split() == ["x3-small", "2", "2Gi", "<none>", "7"]
    assert "x3-small" in run(fake_servers, "get", "classes").output
    vol_status = run(fake_servers, "get", "status", "--runtime", "volume").output
    assert vol_status.splitlines()[1].split() == ["fast", "100", "1000", "10Gi"]
    version = run(fake_servers, "get", "version", "-o", "json").output
    assert json.loads(version) == {"runtime_name": "fake-machine", "runtime_version": "0.1.0"}
    assert "fake-volume" in run(fake_servers, "get", "version", "--runtime", "volume").output
    events = run(fake_servers, "get", "events", "-l", "app=web").output.splitlines()
    assert events[0].split()[:4] == ["LAST", "SEEN", "TYPE", "REASON"]
    assert "Created" in events[1] and "Normal" in events[1]


def test_volumes(fake_servers: FakeServers, tmp_path: Path) -> None:
    f = tmp_path / "v.yaml"
    f.write_text("metadata: {labels: {a: b}}\nspec: {class: fast, resources: {storage_bytes: 1073741824}}\n")
    vid = run(fake_servers, "create", "volume", "-f", str(f)).output.strip()
    assert run(fake_servers, "expand", vid, "--size", "2Gi").exit_code == 0
    row = run(fake_servers, "get", "volumes").output.splitlines()[1].split()
    assert row[:4] == [vid, "fast", "2Gi", "AVAILABLE"]
    assert run(fake_servers, "delete", "volume", vid).exit_code == 0
    assert fake_servers.volume.volumes == {}


def test_console_calls_exec_and_attaches(
    fake_servers: FakeServers, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    mid = create(fake_servers, tmp_path)
    attached: list[str] = []
    fake = types.ModuleType("ironpool.iri.console")
    fake.attach = lambda url: attached.append(url) or 0  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "ironpool.iri.console", fake)
    assert run(fake_servers, "console", mid).exit_code == 0
    assert attached == [f"http://127.0.0.1:1/exec/{mid}-token"]
    assert run(fake_servers, "console", mid, "--url-only").output.strip() == attached[0]
    res = run(fake_servers, "console", "nope")
    assert res.exit_code == 1 and "NOT_FOUND" in res.output


def test_cli_over_ssh(fake_servers: FakeServers, sshd: Sshd, tmp_path: Path) -> None:
    kh = tmp_path / "known_hosts"
    args = ["--ssh-key", str(sshd.client_key), "--known-hosts", str(kh)]
    addr = sshd.endpoint(fake_servers.socket_path)
    res = CliRunner().invoke(cli, ["iri", "-a", addr, *args, "get", "version"])
    assert res.exit_code == 1 and "not found in known_hosts" in res.output
    res = CliRunner().invoke(cli, ["iri", "-a", addr, *args, "--accept-new-host-key", "get", "version"])
    assert res.exit_code == 0, res.output
    assert "fake-machine" in res.output
    res = CliRunner().invoke(cli, ["iri", "-a", addr, *args, "get", "machines"])
    assert res.exit_code == 0 and res.output.startswith("ID")


def test_discovery_via_env_and_clear_error(
    fake_servers: FakeServers, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("IRI_VOLUME_RUNTIME_ENDPOINT", f"unix://{fake_servers.socket_path}")
    res = CliRunner().invoke(cli, ["iri", "get", "version", "--runtime", "volume"])
    assert res.exit_code == 0 and "fake-volume" in res.output
    monkeypatch.setenv("IRI_MACHINE_RUNTIME_ENDPOINT", "bogus://x")
    res = CliRunner().invoke(cli, ["iri", "get", "machines"])
    assert res.exit_code == 1 and "IRI_MACHINE_RUNTIME_ENDPOINT" in res.output


def test_parse_size() -> None:
    assert parse_size("10Gi") == 10 << 30
    assert parse_size("512Mi") == 512 << 20
    assert parse_size("1G") == 10**9
    assert parse_size("4096") == 4096
    with pytest.raises(Exception, match="expected a size"):
        parse_size("ten")


def test_console_over_ssh_forwards_the_exec_url(
    fake_servers: FakeServers, sshd: Sshd, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The Exec URL names the runtime host's loopback; over ssh:// the CLI reaches it through
    the same SSH session (direct-tcpip), so the console works without exposing its port."""
    import socketserver
    import threading
    from urllib.parse import urlsplit

    class Echo(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            data = self.request.recv(1024)
            self.request.sendall(b"guest:" + data)

    echo = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Echo)
    threading.Thread(target=echo.serve_forever, daemon=True).start()
    try:
        fake_servers.machine.exec_base = f"ws://127.0.0.1:{echo.server_address[1]}"
        mid = create(fake_servers, tmp_path)
        seen: list[tuple[str, bytes]] = []

        def attach(url: str) -> int:
            parts = urlsplit(url)
            import socket

            with socket.create_connection((parts.hostname, parts.port), timeout=10) as s:
                s.sendall(b"hello")
                seen.append((url, s.recv(1024)))
            return 0

        fake = types.ModuleType("ironpool.iri.console")
        fake.attach = attach  # type: ignore[attr-defined]
        monkeypatch.setitem(sys.modules, "ironpool.iri.console", fake)
        addr = sshd.endpoint(fake_servers.socket_path)
        args = ["iri", "-a", addr, "--ssh-key", str(sshd.client_key), "--known-hosts", str(sshd.known_hosts)]
        res = CliRunner().invoke(cli, [*args, "console", mid])
        assert res.exit_code == 0, res.output
        [(url, reply)] = seen
        assert reply == b"guest:hello"
        assert urlsplit(url).port != echo.server_address[1], "URL must point at the local forward"
        assert url.endswith(f"/exec/{mid}-token") and url.startswith("ws://127.0.0.1:")
    finally:
        echo.shutdown()
        echo.server_close()
