"""A free TCP port for a server that another process will open (etcd, a registry, QEMU's forward).

The usual trick, bind to port 0 and close, hands back a port from the kernel's ephemeral range. The
kernel gives the same range to every outgoing connection as its source port, so on a busy host
(a test suite opening thousands of client connections) the port can be taken again before the
server binds it: etcd then dies with "address already in use". Ports below that range are never
handed out by the kernel, so a port picked there and found free stays free unless another process
picks the same one on purpose; picking at random among thousands makes that rare, and a process
never hands out the same port twice.
"""

from __future__ import annotations

import random
import socket
import threading
from pathlib import Path

# Below this, well-known and registered services (5432, 6379, 8080, 9090, ...) are too common.
_LOWEST = 15000
# A range narrower than this is not worth avoiding collisions in: use the kernel's pick instead.
_NARROWEST = 2000

_lock = threading.Lock()
_given: set[int] = set()


def _ephemeral_low() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768  # Linux's default where /proc cannot be read


def _socket(host: str) -> socket.socket:
    return socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)


def port_free(host: str, port: int) -> bool:
    """Whether a server could bind ``port`` on ``host`` now."""
    with _socket(host) as s:
        try:
            s.bind((host, port))
        except OSError:
            return False
    return True


def _kernel_pick(host: str) -> int:
    with _socket(host) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def free_port(host: str = "127.0.0.1") -> int:
    """A TCP port on ``host`` that nothing is bound to now, from below the ephemeral range."""
    high = _ephemeral_low()
    if high - _LOWEST < _NARROWEST:
        return _kernel_pick(host)
    with _lock:
        for _ in range(200):
            port = random.randrange(_LOWEST, high)
            if port not in _given and port_free(host, port):
                _given.add(port)
                return port
    return _kernel_pick(host)
