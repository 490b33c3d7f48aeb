"""What a Machine or Volume waits for before its runtime object can be made or changed.

A reason is typed, so the reconcilers ask what is missing (a Secret, which no watch announces; only
network interfaces) instead of matching the words of a message; its text is what the object's
conditions and Events say (``Secret default/ign (not found)``).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass


class Dependency(enum.StrEnum):
    """The kind of thing waited for: an API object of that kind, or a field of the object itself."""

    MACHINE_CLASS = "MachineClass"
    VOLUME_CLASS = "VolumeClass"
    SECRET = "Secret"
    VOLUME = "Volume"
    VOLUME_SNAPSHOT = "VolumeSnapshot"
    NETWORK_INTERFACE = "NetworkInterface"
    FIELD = ""


@dataclass(frozen=True)
class Waiting:
    """One thing waited for: what (``kind`` and ``name``, ``namespace/name`` when namespaced, or the
    field) and its ``problem``."""

    kind: Dependency
    name: str
    problem: str

    def __str__(self) -> str:
        what = f"{self.kind} {self.name}" if self.kind else self.name
        return f"{what} ({self.problem})"

    @property
    def polled(self) -> bool:
        """Whether only looking again tells when it is there: a pool reads Secrets by name and may not
        watch them (everything else reaches the poollet through its informers)."""
        return self.kind is Dependency.SECRET


def waiting_message(waiting: Iterable[Waiting]) -> str:
    """``waiting for A (problem); B (problem)``, as conditions and Events say it."""
    return "waiting for " + "; ".join(map(str, waiting))
