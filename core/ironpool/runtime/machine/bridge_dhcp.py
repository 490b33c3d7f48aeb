"""DHCP for NICs on an existing host bridge: a dnsmasq per bridge that answers reserved MACs only.

libvirt serves DHCP on the networks it makes, not on a bridge someone else made, so in ``bridge``
mode the runtime runs its own dnsmasq on that bridge (DHCP only, no DNS), the way libvirt runs one
per network: a hosts file of ``mac,ip`` reservations that dnsmasq re-reads on SIGHUP, started with
the first reservation and stopped with the last. dnsmasq serves a subnet from the host's address in
it, so the bridge must carry an IPv4 address in the NIC's subnet; the gateway handed out is the
subnet's first host address. Only reserved MACs get an answer, so a DHCP server already on that
segment keeps serving everything else (it should ignore the guests' MACs for the addresses to be
exact).
"""

from __future__ import annotations

import contextlib
import ipaddress
import json
import logging
import os
import shutil
import signal
import subprocess
import threading
from pathlib import Path

from ironpool.runtime.errors import FailedPrecondition, Internal

from .model import NicRecord
from .nics import ADDRESSES_ATTRIBUTE

log = logging.getLogger(__name__)


def bridge_addresses(bridge: str) -> list[ipaddress.IPv4Interface]:
    """The IPv4 addresses on a host interface (``ip -j addr``)."""
    proc = subprocess.run(["ip", "-j", "-4", "addr", "show", "dev", bridge], capture_output=True, text=True,
                          timeout=10, check=False)
    if proc.returncode != 0:
        return []
    out = []
    for link in json.loads(proc.stdout or "[]"):
        for a in link.get("addr_info", []):
            if a.get("family") == "inet":
                out.append(ipaddress.IPv4Interface(f"{a['local']}/{a['prefixlen']}"))
    return out


class BridgeDhcp:
    """The dnsmasq instances of this runtime, one per bridge, under ``state_dir/dhcp/<bridge>``."""

    def __init__(self, state_dir: Path, dnsmasq: str = "dnsmasq") -> None:
        self.root = state_dir / "dhcp"
        self.dnsmasq = dnsmasq
        self._lock = threading.Lock()

    def reserve(self, nic: NicRecord, field: str) -> None:
        """Serve ``nic``'s address to its MAC on its bridge (starting dnsmasq when needed)."""
        iface = ipaddress.IPv4Interface(nic.address)
        with self._lock:
            served = self._served_subnet(nic.network)
            if served is not None and served != iface.network:
                raise FailedPrecondition(
                    f"{field}.attributes.{ADDRESSES_ATTRIBUTE}: bridge {nic.network} serves {served} on "
                    f"this host; {nic.address} is not in it")
            if not any(a in iface.network for a in (b.ip for b in bridge_addresses(nic.network))):
                raise FailedPrecondition(
                    f"{field}.attributes.{ADDRESSES_ATTRIBUTE}: bridge {nic.network} has no IPv4 address "
                    f"in {iface.network}; in bridge mode the host serves its guests' DHCP from one")
            hosts = {mac: ip for mac, ip in self._hosts(nic.network).items()
                     if mac != nic.mac and ip != str(iface.ip)}
            hosts[nic.mac] = str(iface.ip)
            self._write(nic.network, iface.network, hosts)
            self._run(nic.network, iface.network)

    def release(self, nic: NicRecord) -> None:
        """Stop serving ``nic``'s reservation; the bridge's dnsmasq goes with the last one."""
        with self._lock:
            hosts = self._hosts(nic.network)
            if hosts.pop(nic.mac, None) is None:
                return
            subnet = self._served_subnet(nic.network)
            if hosts and subnet is not None:
                self._write(nic.network, subnet, hosts)
                self._signal(nic.network, signal.SIGHUP)
                return
            self._signal(nic.network, signal.SIGTERM)
            shutil.rmtree(self.root / nic.network, ignore_errors=True)
            log.info("bridge %s: no reservations left, its DHCP server stopped", nic.network)

    def bridges(self) -> list[str]:
        """The bridges this runtime serves DHCP on (a folder each)."""
        return sorted(p.name for p in self.root.iterdir() if p.is_dir()) if self.root.is_dir() else []

    def stop(self, bridge: str) -> bool:
        """Stop the bridge's dnsmasq and forget its reservations; whether one was running."""
        with self._lock:
            running = self._pid(bridge) is not None
            self._signal(bridge, signal.SIGTERM)
            shutil.rmtree(self._dir(bridge), ignore_errors=True)
            return running

    def restore(self, nic: NicRecord) -> None:
        """After a host or runtime restart: run the bridge's dnsmasq again if it is gone."""
        with self._lock:
            subnet = self._served_subnet(nic.network)
            if subnet is not None and nic.mac in self._hosts(nic.network):
                self._run(nic.network, subnet)

    # -- files and the process -------------------------------------------------------------------
    def _dir(self, bridge: str) -> Path:
        return self.root / bridge

    def _hosts(self, bridge: str) -> dict[str, str]:
        path = self._dir(bridge) / "hosts"
        if not path.exists():
            return {}
        return dict(line.split(",", 1) for line in path.read_text().split() if "," in line)

    def _served_subnet(self, bridge: str) -> ipaddress.IPv4Network | None:
        path = self._dir(bridge) / "subnet"
        return ipaddress.IPv4Network(path.read_text().strip()) if path.exists() else None

    def _write(self, bridge: str, subnet: ipaddress.IPv4Network, hosts: dict[str, str]) -> None:
        d = self._dir(bridge)
        d.mkdir(parents=True, exist_ok=True)
        (d / "subnet").write_text(f"{subnet}\n")
        tmp = d / "hosts.tmp"
        tmp.write_text("".join(f"{mac},{ip}\n" for mac, ip in sorted(hosts.items())))
        os.replace(tmp, d / "hosts")

    def _pid(self, bridge: str) -> int | None:
        """The pid of the bridge's dnsmasq if it runs (the pid file is checked against /proc)."""
        try:
            pid = int((self._dir(bridge) / "pid").read_text().strip())
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except (OSError, ValueError):
            return None
        return pid if str(self._dir(bridge) / "hosts").encode() in cmdline else None

    def _signal(self, bridge: str, sig: signal.Signals) -> None:
        pid = self._pid(bridge)
        if pid is not None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)

    def _run(self, bridge: str, subnet: ipaddress.IPv4Network) -> None:
        if self._pid(bridge) is not None:
            self._signal(bridge, signal.SIGHUP)  # re-read the hosts file
            return
        exe = shutil.which(self.dnsmasq)
        if exe is None:
            raise FailedPrecondition(f"bridge mode needs {self.dnsmasq} on the host (Debian: dnsmasq-base)")
        d = self._dir(bridge)
        argv = [
            exe, "--conf-file=/dev/null", "--port=0", f"--interface={bridge}", "--bind-dynamic",
            "--except-interface=lo", f"--dhcp-range={subnet.network_address},static,{subnet.netmask}",
            f"--dhcp-hostsfile={d / 'hosts'}", f"--dhcp-option=option:router,{subnet.network_address + 1}",
            "--leasefile-ro", f"--pid-file={d / 'pid'}", "--user=root",
        ]
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
        if proc.returncode != 0:
            raise Internal(f"bridge {bridge}: starting dnsmasq failed: {proc.stderr.strip()[-500:]}")
        log.info("bridge %s: DHCP server for %s started", bridge, subnet)
