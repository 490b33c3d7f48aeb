"""The rig's etcd cluster: members of the ``etcd`` the host installed (Debian's etcd-server package)
on loopback ports, and probes of their health and leadership through etcd's gRPC API."""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from ironpool.rig.processes import Proc

ETCD = shutil.which("etcd") or "/usr/bin/etcd"


@dataclass
class EtcdMember:
    """One member: its client and peer ports on loopback, and its process."""

    name: str
    client_port: int
    peer_port: int
    proc: Proc

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.client_port}"


def member_argv(member: EtcdMember, members: list[EtcdMember], data_dir: Path) -> list[str]:
    """The command line of ``member`` in a new cluster of ``members``, its data in ``data_dir``."""
    cluster = ",".join(f"{m.name}=http://127.0.0.1:{m.peer_port}" for m in members)
    m = member
    return [
        ETCD, "--name", m.name, "--data-dir", str(data_dir / m.name),
        "--listen-client-urls", f"http://{m.endpoint}", "--advertise-client-urls", f"http://{m.endpoint}",
        "--listen-peer-urls", f"http://127.0.0.1:{m.peer_port}",
        "--initial-advertise-peer-urls", f"http://127.0.0.1:{m.peer_port}",
        "--initial-cluster", cluster, "--initial-cluster-state", "new",
        "--initial-cluster-token", f"ironpool-rig-{os.getpid()}",
        # Elections within a second: a killed member's loss is felt briefly.
        "--heartbeat-interval", "50", "--election-timeout", "500",
        "--logger", "zap", "--log-level", "warn",
    ]  # fmt: skip


def etcd_answers(endpoint: str) -> bool:
    """Whether the member at ``endpoint`` serves a linearizable read (the cluster has a leader)."""
    import grpc
    from aetcd import rpc

    channel = grpc.insecure_channel(endpoint)
    try:
        rpc.KVStub(channel).Range(rpc.RangeRequest(key=b"/", limit=1), timeout=1.0)
        return True
    except grpc.RpcError:
        return False
    finally:
        channel.close()


def etcd_status(endpoint: str) -> tuple[int, int] | None:
    """``(member id, leader id)`` as the member at ``endpoint`` reports them; None if it does not answer."""
    import grpc
    from aetcd import rpc

    channel = grpc.insecure_channel(endpoint)
    try:
        status = rpc.MaintenanceStub(channel).Status(rpc.StatusRequest(), timeout=2.0)
        return int(status.header.member_id), int(status.leader)
    except grpc.RpcError:
        return None
    finally:
        channel.close()
