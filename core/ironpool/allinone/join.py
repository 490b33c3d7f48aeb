"""``ironpool join``: this host's runtimes and poollets, reaching a remote control plane over HTTPS.

What ``ironpool up`` runs for its host, without the apiserver and scheduler: the libvirt machine and
volume runtimes on unix sockets in the data dir, and the machinepoollet and volumepoollet of one pool,
each authenticating with one of that pool's identities. With a bootstrap token (what ``ironpool
join-token create`` issues) those identities are client certificates, as kubelet's TLS bootstrap: the
CA is discovered and pinned by hash (:mod:`ironpool.certificates.discovery`), a key made here is
signed through a CertificateSigningRequest (:mod:`ironpool.certificates.bootstrap`) and renewed before
it expires (:mod:`ironpool.certificates.rotation`); with an earlier identity token they are its bearer
tokens. The data dir holds the control plane's CA (``pki/ca.crt``), the key and certificate of each
identity (``pki/machinepool-client.pem``, ``pki/volumepool-client.pem``, 0600), one client config per
identity (``machinepool.yaml``, ``volumepool.yaml``), the storage pool's folder and the log;
``ironpool down --data-dir`` stops and purges it as it does an ``ironpool up``.
"""

from __future__ import annotations

import asyncio
import functools
import logging
import ssl
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from ironpool.allinone.classes import load_class_manifests, write_runtime_files
from ironpool.allinone.host import HostOptions, HostProcess
from ironpool.allinone.image import TINY, ensure_tiny_image
from ironpool.allinone.join_token import BootstrapToken, JoinToken
from ironpool.allinone.progress import Progress
from ironpool.api.fleet import (
    MACHINE_POOL_USER_PREFIX,
    MACHINE_POOLS_GROUP,
    VOLUME_POOL_USER_PREFIX,
    VOLUME_POOLS_GROUP,
)
from ironpool.apiserver import write_private
from ironpool.certificates.bootstrap import PoolIdentity

T = TypeVar("T")

log = logging.getLogger(__name__)

TOKEN_PROPAGATION_SECONDS = 5.0  # an apiserver reads its token file again within a second of a change


@dataclass
class JoinOptions(HostOptions):
    """Everything ``ironpool join`` can be told: this host's parts and how to reach the control plane."""

    servers: list[str] = field(default_factory=list)
    token: JoinToken | BootstrapToken = field(default_factory=lambda: JoinToken("", ""))
    ca_pem: bytes = b""  # empty with a bootstrap token: discovered and checked against ca_cert_hash
    ca_cert_hash: str = ""
    certificate_request_timeout: float = 60.0


class JoinError(Exception):
    """``ironpool join`` could not start; the message says which part and why."""


def _cause(exc: BaseException) -> BaseException:
    """The innermost cause of a chain (a TLS verification error under the transport's own)."""
    while exc.__cause__ is not None or exc.__context__ is not None:
        exc = exc.__cause__ or exc.__context__  # type: ignore[assignment]
    return exc


def _unreachable(servers: str, exc: BaseException) -> JoinError:
    """The join's error for a request that got no answer: a CA that did not sign the server's
    certificate, or no control plane at ``servers``."""
    cause = _cause(exc)
    if isinstance(cause, ssl.SSLCertVerificationError):
        return JoinError(f"{servers}: the server's certificate is not signed by the CA given "
                         f"({cause.verify_message})")
    return JoinError(f"cannot reach the control plane at {servers}: {cause or exc}")


