"""``ironpool up``: the whole system for one host in one asyncio process.

Start order: data directory and lock, admin token, classes, tiny image, local CA and serving
certificate, apiserver (SQLite, HTTPS), class seeding, client configuration and kubeconfig, machine
and volume runtimes (unix sockets), scheduler, controller-manager (pool lifecycle), machinepoollet
and volumepoollet.
Stop order is the reverse. Everything durable lives in libvirt and the data directory, so a restart
(also after kill -9) resumes with the same state.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ironpool.allinone.access import prepare_tls, write_kubeconfig
from ironpool.allinone.classes import load_class_manifests, seed_classes, write_runtime_files
from ironpool.allinone.datadir import ensure_admin_token
from ironpool.allinone.host import HostOptions, HostProcess, default_classes
from ironpool.allinone.image import TINY, ensure_tiny_image
from ironpool.allinone.progress import Progress
from ironpool.allinone.servers import ApiServerRunner
from ironpool.apiserver import ServerOptions, is_loopback

log = logging.getLogger(__name__)

__all__ = ["AllInOne", "UpError", "UpOptions", "default_classes"]


@dataclass
class UpOptions(HostOptions):
    """Everything ``ironpool up`` can be told: this host's parts plus its control plane."""

    listen_host: str = "127.0.0.1"
    listen_port: int = 6443
    insecure_http: bool = False  # plain HTTP, loopback only
    write_client_config: bool = True
    client_config: Path | None = None
    pool_monitor_grace_period: float = 40.0
    # This host's poollet shares the control plane's process: no partition can come between them, so
    # it does not fence (joined hosts do, with their own --fence-after).
    fence_after: float = 0.0
    fence_margin: float = 10.0
    cluster_signing_duration: float = 365 * 86400.0  # the client certificates of joined hosts

    def __post_init__(self) -> None:
        super().__post_init__()
        from ironpool.fleet.fence_timing import check_fence_timing

        check_fence_timing(self.fence_after, self.pool_monitor_grace_period, self.fence_margin)
        if self.insecure_http and not is_loopback(self.listen_host):
            raise ValueError(f"--insecure-http serves plain HTTP only on a loopback address, not "
                             f"{self.listen_host}; drop --insecure-http to serve HTTPS there")


class UpError(Exception):
    """``ironpool up`` could not start; the message says which part and why."""


