"""What identifies one served resource type: its group, version, kind, names, scope and model.

Each kind's strategy (:mod:`ironpool.api.strategies`) declares its :class:`ResourceInfo`;
:mod:`ironpool.api.resources` collects them into the table every layer looks kinds up in, with a
copy of each under every alias of its group (:mod:`ironpool.api.group_aliases`): such a copy names its
paths and apiVersion by the alias and its store keys by the group it is an alias of.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the client's raw calls use a ResourceInfo without loading pydantic
    from pydantic import BaseModel


@dataclass(frozen=True)
class ResourceInfo:
    """One served resource type."""

    group: str  # "" for the core group
    version: str
    kind: str
    plural: str
    singular: str
    short_names: tuple[str, ...]
    namespaced: bool
    model: type[BaseModel]
    has_status: bool
    # The resource this one serves under an alias group (None: a resource of its own group). Left out
    # of equality and hashing: the group tells the two apart.
    alias_of: ResourceInfo | None = field(default=None, compare=False, repr=False)

    @cached_property  # read on every validation and lookup
    def api_version(self) -> str:
        """``compute.ironcore.dev/v1alpha1``, or ``v1`` for the core group."""
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def canonical(self) -> ResourceInfo:
        """The resource as stored: itself, or the one it is an alias of."""
        return self.alias_of or self

    @cached_property  # read on every store key
    def _store_group(self) -> str:
        return self.canonical.group or "core"

    @property
    def group_resource(self) -> str:
        """``machines.compute.ironcore.dev`` (``secrets`` for core), as Kubernetes names it."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def qualified_kind(self) -> str:
        """``Machine.compute.ironcore.dev`` (``Secret`` for core), used in error messages."""
        return f"{self.kind}.{self.group}" if self.group else self.kind

    def key(self, namespace: str | None, name: str) -> str:
        """The store key of one object (an alias's objects are its canonical resource's)."""
        ns = (namespace or "_") if self.namespaced else "_"
        return f"/registry/{self._store_group}/{self.plural}/{ns}/{name}"

    def prefix(self, namespace: str | None) -> str:
        """The store key prefix of all objects in ``namespace`` (``None``: every namespace)."""
        base = f"/registry/{self._store_group}/{self.plural}/"
        if not self.namespaced:
            return base + "_/"
        return base if namespace is None else f"{base}{namespace}/"

    def namespace_of_key(self, key: str) -> str | None:
        """The namespace part of one of this resource's store keys (None for cluster-scoped kinds)."""
        if not self.namespaced:
            return None
        return key[len(self.prefix(None)) :].partition("/")[0]

    def path(self, namespace: str | None, name: str | None = None) -> str:
        """The REST path of the collection, or of one object when ``name`` is given."""
        root = f"/apis/{self.group}/{self.version}" if self.group else f"/api/{self.version}"
        if self.namespaced and namespace is not None:
            root = f"{root}/namespaces/{namespace}"
        root = f"{root}/{self.plural}"
        return root if name is None else f"{root}/{name}"
