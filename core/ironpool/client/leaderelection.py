"""Leader election through a ``coordination.k8s.io/v1`` Lease, as client-go's ``leaderelection`` does.

Every candidate tries, each ``retry_period``, to take or renew the Lease with a compare-and-swap on
its resourceVersion. A Lease held by another is free once its record has not changed for
``lease_duration`` as this candidate's own clock measures it (the holder's clock and the time
written in ``renewTime`` never count, so clock skew between hosts cannot hand the lock out early).
The leader renews each ``retry_period``; if it cannot renew for ``renew_deadline`` (shorter than
the lease), it stops leading before anyone else may start. On a clean stop it releases the Lease
(empty holder), so a standby takes over at its next try instead of after a whole lease.

Unlike kube-scheduler, which exits when it loses the lease, a candidate that loses it stops the
leader's work and campaigns again: a control plane whose apiservers flap for a few seconds keeps a
scheduler without a supervisor restarting processes.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
import socket
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from ironpool.api.coordination import Lease, now_micro
from ironpool.api.errors import AlreadyExists, ApiError, Conflict, NotFound
from ironpool.client.wire import ServerUnreachable, resource_for_model

log = logging.getLogger("ironpool.leaderelection")

LEASES = resource_for_model(Lease)


def default_identity() -> str:
    """``hostname_uuid``, as kube-scheduler names its candidates."""
    return f"{socket.gethostname()}_{uuid.uuid4()}"


@dataclass(frozen=True)
class LeaderElectionConfig:
    """Which Lease, who this candidate is, and the timings (kube-scheduler's flags, in seconds)."""

    name: str
    namespace: str = "kube-system"
    identity: str = field(default_factory=default_identity)
    lease_duration: float = 10.0
    renew_deadline: float = 7.0
    retry_period: float = 2.0

    def __post_init__(self) -> None:
        if not 0 < self.retry_period < self.renew_deadline < self.lease_duration:
            raise ValueError("leader election needs 0 < retry period < renew deadline < lease duration "
                             f"(got {self.retry_period}, {self.renew_deadline}, {self.lease_duration})")


Lead = Callable[[asyncio.Event], Awaitable[None]]
"""The leader's work: runs until the event is set (leadership lost, or the process stops)."""


class LeaderElector:
    """Campaigns for one Lease and runs the leader's work while it holds it (module docstring)."""

    def __init__(self, client: Any, config: LeaderElectionConfig,
                 on_change: Callable[[LeaderElector], None] | None = None) -> None:
        self.client = client
        self.config = config
        self.leading = False
        self.holder: str | None = None  # the holder as last observed
        self.transitions = 0
        self._on_change = on_change
        self._record: dict[str, Any] | None = None
        self._observed_at = 0.0

    # -- one try -----------------------------------------------------------------------------

    async def try_acquire_or_renew(self) -> bool:
        """Take the Lease if it is free, or renew it if it is ours; whether we hold it now."""
        c = self.config
        now = now_micro()
        try:
            lease = await self.client.get_raw(LEASES, c.name, c.namespace)
        except NotFound:
            spec: dict[str, Any] = {
                "holderIdentity": c.identity, "leaseDurationSeconds": math.ceil(c.lease_duration),
                "acquireTime": now, "renewTime": now, "leaseTransitions": 0}
            body = {"apiVersion": LEASES.api_version, "kind": "Lease",
                    "metadata": {"name": c.name, "namespace": c.namespace}, "spec": spec}
            try:
                await self.client.create_raw(LEASES, body, c.namespace)
            except AlreadyExists:
                return False
            self._observe(spec)
            return True
        spec = dict(lease.get("spec") or {})
        if spec != self._record:
            self._observe(spec)
        holder = spec.get("holderIdentity") or ""
        mine = holder == c.identity
        if holder and not mine and time.monotonic() < self._observed_at + c.lease_duration:
            return False  # held, and renewed within a lease as far as we have seen
        transitions = int(spec.get("leaseTransitions") or 0)
        new = {**spec, "holderIdentity": c.identity, "leaseDurationSeconds": math.ceil(c.lease_duration),
               "renewTime": now}
        if not mine:
            new.update(acquireTime=now, leaseTransitions=transitions + 1 if holder else transitions)
        body = {**lease, "spec": new}
        try:
            await self.client.update_raw(LEASES, body, c.namespace)  # resourceVersion: compare-and-swap
        except Conflict:
            return False
        self._observe(new)
        return True

    def _observe(self, spec: dict[str, Any]) -> None:
        self._record = spec
        self._observed_at = time.monotonic()
        holder = spec.get("holderIdentity") or None
        self.transitions = int(spec.get("leaseTransitions") or 0)
        if holder != self.holder:
            self.holder = holder
            log.info("lease %s/%s is held by %s", self.config.namespace, self.config.name, holder or "nobody")
            self._changed()

    def _changed(self) -> None:
        if self._on_change is not None:
            self._on_change(self)

    async def _try(self) -> bool:
        try:
            return await self.try_acquire_or_renew()
        except (ApiError, ServerUnreachable) as exc:
            log.warning("lease %s/%s: %s", self.config.namespace, self.config.name, exc)
            return False

    # -- the campaign ------------------------------------------------------------------------

    async def run(self, lead: Lead, stop: asyncio.Event) -> None:
        """Campaign until ``stop``; whenever this candidate holds the Lease, run ``lead``."""
        while not stop.is_set():
            if not await self._acquire(stop):
                return
            lost = asyncio.Event()
            self._set_leading(True)
            log.info("%s became the leader (%s/%s)", self.config.identity, self.config.namespace,
                     self.config.name)
            renewing = asyncio.ensure_future(self._renew(lost, stop))
            working = asyncio.ensure_future(lead(lost))
            stopping = asyncio.ensure_future(stop.wait())
            await asyncio.wait({renewing, working, stopping}, return_when=asyncio.FIRST_COMPLETED)
            lost.set()  # whatever ended first, the leader's work stops now
            stopping.cancel()
            renewing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await renewing
            try:
                await working
            finally:
                self._set_leading(False)
            if stop.is_set():
                await self._release()
                return
            log.warning("%s lost the lease %s/%s; campaigning again", self.config.identity,
                        self.config.namespace, self.config.name)

    async def _acquire(self, stop: asyncio.Event) -> bool:
        while not stop.is_set():
            if await self._try():
                return True
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self.config.retry_period)
        return False

    async def _renew(self, lost: asyncio.Event, stop: asyncio.Event) -> None:
        """Renew each retry period; give up (set ``lost``) once renewing failed for the deadline."""
        renewed = time.monotonic()
        while not stop.is_set():
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), self.config.retry_period)
            if stop.is_set():
                return
            if await self._try():
                renewed = time.monotonic()
            elif self.holder not in (None, self.config.identity) or (
                    time.monotonic() - renewed > self.config.renew_deadline):
                lost.set()
                return

    async def _release(self) -> None:
        """Hand the Lease back (empty holder) so a standby need not wait out the lease."""
        c = self.config
        try:
            lease = await self.client.get_raw(LEASES, c.name, c.namespace)
            spec = dict(lease.get("spec") or {})
            if spec.get("holderIdentity") != c.identity:
                return
            spec.update(holderIdentity="", leaseDurationSeconds=1, renewTime=now_micro())
            await self.client.update_raw(LEASES, {**lease, "spec": spec}, c.namespace)
            self._observe(spec)
        except (ApiError, ServerUnreachable) as exc:
            log.warning("could not release the lease %s/%s: %s", c.namespace, c.name, exc)

    def _set_leading(self, leading: bool) -> None:
        self.leading = leading
        self._changed()
