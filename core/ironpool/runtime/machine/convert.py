"""Machine records and events as IRI protobuf messages."""

from __future__ import annotations

from ironpool.iri.gen.event.v1alpha1 import api_pb2 as event_pb2
from ironpool.iri.gen.machine.v1alpha1 import api_pb2 as machine_pb2
from ironpool.iri.gen.meta.v1alpha1 import api_pb2 as meta_pb2

from .core import GENERATION_ANNOTATION, ClassStatus, MachineView
from .events import MachineEvent
from .model import MachineRecord


def _observed_generation(rec: MachineRecord) -> int:
    # The poollet checks observed >= the generation it wrote in this annotation; the runtime
    # applies every accepted change before answering, so it has observed that generation.
    try:
        annotated = int(rec.annotations.get(GENERATION_ANNOTATION, "0"))
    except ValueError:
        annotated = 0
    return max(rec.generation, annotated)


def machine_message(view: MachineView) -> machine_pb2.Machine:
    rec = view.rec
    meta = meta_pb2.ObjectMetadata(
        id=rec.id,
        labels=rec.labels,
        annotations=rec.annotations,
        generation=rec.generation,
        created_at=rec.created_at,
        deleted_at=rec.deleted_at,
    )
    spec = machine_pb2.MachineSpec(**{"class": rec.class_name}, power=rec.power)  # type: ignore[arg-type]
    spec.guest_config.hostname = rec.hostname
    status = machine_pb2.MachineStatus(
        observed_generation=_observed_generation(rec),
        state=view.state,  # type: ignore[arg-type]
        image_ref=rec.boot_image or next((v.image for v in rec.volumes if v.image), ""),
    )
    attached = view.state != machine_pb2.MACHINE_PENDING
    for v in rec.volumes:
        vol = spec.volumes.add(name=v.name, device=v.device)
        if v.kind == "local":
            vol.local_disk.size_bytes = v.size_bytes
            if v.image:
                vol.local_disk.image.image = v.image
        else:
            vol.connection.driver = v.driver
            vol.connection.handle = v.handle
            vol.connection.attributes.update(v.attributes)
            vol.connection.effective_storage_bytes = v.effective_storage_bytes
        status.volumes.add(
            name=v.name,
            handle=v.handle,
            state=machine_pb2.VOLUME_ATTACHED if attached else machine_pb2.VOLUME_PENDING,
        )
    for n in rec.nics:
        spec.network_interfaces.add(
            name=n.name, network_id=n.network_id, ips=n.ips, attributes=n.attributes, labels=n.labels
        )
        status.network_interfaces.add(
            name=n.name,
            handle=f"{n.network_id or 'user'}/{n.name}",
            state=machine_pb2.NETWORK_INTERFACE_ATTACHED
            if attached
            else machine_pb2.NETWORK_INTERFACE_PENDING,
        )
    return machine_pb2.Machine(metadata=meta, spec=spec, status=status)


def event_message(event: MachineEvent) -> event_pb2.Event:
    meta = meta_pb2.ObjectMetadata(
        id=event.machine_id, labels=event.labels, annotations=event.annotations, created_at=event.created_at
    )
    return event_pb2.Event(
        spec=event_pb2.EventSpec(
            involved_object_meta=meta,
            reason=event.reason,
            message=event.message,
            type=event.type,
            event_time=event.event_time,
            action=event.action,
        )
    )


def class_status_message(cs: ClassStatus) -> machine_pb2.MachineClassStatus:
    return machine_pb2.MachineClassStatus(
        machine_class=machine_pb2.MachineClass(
            name=cs.cls.name, capabilities=machine_pb2.MachineClassCapabilities(resources=cs.cls.resources)
        ),
        quantity=cs.quantity,
    )