class Join(HostProcess):
    """The running host; ``run`` starts it, waits for ``stop`` and shuts it down."""

    label = "ironpool join"
    options: JoinOptions

    def __init__(self, options: JoinOptions, progress: Progress | None = None) -> None:
        super().__init__(options, progress)
        self.rotators: dict[str, Any] = {}

    @property
    def ca_file(self) -> Path:
        return self.dirs.pki / "ca.crt"

    def config_path(self, identity: str) -> Path:
        return self.dirs.root / f"{identity}.yaml"

    def pair_path(self, identity: str) -> Path:
        """Where ``identity``'s key and client certificate are kept (one PEM, 0600)."""
        return self.dirs.pki / f"{identity}-client.pem"

    def identities(self) -> dict[str, PoolIdentity]:
        pool = self.options.pool
        return {"machinepool": PoolIdentity(MACHINE_POOL_USER_PREFIX + pool, MACHINE_POOLS_GROUP),
                "volumepool": PoolIdentity(VOLUME_POOL_USER_PREFIX + pool, VOLUME_POOLS_GROUP)}

    def _write_configs(self) -> dict[str, Any]:
        """The CA and one client config per pool identity, in the data dir; their configs by identity."""
        from ironpool.client.config import ClientConfig

        opts = self.options
        assert isinstance(opts.token, JoinToken)
        write_private(self.ca_file, opts.ca_pem)
        configs = {}
        for identity, token in (("machinepool", opts.token.machine), ("volumepool", opts.token.volume)):
            config = ClientConfig(server=",".join(opts.servers), token=token, ca_file=str(self.ca_file))
            config.save(self.config_path(identity))
            configs[identity] = config
        return configs

    async def _bootstrap_configs(self) -> dict[str, Any]:
        """The pinned CA and, per pool identity, a client certificate: the stored one while it is valid,
        else one asked for with the bootstrap token; their configs by identity."""
        from ironpool.certificates.bootstrap import (
            CertificateRequestError,
            request_certificate,
            usable,
            write_pair,
        )
        from ironpool.certificates.discovery import DiscoveryError, discover_ca
        from ironpool.client.config import ClientConfig
        from ironpool.client.rest import AsyncClient

        opts = self.options
        servers = ", ".join(opts.servers)
        if not opts.ca_pem:
            try:
                opts.ca_pem = await discover_ca(opts.servers, opts.ca_cert_hash)
            except DiscoveryError as exc:
                raise JoinError(str(exc)) from None
        write_private(self.ca_file, opts.ca_pem)
        server, ca = ",".join(opts.servers), str(self.ca_file)
        configs = {}
        for identity, subject in self.identities().items():
            path = self.pair_path(identity)
            if not usable(path, subject, opts.ca_pem, margin=10.0):
                token_config = ClientConfig(server=server, token=str(opts.token), ca_file=ca)
                try:
                    async with AsyncClient(token_config) as client:
                        pem = await self._with_token(identity, functools.partial(
                            request_certificate, client, subject, opts.certificate_request_timeout))
                except CertificateRequestError as exc:
                    raise JoinError(f"{servers}: {exc}") from None
                write_pair(path, pem)
                log.info("client certificate of %s issued by the control plane", subject.user)
            config = ClientConfig(server=server, ca_file=ca, cert_file=str(path), key_file=str(path))
            config.save(self.config_path(identity))
            configs[identity] = config
        return configs

    async def _with_token(self, identity: str, call: Callable[[], Awaitable[bytes]]) -> bytes:
        """``call()`` with the bootstrap token, its refusals said as the join's errors."""
        from ironpool.api import errors

        servers = ", ".join(self.options.servers)
        try:
            return await _once_token_is_known(call)
        except errors.Unauthorized:
            raise JoinError(f"{servers}: the bootstrap token is not accepted (revoked, or mistyped); ask "
                            "for a new one with `ironpool join-token create`") from None
        except errors.Forbidden as exc:
            raise JoinError(f"{servers}: the bootstrap token may not ask for the {identity} certificate "
                            f"({exc})") from None
        except errors.ApiError as exc:
            raise JoinError(f"{servers}: the {identity} certificate request was refused: {exc}") from None
        except Exception as exc:
            raise _unreachable(servers, exc) from None

    async def _check_access(self, identity: str, client: Any) -> None:
        """One request as ``identity``, so a wrong token, CA or address is said before anything starts."""
        from ironpool.api import errors
        from ironpool.api.resources import resolve

        plural = "machinepools" if identity == "machinepool" else "volumepools"
        servers = ", ".join(self.options.servers)
        try:
            await _once_token_is_known(lambda: client.get_raw(resolve(plural), self.options.pool))
            return
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
            raise _unreachable(servers, exc) from None

    async def start(self, stop: asyncio.Event) -> None:
        from ironpool.client.rest import AsyncClient

        opts, dirs, p = self.options, self.dirs, self.progress
        p.begin()
        self.open_data_dir()
        log.info("ironpool join: data dir %s, pool %s, control plane %s", dirs.root, opts.pool,
                 ",".join(opts.servers))
        bootstrap = isinstance(opts.token, BootstrapToken)
        configs = await self._bootstrap_configs() if bootstrap else self._write_configs()
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
        p.ok("control plane", f"{', '.join(opts.servers)} (as pool {opts.pool}"
             + (", on client certificates)" if bootstrap else ")"))
        if bootstrap:
            from ironpool.certificates.rotation import CertificateRotator

            for identity, subject in self.identities().items():
                self.rotators[identity] = CertificateRotator(
                    self.pair_path(identity), subject, configs[identity], [clients[identity]],
                    opts.certificate_request_timeout)
                self.spawn(f"{identity} certificate rotation", self.rotators[identity].run(stop))

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
            *([("client certificates", f"{self.pair_path('machinepool')}, {self.pair_path('volumepool')} "
                                       "(renewed before they expire)")] if self.rotators else []),
            *self.host_summary(),
        ]

    async def run(self, stop: asyncio.Event, on_started: Callable[[Join], None] | None = None) -> None:
        """Start, wait for ``stop`` (or a part failing), shut down. Raises JoinError on a start failure."""
        await self.run_until(stop, on_started, JoinError)


async def _once_token_is_known(call: Callable[[], Awaitable[T]]) -> T:
    """``call()``, retried while it is refused with 401 for TOKEN_PROPAGATION_SECONDS: a token issued
    a moment ago is known to an apiserver once it has read its token file again (it looks once a
    second), so a refusal is final only after that."""
    from ironpool.api import errors

    deadline = time.monotonic() + TOKEN_PROPAGATION_SECONDS
    while True:
        try:
            return await call()
        except errors.Unauthorized:
            if time.monotonic() >= deadline:
                raise
            await asyncio.sleep(0.25)
