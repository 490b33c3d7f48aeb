"""A multi-host ironpool rig on one machine: what ``scripts/rig.sh`` runs and the rig tests drive.

3 etcd members on loopback ports, 2 apiservers over them (HTTPS with one CA, one token file),
2 leader-elected schedulers, the controller-manager when this ironpool has one, and 3 "hosts", each
an ``ironpool join`` process with its own data dir, storage pool and pool name, joined with a token
from ``ironpool join-token create`` and reaching both apiservers over HTTPS (client failover). One
libvirtd serves every host. Everything is a process of its own, started in a session of its own, so
``rig.sh up`` can return and ``rig.sh down`` find them again from ``rig.json``.

It lives with the tests, not in the product: it runs etcd from the test host's package, puts every
part on one machine, and exists to exercise the network paths of a fleet, not to run one.

    python -m tests.rig.rig up|down|status [--dir DIR] [--hosts N] [--images DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx

REPO = Path(__file__).resolve().parents[2]
ETCD = shutil.which("etcd") or "/usr/bin/etcd"
STATE = "rig.json"
STORE_PREFIX = "/rig"


class RigError(Exception):
    """A part of the rig did not start or stop; the message names it and its log."""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_until(probe: Callable[[], bool], timeout: float, what: str, proc: Proc | None = None) -> None:
    """Poll ``probe`` until true; a process of the part that exits first, or the deadline, is an error."""
    deadline = time.monotonic() + timeout
    while not probe():
        if proc is not None and not proc.alive:
            raise RigError(f"{what}: exited; last lines of {proc.log}:\n{proc.tail()}")
        if time.monotonic() > deadline:
            raise RigError(f"{what}: not ready within {timeout:.0f}s" + (f"; see {proc.log}" if proc else ""))
        time.sleep(0.1)


@dataclass
class Proc:
    """One process of the rig: how it was started and its PID."""

    name: str
    argv: list[str]
    log: str
    pid: int = 0
    env: dict[str, str] = field(default_factory=dict)

    def start(self) -> None:
        with open(self.log, "ab") as out:
            child = subprocess.Popen(self.argv, stdout=out, stderr=subprocess.STDOUT, start_new_session=True,
                                     env={**os.environ, "PYTHONUNBUFFERED": "1", **self.env})
        self.pid = child.pid
        _CHILDREN[child.pid] = child

    @property
    def alive(self) -> bool:
        if not self.pid:
            return False
        child = _CHILDREN.get(self.pid)
        if child is not None:
            return child.poll() is None
        # Started by an earlier `rig.sh up`: the PID is ours only while it runs the same command line
        # (a PID reused by another program is never signalled).
        try:
            state = Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
            cmdline = Path(f"/proc/{self.pid}/cmdline").read_bytes().decode(errors="replace")
        except (OSError, IndexError):
            return False
        return state != "Z" and cmdline.split("\0")[:-1] == self.argv

    @property
    def returncode(self) -> int | None:
        """The exit status of a process this one started and saw end; None otherwise."""
        child = _CHILDREN.get(self.pid)
        return child.poll() if child is not None else None

    def signal(self, sig: int) -> None:
        if self.alive:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)

    def wait_gone(self, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while self.alive:
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)
        return True

    def stop(self, timeout: float = 20.0) -> None:
        """SIGTERM (a clean stop), SIGKILL after ``timeout``."""
        self.signal(signal.SIGTERM)
        if not self.wait_gone(timeout):
            self.kill()

    def kill(self) -> None:
        """SIGKILL, as a crash."""
        self.signal(signal.SIGKILL)
        self.wait_gone(10)

    def tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(Path(self.log).read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"


_CHILDREN: dict[int, subprocess.Popen[bytes]] = {}  # started by this process: reaped through Popen


def ironpool(*args: str) -> list[str]:
    return [sys.executable, "-m", "ironpool.cli.main", *args]


@dataclass
class EtcdMember:
    name: str
    client_port: int
    peer_port: int
    proc: Proc

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.client_port}"


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
        try:
            return httpx.get(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=2).text
        except httpx.HTTPError:
            return ""

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
            raise RigError(f"no rig at {root} (no {STATE}); start one with: scripts/rig.sh up") from None

        def proc(d: dict[str, Any]) -> Proc:
            return Proc(**d)

        return cls(
            root=Path(state["root"]), images=Path(state["images"]), host_count=state["host_count"],
            host_cpu=state["host_cpu"], host_memory=state["host_memory"],
            heartbeat_interval=state["heartbeat_interval"],
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

    def http(self, server: int = 0, **kwargs: Any) -> httpx.Client:
        """An httpx client to one apiserver with the admin token, trusting the rig's CA."""
        return httpx.Client(base_url=self.apiservers[server].url, verify=self.ssl_context(),
                            headers={"Authorization": f"Bearer {self.admin_token}"}, **kwargs)

    def client(self) -> Any:
        """ironpool's own sync client, given both apiservers (it fails over between them)."""
        from ironpool.client.config import ClientConfig
        from ironpool.client.rest import Client

        return Client(ClientConfig.from_file(self.admin_config))

    # -- start -----------------------------------------------------------------------------------

    def up(self) -> None:
        """Start every part, in order; on a failure, remove what was started and raise."""
        if (self.root / STATE).exists():
            raise RigError(f"a rig is already at {self.root}; stop it first: scripts/rig.sh down")
        if not Path(ETCD).exists():
            raise RigError("etcd is not installed (scripts/setup-host.sh installs the etcd-server package)")
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
        cluster = ",".join(f"{m.name}=http://127.0.0.1:{m.peer_port}" for m in members)
        for m in members:
            m.proc = self._proc(m.name, [
                ETCD, "--name", m.name, "--data-dir", str((self.etcd_data or self.root / "etcd") / m.name),
                "--listen-client-urls", f"http://{m.endpoint}", "--advertise-client-urls", f"http://{m.endpoint}",
                "--listen-peer-urls", f"http://127.0.0.1:{m.peer_port}",
                "--initial-advertise-peer-urls", f"http://127.0.0.1:{m.peer_port}",
                "--initial-cluster", cluster, "--initial-cluster-state", "new",
                "--initial-cluster-token", f"ironpool-rig-{os.getpid()}",
                # Elections within a second: a killed member's loss is felt briefly.
                "--heartbeat-interval", "50", "--election-timeout", "500",
                "--logger", "zap", "--log-level", "warn",
            ])  # fmt: skip
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
        try:
            return httpx.get(f"{a.url}/readyz", verify=self.ssl_context(), timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

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
        """``ironpool controller-manager``, when this ironpool has one."""
        probe = subprocess.run(ironpool("controller-manager", "--help"), capture_output=True, check=False)
        if probe.returncode != 0:
            return
        self.controller_manager = self._proc("controller-manager",
                                             ironpool("controller-manager", *self.controller_manager_args),
                                             IRONPOOL_CONFIG=str(self.admin_config))
        self.controller_manager.start()  # no readiness endpoint to wait on; a failure shows in `status`

    def _ensure_images(self) -> None:
        import asyncio

        from ironpool.allinone.image import ensure_tiny_image

        self.images.mkdir(parents=True, exist_ok=True)
        asyncio.run(ensure_tiny_image(self.images, self.logs / "build-tiny-image.log"))

    # -- hosts -----------------------------------------------------------------------------------

    def add_host(self, name: str, wait: bool = True) -> Host:
        """Issue a join token for pool ``name`` and start ``ironpool join`` with it, as a new host would."""
        argv = ironpool("join-token", "create", "--pool", name, "--data-dir", str(self.control))
        created = subprocess.run(argv,
                                 capture_output=True, text=True, check=False)
        if created.returncode != 0:
            raise RigError(f"ironpool join-token create --pool {name}: {created.stderr.strip()}")
        command = created.stdout.strip().split()
        assert command[:2] == ["ironpool", "join"], command
        data_dir = self.root / "hosts" / name
        proc = self._proc(name, ironpool(
            *command[1:], "--data-dir", str(data_dir), "--images", str(self.images), "--no-tiny-image",
            "--capacity-cpu", self.host_cpu, "--capacity-memory", self.host_memory,
            "--heartbeat-interval", str(self.heartbeat_interval), "--provider-id", f"ironpool-rig://{name}",
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
        _stop_all([h.proc for h in self.hosts.values()], 20, say)
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
        _stop_all([*([self.controller_manager] if self.controller_manager else []),
                   *(s.proc for s in self.schedulers)], 10, say)
        _stop_all([a.proc for a in self.apiservers], 10, say)
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


def _stop_all(procs: list[Proc], timeout: float, say: Callable[[str], None]) -> None:
    """SIGTERM every process at once, then wait for each (SIGKILL past ``timeout``)."""
    for proc in procs:
        proc.signal(signal.SIGTERM)
    for proc in procs:
        proc.stop(timeout)
        say(f"stopped {proc.name}")


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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="scripts/rig.sh", description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=["up", "down", "status"])
    default_dir = Path(os.environ.get("IRONPOOL_RIG_DIR", "/var/tmp/ironpool-rig"))
    parser.add_argument("--dir", type=Path, default=default_dir,
                        help="where the rig keeps its state, data and logs [default: $IRONPOOL_RIG_DIR or "
                             "/var/tmp/ironpool-rig]")
    parser.add_argument("--hosts", type=int, default=3, help="joined hosts [default: 3]")
    parser.add_argument("--images", type=Path, default=None,
                        help="image catalog the hosts share [default: DIR/images, with the tiny image "
                             "built there]")
    args = parser.parse_args(argv)
    root = args.dir.absolute()
    try:
        if args.command == "up":
            rig = Rig(root, (args.images or root / "images").absolute(), host_count=args.hosts)
            print(f"starting the rig in {root} ...", flush=True)
            rig.up()
            _print_rows("rig is up:", rig.status())
            print(f"Try: IRONPOOL_CONFIG={rig.admin_config} ironpool get machinepools -o wide\n"
                  f"Stop and remove everything: scripts/rig.sh down --dir {root}")
        elif args.command == "status":
            _print_rows(f"rig at {root}:", Rig.load(root).status())
        else:
            problems = Rig.load(root).down(print)
            if problems:
                print("left behind:\n  " + "\n  ".join(problems), file=sys.stderr)
                return 1
    except RigError as exc:
        print(f"rig: {exc}", file=sys.stderr)
        return 1
    return 0


def _print_rows(title: str, rows: list[tuple[str, str]]) -> None:
    print(title)
    width = max(len(k) for k, _ in rows) + 1
    for key, value in rows:
        print(f"  {key + ':':<{width}} {value}")


if __name__ == "__main__":
    raise SystemExit(main())
