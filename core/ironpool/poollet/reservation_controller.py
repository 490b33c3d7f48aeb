"""The machinepoollet's Reservation reconciler (IronCore's IEP-11 draft ``ReservationReconciler``).

For a Reservation whose plan gives this pool a part (``status.pools[]`` with ``ref`` this pool, while
it holds: :func:`ironpool.api.reservation.held`) the poollet keeps its finalizer
``machinepoollet.ironcore.dev/reservation-<pool>`` on it, asks the runtime to hold the part
(``CreateReservation``, found again by the Reservation's uid label before anything is created), and
writes the runtime's answer as its pool's ``state``. When the Reservation stops holding here
(expired, rejected, deleted) the runtime's reservation is deleted, then the finalizer goes.

What goes to the runtime: the part's whole machines under the runtime's class names (the API classes
map to the runtime's by capabilities, as for Machines) and its cpu/memory block, the draft's labels
naming the Reservation, and ironpool's two annotations: the key Machines within it carry too, and
when it expires. A runtime that does not serve reservations (``UNIMPLEMENTED``) holds nothing of its
own: the part counts as accepted, the apiserver's hold stands.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from typing import Any, cast

import grpc
import grpc.aio

from ironpool.api import reservation as rsv
from ironpool.api.compute import MachineClass, Reservation
from ironpool.api.conditions import status_differs
from ironpool.client.controller import DONE, ObjectKey, Result
from ironpool.client.events import EventRecorder
from ironpool.client.informer import Informer
from ironpool.client.rest import AsyncClient
from ironpool.iri.client import AsyncMachineRuntimeClient
from ironpool.iri.gen.machine.v1alpha1 import api_pb2 as mpb
from ironpool.iri.reservations import EXPIRES_AT_ANNOTATION, RESERVATION_KEY_ANNOTATION, encode_resources
from ironpool.poollet import keys
from ironpool.poollet.classes import ClassMapper, capabilities_to_iri
from ironpool.poollet.finalizers import has_finalizer, remove_finalizer
from ironpool.poollet.reconciler import PoolObjectReconciler

log = logging.getLogger(__name__)

_STATES = {mpb.RESERVATION_STATE_PENDING: rsv.PENDING, mpb.RESERVATION_STATE_ACCEPTED: rsv.ACCEPTED,
           mpb.RESERVATION_STATE_REJECTED: rsv.REJECTED}


def part_of(reservation: Reservation, pool: str) -> Mapping[str, Any] | None:
    """What ``reservation`` holds on ``pool`` (None: nothing, or it holds nothing any more)."""
    return rsv.held(reservation.to_dict()).get(pool)


class ReservationReconciler(PoolObjectReconciler[Reservation]):
    """Holds this pool's part of every Reservation in the runtime, and says how that went."""

    uid_label = keys.RESERVATION_UID_LABEL

    def __init__(self, client: AsyncClient, runtime: AsyncMachineRuntimeClient, pool: str,
                 reservations: Informer[Reservation], classes: Informer[MachineClass], mapper: ClassMapper,
                 events: EventRecorder | None = None, delete_requeue: float = 1.0) -> None:
        super().__init__(client, pool, reservations, keys.MACHINE_POOL_LABEL, delete_requeue)
        self.runtime = runtime
        self.classes = classes
        self.mapper = mapper
        self.events = events
        self.finalizer = rsv.pool_finalizer(pool)  # type: ignore[misc]  # per pool, as in the draft

    def pool_of(self, reservation: Reservation) -> str | None:
        return self.pool if part_of(reservation, self.pool) is not None else None

    async def list_runtime(self, labels: Mapping[str, str]) -> Sequence[mpb.Reservation]:
        try:
            return await self.runtime.list_reservations(labels=labels)
        except grpc.aio.AioRpcError as exc:
            if exc.code() == grpc.StatusCode.UNIMPLEMENTED:
                return []  # nothing was held there
            raise

    async def delete_runtime(self, runtime_id: str) -> None:
        await self.runtime.delete_reservation(runtime_id, missing_ok=True)

    async def reconcile(self, key: ObjectKey) -> Result:
        reservation = self.objects.get(str(key))
        if reservation is not None and not reservation.metadata.deletion_timestamp \
                and self.pool_of(reservation) != self.pool:
            return await self._let_go(reservation)
        return await super().reconcile(key)

    async def _let_go(self, reservation: Reservation) -> Result:
        """It holds nothing here (any more): the runtime's reservation goes, then the finalizer."""
        if not has_finalizer(reservation, self.finalizer):
            return DONE
        if await self.delete_runtime_objects({self.uid_label: reservation.metadata.uid or ""}):
            return Result(requeue_after=self.delete_requeue)
        await remove_finalizer(self.client, reservation, self.finalizer)
        log.info("reservation %s/%s: released on pool %s", reservation.metadata.namespace,
                 reservation.metadata.name, self.pool)
        return DONE

    async def apply(self, reservation: Reservation) -> Result:
        uid = reservation.metadata.uid or ""
        found = [r for r in await self.list_runtime({self.uid_label: uid}) if not r.metadata.deleted_at]
        if found:
            state = _STATES.get(found[0].status.state, rsv.PENDING)
        else:
            state = await self._create(reservation)
        await self._report(reservation, state)
        return DONE

    async def _create(self, reservation: Reservation) -> str:
        part = part_of(reservation, self.pool) or {}
        resources, unknown = self._runtime_resources(part)
        if unknown:
            message = f"this pool cannot hold machines of class {', '.join(unknown)} (no runtime class fits)"
            await self._event(reservation, "Warning", "ReservationRejected", message)
            return rsv.REJECTED
        meta = reservation.metadata
        wire = mpb.Reservation(spec=mpb.ReservationSpec(resources=encode_resources(resources)))
        wire.metadata.labels.update({keys.RESERVATION_UID_LABEL: meta.uid or "",
                                     keys.RESERVATION_NAMESPACE_LABEL: meta.namespace or "",
                                     keys.RESERVATION_NAME_LABEL: meta.name or "", **self.owner_labels})
        wire.metadata.annotations[RESERVATION_KEY_ANNOTATION] = f"{meta.namespace}/{meta.name}"
        when = rsv.expires_at(reservation.to_dict())
        if when is not None:
            wire.metadata.annotations[EXPIRES_AT_ANNOTATION] = str(int(when.timestamp()))
        try:
            made = await self.runtime.create_reservation(wire)
        except grpc.aio.AioRpcError as exc:
            if exc.code() != grpc.StatusCode.UNIMPLEMENTED:
                raise
            await self._event(reservation, "Normal", "ReservationNotHeldByRuntime",
                              "the runtime holds no reservations; the apiserver's hold stands")
            return rsv.ACCEPTED
        state = _STATES.get(made.status.state, rsv.PENDING)
        reason = "ReservationAccepted" if state == rsv.ACCEPTED else "ReservationRejected"
        what = ", ".join(f"{k}={v}" for k, v in sorted(resources.items()))
        message = f"runtime reservation {made.metadata.id} on pool {self.pool}: {what}: {state.lower()}"
        await self._event(reservation, "Normal" if state == rsv.ACCEPTED else "Warning", reason, message)
        return state

    def _runtime_resources(self, part: Mapping[str, Any]) -> tuple[dict[str, str], list[str]]:
        """The part under the runtime's class names; the API classes no runtime class fits."""
        out: dict[str, str] = {}
        unknown: list[str] = []
        for key, value in part.items():
            cls = rsv.class_of_key(str(key))
            if cls is None:
                out[str(key)] = str(value)
                continue
            api_class = self.classes.get(cls)
            match = self.mapper.lookup(cls, capabilities_to_iri(api_class.capabilities)) \
                if api_class is not None else None
            if match is None or match.runtime_class is None:
                unknown.append(cls)
                continue
            name = rsv.class_key(match.runtime_class.name)
            out[name] = str(int(out.get(name, "0")) + int(str(value)))
        return out, unknown

    async def _report(self, reservation: Reservation, state: str) -> None:
        """This pool's ``state`` in the Reservation's status, written if it says something new."""
        status = reservation.status.to_dict() if reservation.status else {}
        entries = [dict(e) for e in status.get("pools") or []]
        for entry in entries:
            if entry.get("ref") == self.pool:
                entry["state"] = state
        if status_differs({"pools": status.get("pools") or []}, {"pools": entries}):
            patch = {"metadata": {"resourceVersion": reservation.metadata.resource_version},
                     "status": {"pools": entries}}
            await self.client.patch(Reservation, reservation.metadata.name or "", patch,
                                    namespace=reservation.metadata.namespace, subresource="status")

    async def _event(self, reservation: Reservation, type_: str, reason: str, message: str) -> None:
        if self.events is not None:
            await self.events.record(cast(Any, reservation), type_, reason, message)
