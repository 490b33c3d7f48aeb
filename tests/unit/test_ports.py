"""ironpool.ports: ports for servers other processes open, picked where outgoing connections never go."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from ironpool import ports


def _ephemeral_range() -> tuple[int, int]:
    low, high = Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()
    return int(low), int(high)


def test_ports_come_from_below_the_ephemeral_range_are_bindable_and_never_repeat() -> None:
    low, _ = _ephemeral_range()
    picked = [ports.free_port() for _ in range(300)]
    assert len(set(picked)) == len(picked)
    assert all(15000 <= p < low for p in picked)
    with socket.socket() as s:
        s.bind(("127.0.0.1", picked[-1]))  # free when handed out


def test_a_port_someone_listens_on_is_never_handed_out(monkeypatch: pytest.MonkeyPatch) -> None:
    real_randrange = ports.random.randrange
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        taken = busy.getsockname()[1]
        draws: list[int] = []

        def busy_first(start: int, stop: int) -> int:
            draws.append(taken if not draws else real_randrange(start, stop))
            return draws[-1]

        monkeypatch.setattr(ports, "_ephemeral_low", lambda: 65536)  # so that the busy port is a candidate
        monkeypatch.setattr(ports.random, "randrange", busy_first)
        port = ports.free_port()
    assert draws[0] == taken
    assert port != taken and port == draws[-1]


def test_a_narrow_range_below_the_ephemeral_ports_leaves_the_pick_to_the_kernel(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ports, "_ephemeral_low", lambda: 16000)
    port = ports.free_port()
    low, high = _ephemeral_range()
    assert low <= port <= high
