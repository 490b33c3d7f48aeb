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
    """IPv4 or IPv6."""
    prefix: str | None = None
    """The prefix in CIDR form; allocated from the parent when empty."""
    prefix_length: int | None = None
    """Length of the prefix to allocate from the parent when prefix is empty."""
    parent_ref: LocalObjectReference | None = None
    """The Prefix this one is allocated from."""
    parent_selector: LabelSelectorSpec | None = None
    """Labels of the Prefix this one may be allocated from."""

    @property
    def is_root(self) -> bool:
        """No parent named or selected: the Prefix is allocated by itself (IronCore's ``IsRoot``)."""
        return self.parent_ref is None and self.parent_selector is None


class PrefixStatus(ApiModel):
    """Set by the apiserver's allocation: the phase and the children allocated from this Prefix."""

    phase: PrefixPhase | None = None
    """Pending or Allocated."""
    last_phase_transition_time: Timestamp | None = None
    """When the phase last changed."""
    used: list[str] | None = None
    """Parts of the prefix allocated to others."""


class Prefix(ApiModel):
    """A range of IP addresses, namespaced."""

    api_version: str | None = None
    kind: str | None = None
    metadata: ObjectMeta = Field(default_factory=ObjectMeta)
    """Standard object metadata: name, namespace, labels, annotations and what the server sets."""
    spec: PrefixSpec = Field(default_factory=PrefixSpec)
    """Desired state of the Prefix."""
    status: PrefixStatus | None = None
    """Observed state of the Prefix. Read-only for users."""


class PrefixTemplate(ApiModel):
    """Labels, annotations and spec of an ephemeral Prefix (``NetworkInterface.spec.ips[].ephemeral``)."""

    metadata: ObjectMeta | None = None
    """Labels and annotations of the Prefix made from the template."""
    spec: PrefixSpec = Field(default_factory=PrefixSpec)
    """Spec of the Prefix made from the template."""
