"""Renewing a pool's client certificate before it expires, as kubelet's certificate manager: at a
random point between 70 % and 90 % of its validity (jitter, so a fleet issued at once does not renew
at once), a new key and request authenticated by the current certificate; the new pair replaces the
old file atomically and the clients that present it load it and reconnect."""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import logging
import random
from collections.abc import Sequence
from pathlib import Path

from cryptography import x509

from ironpool.certificates.bootstrap import (
    PoolIdentity,
    load_certificate,
    request_certificate,
    write_pair,
)
from ironpool.client.config import ClientConfig
from ironpool.client.rest import AsyncClient

log = logging.getLogger(__name__)
RETRY_SECONDS = 5.0


def rotation_deadline(cert: x509.Certificate, rng: random.Random | None = None) -> datetime.datetime:
    """When to renew ``cert``: 70-90 % of the way from notBefore to notAfter."""
    start, end = cert.not_valid_before_utc, cert.not_valid_after_utc
    return start + (end - start) * (0.7 + 0.2 * (rng or random).random())


class CertificateRotator:
    """Keeps the pair at ``path`` (``identity``'s) fresh for ``clients``; ``config`` reaches the
    control plane with that pair (its cert_file and key_file are ``path``)."""

    def __init__(self, path: Path, identity: PoolIdentity, config: ClientConfig,
                 clients: Sequence[AsyncClient], request_timeout: float = 60.0) -> None:
        self.path = path
        self.identity = identity
        self.config = config
        self.clients = list(clients)
        self.request_timeout = request_timeout
        self.rotations = 0

    async def rotate(self) -> None:
        """One renewal now: a new pair, stored, then loaded by every client."""
        async with AsyncClient(self.config) as client:  # authenticated by the current certificate
            pem = await request_certificate(client, self.identity, self.request_timeout)
        write_pair(self.path, pem)
        for c in self.clients:
            await c.reload_client_certificate()
        self.rotations += 1
        cert = load_certificate(self.path)
        log.info("client certificate of %s rotated (valid until %s)", self.identity.user,
                 cert.not_valid_after_utc.isoformat() if cert else "?")

    async def run(self, stop: asyncio.Event) -> None:
        """Renew at each certificate's deadline until ``stop``; a failed renewal is retried, the
        current certificate kept meanwhile."""
        serial, deadline = None, None
        while not stop.is_set():
            cert = load_certificate(self.path)
            now = datetime.datetime.now(datetime.UTC)
            if cert is not None and cert.serial_number != serial:
                serial, deadline = cert.serial_number, rotation_deadline(cert)  # once per certificate
            wait = (deadline - now).total_seconds() if cert is not None and deadline is not None else 0.0
            if wait > 0:
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), wait)
                continue
            try:
                await self.rotate()
            except Exception as exc:  # the control plane away, a refusal: keep the current one, retry
                left = (cert.not_valid_after_utc - now).total_seconds() if cert is not None else 0.0
                log.warning("client certificate of %s not rotated (%s); retrying in %.0fs, %.0fs before it "
                            "expires", self.identity.user, exc, RETRY_SECONDS, left)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(stop.wait(), RETRY_SECONDS)
