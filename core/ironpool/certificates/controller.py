"""The certificate controller of the controller-manager: Kubernetes' csrapproving and csrsigning
controllers in one loop over CertificateSigningRequests.

Each request of :data:`~ironpool.api.certificates.POOL_CLIENT_SIGNER` is decided by
:func:`.approver.decide` (written through ``certificatesigningrequests/approval``) and, once approved,
signed by :class:`.signer.CsrSigner` (``status.certificate`` through ``/status``); a request that
cannot be signed gets a ``Failed`` condition. Every decision is an Event on the request.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from ironpool.api import errors
from ironpool.api.certificates import (
    APPROVED,
    FAILED,
    POOL_CLIENT_SIGNER,
    CertificateSigningRequest,
    CsrError,
    condition_of,
)
from ironpool.api.conditions import set_condition
from ironpool.certificates.approver import decide
from ironpool.certificates.signer import CsrSigner, encode_certificate
from ironpool.client.controller import DONE, Controller, ObjectKey, Result
from ironpool.client.events import EventRecorder
from ironpool.client.informer import RawInformer
from ironpool.client.rest import AsyncClient
from ironpool.client.wire import resource_for_model

log = logging.getLogger(__name__)
_CSRS = resource_for_model(CertificateSigningRequest)


class CertificateController:
    """Approves and signs pool client certificate requests; ``signer`` None: approves only."""

    def __init__(self, client: AsyncClient, signer: CsrSigner | None) -> None:
        self.client = client
        self.signer = signer
        self.informer = RawInformer(client, CertificateSigningRequest)
        self.controller = Controller("certificate-controller", self.reconcile, workers=1)
        self.events = EventRecorder(client, "certificate-controller")

    async def reconcile(self, key: ObjectKey) -> Result:
        try:
            csr = await self.client.get_raw(_CSRS, key.name)
        except errors.NotFound:
            return DONE
        if (csr.get("spec") or {}).get("signerName") != POOL_CLIENT_SIGNER:
            return DONE
        decision = decide(csr)
        if decision is not None:
            set_condition(csr, decision.type, "True", decision.reason, decision.message)
            csr = await self.client.update_raw(_CSRS, csr, subresource="approval")
            log.info("certificate request %s: %s (%s)", key.name, decision.type, decision.message)
            await self._event(csr, "Normal" if decision.type == APPROVED else "Warning", decision.reason,
                              decision.message)
        if self.signer is None or not condition_of(csr, APPROVED) or condition_of(csr, FAILED) \
                or (csr.get("status") or {}).get("certificate"):
            return DONE
        try:
            pem = self.signer.sign(csr["spec"])
        except CsrError as exc:
            set_condition(csr, FAILED, "True", "SigningFailed", f"spec.request: {exc}")
            await self.client.update_raw(_CSRS, csr, subresource="status")
            await self._event(csr, "Warning", "SigningFailed", f"spec.request: {exc}")
            return DONE
        csr["status"] = {**(csr.get("status") or {}), "certificate": encode_certificate(pem)}
        await self.client.update_raw(_CSRS, csr, subresource="status")
        log.info("certificate request %s: signed", key.name)
        return DONE

    async def _event(self, csr: dict[str, Any], type_: str, reason: str, message: str) -> None:
        try:
            await self.events.record(csr, type_, reason, message)
        except Exception as exc:  # events are best effort
            log.debug("could not record %s: %s", reason, exc)

    async def run(self, stop: asyncio.Event, sync_timeout: float = 120.0) -> None:
        """Watch the requests and act on each until ``stop``."""
        def enqueue(obj: dict[str, Any], *_: Any) -> None:
            self.controller.enqueue(ObjectKey.of(obj))

        self.informer.add_event_handler(on_add=enqueue, on_update=lambda old, new: enqueue(new))
        self.informer.start()
        try:
            await self.informer.wait_for_sync(sync_timeout)
            log.info("certificate controller running (%s)",
                     "approving and signing" if self.signer else "approving only: no signing CA given")
            await self.controller.run(stop)
        finally:
            await self.informer.stop()
