"""Endpoint parsing and IronCore's discovery order: flag, env var, well-known sockets."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import pytest
from ironpool.iri.endpoint import Endpoint, EndpointError, parse_endpoint, resolve_endpoint


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("unix:///var/run/iri.sock", Endpoint("unix", path="/var/run/iri.sock")),
        ("unix:/var/run/iri.sock", Endpoint("unix", path="/var/run/iri.sock")),
        ("/var/run/iri.sock", Endpoint("unix", path="/var/run/iri.sock")),
        ("tcp://127.0.0.1:9000", Endpoint("tcp", host="127.0.0.1", port=9000)),
        ("tcp://[::1]:9000", Endpoint("tcp", host="::1", port=9000)),
        (
            "ssh://ops@host-a:2222/var/run/iri-machineprovider.sock",
            Endpoint("ssh", path="/var/run/iri-machineprovider.sock", host="host-a", port=2222, user="ops"),
        ),
        ("ssh://host-b/run/x.sock", Endpoint("ssh", path="/run/x.sock", host="host-b", port=22)),
    ],
)
def test_parse(text: str, expected: Endpoint) -> None:
    assert parse_endpoint(text) == expected
    assert parse_endpoint(str(expected)) == expected


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty"),
        ("http://x:1", "scheme"),
        ("unix://relative/path", "unix:///absolute"),
        ("unix:relative", "absolute"),
        ("tcp://host", "missing port"),
        ("tcp://:80", "missing host"),
        ("tcp://host:99999", "invalid port"),
        ("tcp://host:80/path", "no path"),
        ("ssh://user@host", "absolute/path/to/socket"),
        ("ssh:///sock", "missing host"),
    ],
)
def test_parse_errors_name_the_problem(text: str, message: str) -> None:
    with pytest.raises(EndpointError, match=message):
        parse_endpoint(text)


@pytest.fixture
def sockets(tmp_path: Path) -> Iterator[dict[str, str]]:
    made: list[socket.socket] = []

    def listen(name: str) -> str:
        s = socket.socket(socket.AF_UNIX)
        s.bind(str(tmp_path / name))
        made.append(s)
        return str(tmp_path / name)

    yield {
        "broker": str(tmp_path / "broker.sock"),
        "provider": str(tmp_path / "provider.sock"),
        "listen": listen,
    }  # type: ignore[dict-item]
    for s in made:
        s.close()


def test_flag_beats_env_beats_sockets(sockets: dict) -> None:  # type: ignore[type-arg]
    sockets["listen"]("provider.sock")
    cands = [sockets["broker"], sockets["provider"]]
    env = {"IRI_MACHINE_RUNTIME_ENDPOINT": "tcp://10.0.0.1:1"}
    assert resolve_endpoint("machine", "unix:///flag.sock", env=env, candidates=cands) == "unix:///flag.sock"
    assert resolve_endpoint("machine", None, env=env, candidates=cands) == "tcp://10.0.0.1:1"
    # The volume runtime reads its own variable, not the machine one.
    assert resolve_endpoint("volume", None, env=env, candidates=cands) == f"unix://{sockets['provider']}"
    assert resolve_endpoint("machine", None, env={}, candidates=cands) == f"unix://{sockets['provider']}"
    sockets["listen"]("broker.sock")
    assert resolve_endpoint("machine", None, env={}, candidates=cands) == f"unix://{sockets['broker']}"


def test_regular_file_is_not_a_socket(tmp_path: Path) -> None:
    f = tmp_path / "provider.sock"
    f.write_text("")
    with pytest.raises(EndpointError, match="IRI_MACHINE_RUNTIME_ENDPOINT"):
        resolve_endpoint("machine", env={}, candidates=[str(f)])


def test_discovery_polls_until_the_socket_appears(sockets: dict) -> None:  # type: ignore[type-arg]
    now = [0.0]
    slept: list[float] = []

    def fake_sleep(seconds: float) -> None:
        slept.append(seconds)
        now[0] += seconds
        if len(slept) == 2:
            sockets["listen"]("provider.sock")

    got = resolve_endpoint(
        "volume", env={}, candidates=[sockets["provider"]], timeout=5, clock=lambda: now[0], sleep=fake_sleep
    )
    assert got == f"unix://{sockets['provider']}"
    assert slept == [1.0, 1.0]


def test_discovery_gives_up_at_the_deadline(tmp_path: Path) -> None:
    now = [0.0]

    def fake_sleep(seconds: float) -> None:
        now[0] += seconds

    with pytest.raises(EndpointError, match="no volume runtime endpoint"):
        resolve_endpoint(
            "volume",
            env={},
            candidates=[str(tmp_path / "x.sock")],
            timeout=2.5,
            clock=lambda: now[0],
            sleep=fake_sleep,
        )
    assert now[0] == 2.5


def test_bad_env_value_names_the_variable() -> None:
    with pytest.raises(EndpointError, match="IRI_VOLUME_RUNTIME_ENDPOINT"):
        resolve_endpoint("volume", env={"IRI_VOLUME_RUNTIME_ENDPOINT": "bogus://"})
    with pytest.raises(EndpointError, match="kind"):
        resolve_endpoint("bucket", env={})  # type: ignore[arg-type]
