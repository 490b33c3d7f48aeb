"""``ipam.ironcore.dev/v1alpha1``: Prefix, IronCore's unit of IP address management.

A root Prefix owns a range (``spec.prefix``); a child is allocated from a parent (``spec.parentRef``
or ``spec.parentSelector``), either a given range or any free one of ``spec.prefixLength``. The
apiserver allocates synchronously: a stored child has ``spec.prefix`` and ``spec.parentRef`` set and
``status.phase: Allocated``; the parent lists its allocated children in ``status.used``.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from ironpool.api.ipaddr import IPFamily
from ironpool.api.meta import ApiModel, LabelSelectorSpec, LocalObjectReference, ObjectMeta, Timestamp

IPAM_GROUP = "ipam.ironcore.dev"
IPAM_VERSION = "v1alpha1"

PrefixPhase = Literal["Pending", "Allocated"]


class PrefixSpec(ApiModel):
    """Desired state of a Prefix (also the spec of an ephemeral prefix template)."""

    ip_family: IPFamily | None = Field(default=None, alias="ipFamily")
    prefix: str | None = None
    prefix_length: int | None = None
    parent_ref: LocalObjectReference | None = None
    parent_selector: LabelSelectorSpec | None = None

    @property
    def is_root(self) -> bool:
        """No parent named or selected: the Prefix is allocated by itself (IronCore's ``IsRoot``)."""
        return self.parent_ref is None and self.parent_selector is None


class PrefixStatus(ApiModel):
    """Set by the apiserver's allocation: the phase and the children allocated from this Prefix."""

    phase: PrefixPhase | None = None
    last_phase_transition_time: Timestamp | None = None
    used: list[str] | None = None


class Prefix(ApiModel):
    """A range of IP addresses, namespaced."""

    api_version: str | None = None
    kind: str | None = None
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    spec: PrefixSpec = Field(default_factory=PrefixSpec)
    status: PrefixStatus | None = None


class PrefixTemplate(ApiModel):
    """Labels, annotations and spec of an ephemeral Prefix (``NetworkInterface.spec.ips[].ephemeral``)."""

    metadata: ObjectMeta | None = None
    spec: PrefixSpec = Field(default_factory=PrefixSpec)