class AllInOne(HostProcess):
    """The running system; ``run`` starts it, waits for ``stop`` and shuts it down."""

    label = "ironpool up"
    options: UpOptions

    def __init__(self, options: UpOptions, progress: Progress | None = None) -> None:
        super().__init__(options, progress)
        self.apiserver: ApiServerRunner | None = None
        self.admin_token = ""
        self.ca_file: str | None = None
        self.client_config_path: Path | None = None

    def _client(self) -> Any:
        from ironpool.client.config import ClientConfig
        from ironpool.client.rest import AsyncClient

        assert self.apiserver is not None
        config = ClientConfig(server=self.apiserver.url, token=self.admin_token, ca_file=self.ca_file)
        client = AsyncClient(config)
        self.clients.append(client)
        return client

    async def start(self, stop: asyncio.Event) -> None:
        from ironpool.certificates.signer import CsrSigner, SigningOptions
        from ironpool.client.leaderelection import LeaderElectionConfig
        from ironpool.fleet.lifecycle import LifecycleOptions
        from ironpool.fleet.manager import ELECTION_NAME, run_controller_manager
        from ironpool.scheduler.app import SchedulerOptions
        from ironpool.scheduler.app import run as run_scheduler

        opts, dirs, p = self.options, self.dirs, self.progress
        p.begin()
        self.open_data_dir()
        log.info("ironpool up: data dir %s, pool %s", dirs.root, opts.pool)
        self.admin_token = ensure_admin_token(dirs.tokens)
        classes = load_class_manifests(opts.classes)
        machine_classes, volume_classes = write_runtime_files(classes, dirs.classes)
        p.ok("data dir", str(dirs.root))

        images = opts.images or dirs.images
        if opts.tiny_image:
            p.begin()
            built = await ensure_tiny_image(images, dirs.logs / "build-tiny-image.log")
            p.ok(f"image {TINY}", f"{images / TINY}{' (built)' if built else ''}")

        p.begin()
        tls = None if opts.insecure_http else prepare_tls(dirs.pki, opts.listen_host)
        self.ca_file = tls.client_ca_file if tls else None
        # One token per run, for the apiserver to present to this host's machinepoollet when it relays
        # a console (machines/exec); both run in this process, so it is never written down.
        self.console_token = secrets.token_urlsafe(32)
        self.apiserver = ApiServerRunner(f"sqlite://{dirs.db}", dirs.tokens, opts.listen_host,
                                         opts.listen_port, tls,
                                         ServerOptions(machinepoollet_token=self.console_token,
                                                       cluster_ca_pem=(dirs.pki / "ca.crt").read_bytes()
                                                       if tls else None))
        await self.apiserver.start()
        p.ok("apiserver", self.apiserver.url + ("" if tls else "  (plain HTTP: --insecure-http)"))

        p.begin()
        seed_client = self._client()
        created = await seed_classes(seed_client, classes)
        summary = ", ".join(classes.names("MachineClass") + classes.names("VolumeClass"))
        p.ok("classes", f"{summary}" + (f" ({len(created)} new)" if created else ""))
        if opts.write_client_config:
            from ironpool.client.config import ClientConfig

            self.client_config_path = ClientConfig(
                server=self.apiserver.url, token=self.admin_token, ca_file=self.ca_file,
            ).save(opts.client_config)
            p.ok("client config", str(self.client_config_path))
        write_kubeconfig(dirs.kubeconfig, self.apiserver.url, self.admin_token, self.ca_file)
        p.ok("kubeconfig", str(dirs.kubeconfig))

        await self.start_runtimes(images, machine_classes, volume_classes, {"api": self.apiserver.url})

        p.begin()
        scheduled = asyncio.Event()
        self.spawn("scheduler", run_scheduler(self._client(), SchedulerOptions(), stop, scheduled))
        await self.until_ready("scheduler", scheduled, 60)
        p.ok("scheduler", "")

        p.begin()
        # Elected, so a controller-manager started on its own against this control plane stands by.
        grace = opts.pool_monitor_grace_period
        lifecycle = LifecycleOptions(grace=grace, monitor_period=min(5.0, grace / 5),
                                     fence_margin=opts.fence_margin)
        election = LeaderElectionConfig(ELECTION_NAME, lease_duration=15.0, renew_deadline=10.0)
        # It signs the client certificates of joining hosts with the installation's CA.
        signer = CsrSigner.load(SigningOptions(dirs.pki / "ca.crt", dirs.pki / "ca.key",
                                               opts.cluster_signing_duration)) if tls else None
        self.spawn("controller-manager", run_controller_manager(self._client(), lifecycle, stop, election,
                                                                signer=signer))
        p.ok("controller-manager", f"pool monitor grace period {grace:g}s")

        await self.start_poollets(self._client(), self._client(), stop)

    def summary(self) -> list[tuple[str, str]]:
        assert self.apiserver is not None
        return [
            ("API", self.apiserver.url),
            ("web console", f"{self.apiserver.url}/ui/ (sign in with the token in the token file)"),
            ("CA", self.ca_file or "(none: plain HTTP)"),
            ("token file", str(self.dirs.tokens)),
            ("client config", str(self.client_config_path) if self.client_config_path else "(not written)"),
            ("kubeconfig", str(self.dirs.kubeconfig)),
            *self.host_summary(),
        ]

    async def stop_control_plane(self) -> None:
        if self.apiserver is not None:
            await self.apiserver.stop()

    async def run(self, stop: asyncio.Event, on_started: Callable[[AllInOne], None] | None = None) -> None:
        """Start, wait for ``stop`` (or a component failing), shut down. Raises UpError on start failure.

        ``stop`` set while starting (Ctrl-C during the image build, say) abandons the start at once.
        """
        await self.run_until(stop, on_started, UpError)
