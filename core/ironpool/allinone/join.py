"""``ironpool join``: this host's runtimes and poollets, reaching a remote control plane over HTTPS.

What ``ironpool up`` runs for its host, without the apiserver and scheduler: the libvirt machine and
volume runtimes on unix sockets in the data dir, and the machinepoollet and volumepoollet of one pool,
each authenticating with that pool's identity from a join token. The data dir holds the control
plane's CA (``pki/ca.crt``), one client config per identity (``machinepool.yaml``, ``volumepool.yaml``),
the storage pool's folder and the log; ``ironpool down --data-dir`` stops and purges it as it does an
``ironpool up``.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ironpool.allinone.classes import load_class_manifests, write_runtime_files
from ironpool.allinone.host import HostOptions, HostProcess
from ironpool.allinone.image import TINY, ensure_tiny_image
from ironpool.allinone.join_token import JoinToken
from ironpool.apiserver import write_private

log = logging.getLogger(__name__)

TOKEN_PROPAGATION_SECONDS = 5.0  # an apiserver reads its token file again within a second of a change


@dataclass
class JoinOptions(HostOptions):
    """Everything ``ironpool join`` can be told: this host's parts and how to reach the control plane."""

    servers: list[str] = field(default_factory=list)
    token: JoinToken = field(default_factory=lambda: JoinToken("", ""))
    ca_pem: bytes = b""


class JoinError(Exception):
    """``ironpool join`` could not start; the message says which part and why."""


def _cause(exc: BaseException) -> BaseException:
    """The innermost cause of a chain (a TLS verification error under the transport's own)."""
    while exc.__cause__ is not None or exc.__context__ is not None:
        exc = exc.__cause__ or exc.__context__  # type: ignore[assignment]
    return exc


class Join(HostProcess):
    """The running host; ``run`` starts it, waits for ``stop`` and shuts it down."""

    label = "ironpool join"
    options: JoinOptions

    @property
    def ca_file(self) -> Path:
        return self.dirs.pki / "ca.crt"

    def config_path(self, identity: str) -> Path:
        return self.dirs.root / f"{identity}.yaml"

    def _write_configs(self) -> dict[str, Any]:
        """The CA and one client config per pool identity, in the data dir; their configs by identity."""
        from ironpool.client.config import ClientConfig

        opts = self.options
        write_private(self.ca_file, opts.ca_pem)
        configs = {}
        for identity, token in (("machinepool", opts.token.machine), ("volumepool", opts.token.volume)):
            config = ClientConfig(server=",".join(opts.servers), token=token, ca_file=str(self.ca_file))
            config.save(self.config_path(identity))
            configs[identity] = config
        return configs

    async def _check_access(self, identity: str, client: Any) -> None:
        """One request as ``identity``, so a wrong token, CA or address is said before anything starts."""
        from ironpool.api import errors
        from ironpool.api.resources import resolve

        plural = "machinepools" if identity == "machinepool" else "volumepools"
        servers = ", ".join(self.options.servers)
        # A token issued a moment ago is known to an apiserver once it has read its token file again
        # (it looks once a second): a refusal is final only after that.
        deadline = time.monotonic() + TOKEN_PROPAGATION_SECONDS
        try:
            while True:
                try:
                    await client.get_raw(resolve(plural), self.options.pool)
                    return
                except errors.Unauthorized:
                    if time.monotonic() >= deadline:
                        raise
                    await asyncio.sleep(0.25)
        except errors.NotFound:
            return  # authenticated and allowed: the pool is announced next
        except errors.Unauthorized:
            raise JoinError(f"{servers}: the {identity} token is not accepted (revoked, mistyped, or the "
                            "apiservers read another token file)") from None
        except errors.Forbidden as exc:
            raise JoinError(f"{servers}: the {identity} token may not read {plural}/{self.options.pool} "
                            f"({exc}); is --pool the pool the token was issued for?") from None
        except errors.ApiError:
            return  # the apiserver answered: reachable and authenticated
        except Exception as exc:
            cause = _cause(exc)
            if isinstance(cause, ssl.SSLCertVerificationError):
                raise JoinError(f"{servers}: the server's certificate is not signed by the CA given "
                                f"({cause.verify_message})") from None
            raise JoinError(f"cannot reach the control plane at {servers}: {cause or exc}") from None

    async def start(self, stop: asyncio.Event) -> None:
        from ironpool.client.rest import AsyncClient

        opts, dirs, p = self.options, self.dirs, self.progress
        p.begin()
        self.open_data_dir()
        log.info("ironpool join: data dir %s, pool %s, control plane %s", dirs.root, opts.pool,
                 ",".join(opts.servers))
        configs = self._write_configs()
        classes = load_class_manifests(opts.classes)
        machine_classes, volume_classes = write_runtime_files(classes, dirs.classes)
        p.ok("data dir", str(dirs.root))

        p.begin()
        clients = {}
        for identity, config in configs.items():
            client = AsyncClient(config)
            self.clients.append(client)
            await self._check_access(identity, client)
            clients[identity] = client
        p.ok("control plane", f"{', '.join(opts.servers)} (as pool {opts.pool})")

        images = opts.images or dirs.images
        if opts.tiny_image:
            p.begin()
            built = await ensure_tiny_image(images, dirs.logs / "build-tiny-image.log")
            p.ok(f"image {TINY}", f"{images / TINY}{' (built)' if built else ''}")

        await self.start_runtimes(images, machine_classes, volume_classes,
                                  {"api": ",".join(opts.servers), "role": "join"})
        await self.start_poollets(clients["machinepool"], clients["volumepool"], stop)

    def summary(self) -> list[tuple[str, str]]:
        return [
            ("API", ", ".join(self.options.servers)),
            ("CA", str(self.ca_file)),
            ("client configs", f"{self.config_path('machinepool')}, {self.config_path('volumepool')}"),
            *self.host_summary(),
        ]

    async def run(self, stop: asyncio.Event, on_started: Callable[[Join], None] | None = None) -> None:
        """Start, wait for ``stop`` (or a part failing), shut down. Raises JoinError on a start failure."""
        await self.run_until(stop, on_started, JoinError)
