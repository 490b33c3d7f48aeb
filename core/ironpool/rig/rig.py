"""A multi-host ironpool rig on one machine: what ``ironpool rig up`` (and ``make rig``) starts and
the rig tests drive.

3 etcd members on loopback ports, 2 apiservers over them (HTTPS with one CA, one token file),
2 leader-elected schedulers, the controller-manager, and 3 "hosts", each an ``ironpool join`` process
with its own data dir, storage pool and pool name, joined with a token from ``ironpool join-token
create`` and reaching both apiservers over HTTPS (client failover). One libvirtd serves every host.
Every part is a process of its own started through its own command, in a session of its own, so
``ironpool rig up`` can return and ``ironpool rig down`` find them again from ``rig.json``.

It puts a fleet's processes on one machine, over the network paths a fleet uses, to try ironpool as a
fleet and to exercise failures (a killed scheduler, etcd leader or apiserver); it is no way to run
one. etcd comes from the host's package (``scripts/setup-host.sh`` installs Debian's etcd-server).
"""

from __future__ import annotations

import json
import os
import shutil
import ssl
import subprocess
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from ironpool.ports import free_port
from ironpool.rig.etcd import ETCD, EtcdMember, etcd_answers, etcd_status, member_argv
from ironpool.rig.processes import Proc, RigError, ironpool, stop_all, wait_until

STATE = "rig.json"
STORE_PREFIX = "/rig"

__all__ = ["ApiServer", "EtcdMember", "Host", "Proc", "Rig", "RigError", "Scheduler"]


def _get(url: str, context: ssl.SSLContext | None = None, timeout: float = 2.0) -> tuple[int, str]:
    """``GET url``: the status and body; (0, "") when nothing answers."""
    try:
        with urllib.request.urlopen(url, timeout=timeout, context=context) as response:
            return response.status, response.read().decode(errors="replace")
    except urllib.error.HTTPError as exc:
        return exc.code, ""
    except (OSError, ValueError):
        return 0, ""


@dataclass
class ApiServer:
    name: str
    port: int
    proc: Proc

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"


@dataclass
class Scheduler:
    name: str
    metrics_port: int
    proc: Proc

    def metrics(self) -> str:
        """Its Prometheus /metrics ("" while it does not answer)."""
        return _get(f"http://127.0.0.1:{self.metrics_port}/metrics")[1]

    @property
    def leading(self) -> bool:
        return 'leader_election_master_status{name="ironpool-scheduler"} 1.0' in self.metrics()


@dataclass
class Host:
    """A joined host: its pool name (also the MachinePool and VolumePool), data dir and join process."""

    name: str
    data_dir: str
    proc: Proc


