"""ironpool_pulumi: declare ironpool Machines, Volumes, VolumeSnapshots, classes and Secrets with
``pulumi up``.

Each resource is a Pulumi dynamic resource whose provider talks to the ironpool apiserver through
``ironpool.client``; configure it with the stack config ``ironpool:server``, ``ironpool:token``
(secret), ``ironpool:namespace`` and ``ironpool:caFile``, or the environment and client config file
``ironpool up`` writes. With ``ironpool:reserve: true`` a stack's Machines are reserved together
before any is created (:mod:`ironpool_pulumi.reserve`).
"""

from ironpool_pulumi.classes import MachineClass, MachineClassArgs, VolumeClass, VolumeClassArgs
from ironpool_pulumi.lookups import (
    MachineClassInfo,
    MachineInfo,
    MachinePoolInfo,
    get_machine,
    get_machine_classes,
    get_machine_pools,
)
from ironpool_pulumi.machine import AttachedVolume, Machine, MachineArgs
from ironpool_pulumi.reservation import Reservation, ReservationArgs
from ironpool_pulumi.secret import Secret, SecretArgs
from ironpool_pulumi.volume import Volume, VolumeArgs
from ironpool_pulumi.volume_snapshot import VolumeSnapshot, VolumeSnapshotArgs

__all__ = [
    "AttachedVolume",
    "Machine",
    "MachineArgs",
    "MachineClass",
    "MachineClassArgs",
    "MachineClassInfo",
    "MachineInfo",
    "MachinePoolInfo",
    "Reservation",
    "ReservationArgs",
    "Secret",
    "SecretArgs",
    "Volume",
    "VolumeArgs",
    "VolumeClass",
    "VolumeClassArgs",
    "VolumeSnapshot",
    "VolumeSnapshotArgs",
    "get_machine",
    "get_machine_classes",
    "get_machine_pools",
]