@dataclass
class Rig:
    """The parts of a rig under ``root``; :meth:`up` starts them, :meth:`down` removes all it made."""

    root: Path
    images: Path
    host_count: int = 3
    host_cpu: str = "4"
    host_memory: str = "4Gi"
    heartbeat_interval: float = 2.0
    fence_after: float | None = None  # the hosts' --fence-after (None: join's default)
    etcd_data: Path | None = None  # default ROOT/etcd; tests put it in /dev/shm, where fsync is free
    scheduler_args: list[str] = field(default_factory=list)
    controller_manager_args: list[str] = field(default_factory=list)
    etcd: list[EtcdMember] = field(default_factory=list)
    apiservers: list[ApiServer] = field(default_factory=list)
    schedulers: list[Scheduler] = field(default_factory=list)
    controller_manager: Proc | None = None
    hosts: dict[str, Host] = field(default_factory=dict)
    admin_token: str = ""

    # -- paths -------------------------------------------------------------------------------

    @property
    def control(self) -> Path:
        """The control plane's folder, laid out as an ``ironpool up`` data dir (tokens.csv, pki/,
        installation.json), so ``ironpool join-token create --data-dir`` works on it."""
        return self.root / "control"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def ca_file(self) -> Path:
        return self.control / "pki" / "ca.crt"

    @property
    def admin_config(self) -> Path:
        return self.control / "admin.yaml"

    @property
    def kubeconfig(self) -> Path:
        return self.control / "kubeconfig"

    @property
    def servers(self) -> str:
        return ",".join(a.url for a in self.apiservers)

    @property
    def store_url(self) -> str:
        return "etcd://" + ",".join(m.endpoint for m in self.etcd) + STORE_PREFIX

    def _proc(self, name: str, argv: list[str], **env: str) -> Proc:
        return Proc(name, argv, str(self.logs / f"{name}.log"), env=env)

    # -- state ---------------------------------------------------------------------------------

    def save(self) -> None:
        state = asdict(self)
        state["root"], state["images"] = str(self.root), str(self.images)
        state["etcd_data"] = str(self.etcd_data) if self.etcd_data else None
        path = self.root / STATE
        path.write_text(json.dumps(state, indent=2))
        path.chmod(0o600)

    @classmethod
    def load(cls, root: Path) -> Rig:
        try:
            state = json.loads((root / STATE).read_text())
        except FileNotFoundError:
            raise RigError(f"no rig at {root} (no {STATE}); start one with: ironpool rig up") from None

        def proc(d: dict[str, Any]) -> Proc:
            return Proc(**d)

        return cls(
            root=Path(state["root"]), images=Path(state["images"]), host_count=state["host_count"],
            host_cpu=state["host_cpu"], host_memory=state["host_memory"],
            heartbeat_interval=state["heartbeat_interval"], fence_after=state.get("fence_after"),
            controller_manager_args=state.get("controller_manager_args", []),
            etcd_data=Path(state["etcd_data"]) if state.get("etcd_data") else None,
            scheduler_args=state["scheduler_args"],
            etcd=[EtcdMember(m["name"], m["client_port"], m["peer_port"], proc(m["proc"]))
                  for m in state["etcd"]],
            apiservers=[ApiServer(a["name"], a["port"], proc(a["proc"])) for a in state["apiservers"]],
            schedulers=[Scheduler(s["name"], s["metrics_port"], proc(s["proc"]))
                        for s in state["schedulers"]],
            controller_manager=proc(state["controller_manager"]) if state["controller_manager"] else None,
            hosts={n: Host(h["name"], h["data_dir"], proc(h["proc"])) for n, h in state["hosts"].items()},
            admin_token=state["admin_token"],
        )

    # -- clients -------------------------------------------------------------------------------

    def ssl_context(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.ca_file))

    def client(self) -> Any:
        """ironpool's own sync client, given both apiservers (it fails over between them)."""
        from ironpool.client.config import ClientConfig
        from ironpool.client.rest import Client

        return Client(ClientConfig.from_file(self.admin_config))

    # -- start -----------------------------------------------------------------------------------

    def up(self) -> None:
        """Start every part, in order; on a failure, remove what was started and raise."""
        if (self.root / STATE).exists():
            raise RigError(f"a rig is already at {self.root}; stop it first: "
                           f"ironpool rig down --dir {self.root}")
        if not Path(ETCD).exists():
            raise RigError(f"etcd is not installed ({ETCD}): install Debian's etcd-server package "
                           "(scripts/setup-host.sh does)")
        try:
            import aetcd  # noqa: F401 - the apiservers' etcd store and the probes here use it
        except ImportError:
            raise RigError("the rig keeps its state in etcd, which needs ironpool's etcd extra: "
                           "pip install 'ironpool[etcd]'") from None
        # QEMU's user passes through the root to the hosts' disks (0711); the logs, the state file
        # and the control plane's data dir stay private.
        self.root.mkdir(parents=True, exist_ok=True, mode=0o711)
        self.root.chmod(0o711)
        self.logs.mkdir(exist_ok=True, mode=0o700)
        try:
            self._start_etcd()
            self._start_apiservers()
            self._start_schedulers()
            self._start_controller_manager()
            self._ensure_images()
            for i in range(1, self.host_count + 1):
                self.add_host(f"host{i}", wait=False)
            for host in self.hosts.values():
                self._wait_host(host)
        except BaseException:
            self.save()
            self.down()
            raise
        self.save()

    def _start_etcd(self) -> None:
        members = [EtcdMember(f"etcd{i}", free_port(), free_port(), Proc("", [], "")) for i in range(3)]
        for m in members:
            m.proc = self._proc(m.name, member_argv(m, members, self.etcd_data or self.root / "etcd"))
            m.proc.start()
            self.etcd.append(m)
        for m in members:
            wait_until(lambda m=m: etcd_answers(m.endpoint), 30, f"etcd member {m.name}", m.proc)  # type: ignore[misc]

    def _start_apiservers(self) -> None:
        from ironpool.allinone.access import prepare_tls, write_kubeconfig
        from ironpool.allinone.datadir import DataDir, ensure_admin_token
        from ironpool.client.config import ClientConfig

        dirs = DataDir(self.control)
        dirs.root.mkdir(exist_ok=True, mode=0o700)
        self.admin_token = ensure_admin_token(dirs.tokens)
        tls = prepare_tls(dirs.pki, "127.0.0.1")
        for i in range(2):
            port = free_port()
            proc = self._proc(f"apiserver{i}", ironpool(
                "apiserver", "--store", self.store_url, "--listen", f"127.0.0.1:{port}",
                "--token-file", str(dirs.tokens), "--tls-cert-file", tls.cert_file,
                "--tls-private-key-file", tls.key_file, "--client-ca-file", str(self.ca_file),
            ))
            proc.start()
            self.apiservers.append(ApiServer(f"apiserver{i}", port, proc))
        for a in self.apiservers:
            wait_until(lambda a=a: self._ready(a), 30, a.name, a.proc)  # type: ignore[misc]
        dirs.write_installation({"api": self.servers, "role": "rig control plane"})
        admin = ClientConfig(server=self.servers, token=self.admin_token, ca_file=str(self.ca_file))
        admin.save(self.admin_config)
        write_kubeconfig(self.kubeconfig, self.apiservers[0].url, self.admin_token, str(self.ca_file))
        self._seed_classes()

    def _seed_classes(self) -> None:
        """The classes ``ironpool up`` offers (and ``ironpool join`` hosts serve), applied as an admin."""
        from ironpool.allinone.host import default_classes

        for folder in default_classes():
            applied = subprocess.run(ironpool("apply", "-f", str(folder)), capture_output=True, text=True,
                                     env={**os.environ, "IRONPOOL_CONFIG": str(self.admin_config)},
                                     check=False)
            if applied.returncode != 0:
                raise RigError(f"ironpool apply -f {folder}: {applied.stderr.strip()}")

    def _ready(self, a: ApiServer) -> bool:
        return _get(f"{a.url}/readyz", self.ssl_context(), timeout=1)[0] == 200

    def _start_schedulers(self) -> None:
        config = self.control / "scheduler.yaml"
        config.write_text("queue: {initialBackoffSeconds: 0.05, maxBackoffSeconds: 0.5}\n")
        for i in range(2):
            port = free_port()
            proc = self._proc(f"scheduler{i}", ironpool(
                "scheduler", "--config", str(config), "--metrics-listen", f"127.0.0.1:{port}",
                *self.scheduler_args), IRONPOOL_CONFIG=str(self.admin_config))
            proc.start()
            self.schedulers.append(Scheduler(f"scheduler{i}", port, proc))
        for s in self.schedulers:
            wait_until(lambda s=s: bool(s.metrics()), 30, s.name, s.proc)  # type: ignore[misc]

    def _start_controller_manager(self) -> None:
        # It signs the joining hosts' client certificates with the control plane's CA.
        signing = ("--cluster-signing-cert-file", str(self.ca_file),
                   "--cluster-signing-key-file", str(self.ca_file.with_name("ca.key")))
        self.controller_manager = self._proc("controller-manager",
                                             ironpool("controller-manager", *signing,
                                                      *self.controller_manager_args),
                                             IRONPOOL_CONFIG=str(self.admin_config))
        self.controller_manager.start()  # no readiness endpoint to wait on; a failure shows in `status`

    def _ensure_images(self) -> None:
        import asyncio

        from ironpool.allinone.image import ensure_tiny_image

        self.images.mkdir(parents=True, exist_ok=True)
        asyncio.run(ensure_tiny_image(self.images, self.logs / "build-tiny-image.log"))

    # -- hosts -----------------------------------------------------------------------------------

    def add_host(self, name: str, wait: bool = True, servers: str | None = None) -> Host:
        """Issue a join token for pool ``name`` and start ``ironpool join`` with it, as a new host would;
        ``servers`` (comma-separated URLs) replaces the apiservers the join command names, e.g. with
        proxies a chaos run cuts to partition the host."""
        argv = ironpool("join-token", "create", "--pool", name, "--data-dir", str(self.control))
        created = subprocess.run(argv,
                                 capture_output=True, text=True, check=False)
        if created.returncode != 0:
            raise RigError(f"ironpool join-token create --pool {name}: {created.stderr.strip()}")
        command = created.stdout.strip().split()
        assert command[:2] == ["ironpool", "join"], command
        if servers is not None:
            command[2] = servers
        data_dir = self.root / "hosts" / name
        proc = self._proc(name, ironpool(
            *command[1:], "--data-dir", str(data_dir), "--images", str(self.images), "--no-tiny-image",
            "--capacity-cpu", self.host_cpu, "--capacity-memory", self.host_memory,
            "--heartbeat-interval", str(self.heartbeat_interval), "--provider-id", f"ironpool-rig://{name}",
            *(("--fence-after", str(self.fence_after)) if self.fence_after is not None else ()),
        ))
        host = Host(name, str(data_dir), proc)
        self.hosts[name] = host
        proc.start()
        if wait:
            self._wait_host(host)
        return host

    def _wait_host(self, host: Host, timeout: float = 90) -> None:
        def joined() -> bool:
            return f"pool {host.name} joined (" in host.proc.tail(200)

        wait_until(joined, timeout, f"host {host.name}", host.proc)

    def stop_host(self, name: str, kill: bool = False) -> None:
        """Stop a host's join process: cleanly (SIGTERM, as Ctrl-C), or SIGKILL with ``kill``.
        Its domains and volumes stay, as on a host that went down."""
        host = self.hosts[name]
        if kill:
            host.proc.kill()
        else:
            host.proc.stop()

    def start_host(self, name: str) -> None:
        """Start a stopped host again with the same token and data dir; it resumes what it had."""
        host = self.hosts[name]
        if host.proc.alive:
            raise RigError(f"host {name} is running (PID {host.proc.pid})")
        log = Path(host.proc.log)
        with log.open("a") as out:
            out.write("--- started again ---\n")
        before = len(log.read_text(errors="replace"))
        host.proc.start()
        self.save()

        def joined() -> bool:
            return f"pool {name} joined (" in log.read_text(errors="replace")[before:]

        wait_until(joined, 90, f"host {name}", host.proc)

    # -- faults ----------------------------------------------------------------------------------

    def etcd_leader(self) -> EtcdMember:
        """The member that leads the raft now, as the live members report it."""
        statuses = {m.name: etcd_status(m.endpoint) for m in self.etcd if m.proc.alive}
        by_id = {st[0]: m for m in self.etcd if (st := statuses.get(m.name))}
        for _, leader_id in filter(None, statuses.values()):
            if leader_id in by_id:
                return by_id[leader_id]
        raise RigError("no etcd member reports a leader")

    def restart(self, proc: Proc) -> None:
        """Start a killed etcd member, apiserver or scheduler again and wait until it serves."""
        if proc.alive:
            raise RigError(f"{proc.name} is running (PID {proc.pid})")
        proc.start()
        self.save()
        for m in self.etcd:
            if m.proc is proc:
                wait_until(lambda m=m: etcd_answers(m.endpoint), 30, m.name, proc)  # type: ignore[misc]
        for a in self.apiservers:
            if a.proc is proc:
                wait_until(lambda a=a: self._ready(a), 30, a.name, proc)  # type: ignore[misc]
        for s in self.schedulers:
            if s.proc is proc:
                wait_until(lambda s=s: bool(s.metrics()), 30, s.name, proc)  # type: ignore[misc]

    # -- stop ------------------------------------------------------------------------------------

    def down(self, say: Callable[[str], None] = lambda _m: None) -> list[str]:
        """Stop every process and remove every domain, volume, storage pool and folder the rig made.
        Returns the problems (empty: all gone)."""
        problems: list[str] = []
        stop_all([h.proc for h in self.hosts.values()], 20, say)
        purges = {h.name: subprocess.Popen(ironpool("down", "--purge", "--yes", "--data-dir", h.data_dir),
                                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                  for h in self.hosts.values() if Path(h.data_dir).exists()}
        for name, purge in purges.items():
            out, err = purge.communicate()
            if purge.returncode != 0:
                problems.append(f"{name}: ironpool down --purge: {err.strip() or out}")
            else:
                say(f"{name}: purged ({self.hosts[name].data_dir})")
        # The control plane after the hosts (they stop through it), etcd last, each tier at once.
        stop_all([*([self.controller_manager] if self.controller_manager else []),
                   *(s.proc for s in self.schedulers)], 10, say)
        stop_all([a.proc for a in self.apiservers], 10, say)
        for member in self.etcd:  # its data goes next: no graceful leader hand-over to wait for
            member.proc.kill()
            say(f"stopped {member.name}")
        if not problems:
            if self.etcd_data is not None:
                shutil.rmtree(self.etcd_data, ignore_errors=True)
            shutil.rmtree(self.root, ignore_errors=True)
            say(f"removed {self.root}")
        return problems

    # -- status ----------------------------------------------------------------------------------

    def status(self) -> list[tuple[str, str]]:
        def state(proc: Proc) -> str:
            return f"PID {proc.pid}" if proc.alive else "DOWN"

        rows = [("etcd", f"{m.name} {m.endpoint} ({state(m.proc)})") for m in self.etcd]
        rows += [("apiserver", f"{a.name} {a.url} ({state(a.proc)})") for a in self.apiservers]
        rows += [("scheduler", f"{s.name} metrics http://127.0.0.1:{s.metrics_port}/metrics "
                               f"({state(s.proc)}{', leading' if s.proc.alive and s.leading else ''})")
                 for s in self.schedulers]
        rows.append(("controller-manager", state(self.controller_manager) if self.controller_manager
                     else "(not in this ironpool)"))
        rows += [("host", f"{h.name}: MachinePool/VolumePool {h.name}, data dir {h.data_dir} "
                          f"({state(h.proc)})")
                 for h in self.hosts.values()]
        rows += [
            ("store", self.store_url),
            ("CA", str(self.ca_file)),
            ("client config", f"{self.admin_config}  "
                              f"(IRONPOOL_CONFIG={self.admin_config} ironpool get machinepools)"),
            ("kubeconfig", f"{self.kubeconfig}  (KUBECONFIG={self.kubeconfig} kubectl get machines)"),
            ("logs", str(self.logs)),
        ]
        return rows
