"""The admission contract: the attributes of a write, a plugin's hooks, and the chain that runs them
(see :mod:`ironpool.apiserver.admission`)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass, field
from typing import ClassVar, Literal

from ironpool.api.resource_info import ResourceInfo
from ironpool.store.interface import Document, Guard

Operation = Literal["CREATE", "UPDATE", "DELETE"]


@dataclass(frozen=True, slots=True)
class Attributes:
    """What a plugin sees of one write (Kubernetes' ``admission.Attributes``).

    ``old`` is the stored object (None on create, and when a delete is admitted: as in Kubernetes
    that happens before the object is read; its ``validate`` sees it), ``new`` the object to store
    (None on delete); ``subresource`` is ``"status"`` for status writes.
    """

    operation: Operation
    info: ResourceInfo
    namespace: str | None
    name: str
    old: Document | None
    new: Document | None
    subresource: str | None = None
    dry_run: bool = False


@dataclass(slots=True)
class Guarded:
    """The guard keys the plugins attach to one write (:meth:`AdmissionPlugin.guard`), and the
    revision it committed at once it did (None: not written, e.g. a dry run or a refusal)."""

    guards: list[Guard] = field(default_factory=list)
    revision: int | None = None


class AdmissionPlugin:
    """One admission plugin; every hook defaults to allowing and recording nothing."""

    #: How errors and logs name the plugin (Kubernetes' plugin names).
    name: ClassVar[str] = ""
    #: The kinds whose writes the plugin looks at; None for every kind.
    kinds: ClassVar[frozenset[str] | None] = None

    async def ready(self) -> None:
        """Prepare before the first write is admitted (e.g. build an index from the store)."""

    async def admit(self, attrs: Attributes) -> None:
        """Refuse (raise an ``ApiError``) before validation; may read the store."""

    def validate(self, attrs: Attributes) -> None:
        """Refuse (raise an ``ApiError``) right before the write; must not await (see the module)."""

    @contextlib.asynccontextmanager
    async def guard(self, attrs: Attributes, guarded: Guarded) -> AsyncIterator[None]:
        """Around the store write: read shared state (may await), refuse (raise an ``ApiError``) or
        append :class:`~ironpool.store.interface.Guard` keys to ``guarded.guards``; the write then
        carries them, so the decision holds for every apiserver over the store. The body is the
        write: afterwards ``guarded.revision`` tells whether it committed, and a
        :class:`~ironpool.store.interface.GuardConflict` raised from it means a guard moved (the
        registry reads and decides again). Locks a plugin takes here are held across the write."""
        yield

    def committed(self, info: ResourceInfo, key: str, doc: Document | None) -> None:
        """A write of ``key`` was committed (``doc`` as stored, None when the object was removed)."""


class AdmissionChain:
    """The plugins in order; a kind's writes visit only the plugins that declared the kind and
    implement the phase."""

    def __init__(self, plugins: Iterable[AdmissionPlugin]) -> None:
        self.plugins = tuple(plugins)
        self._admitters: dict[str, tuple[AdmissionPlugin, ...]] = {}
        self._validators: dict[str, tuple[AdmissionPlugin, ...]] = {}
        self._guards: dict[str, tuple[AdmissionPlugin, ...]] = {}
        self._ready = False
        self._lock = asyncio.Lock()

    def _for(self, kind: str, phase: str) -> tuple[AdmissionPlugin, ...]:
        """The plugins that look at ``kind`` and override ``phase`` (``admit``, ``validate``, ``guard``)."""
        cache = {"admit": self._admitters, "validate": self._validators, "guard": self._guards}[phase]
        plugins = cache.get(kind)
        if plugins is None:
            plugins = cache[kind] = tuple(
                p for p in self.plugins
                if (p.kinds is None or kind in p.kinds)
                and getattr(type(p), phase) is not getattr(AdmissionPlugin, phase)
            )
        return plugins

    async def ready(self) -> None:
        """Make every plugin ready, once (the first write pays for it)."""
        if self._ready:
            return
        async with self._lock:
            if not self._ready:
                for plugin in self.plugins:
                    await plugin.ready()
                self._ready = True

    async def admit(self, attrs: Attributes) -> None:
        for plugin in self._for(attrs.info.kind, "admit"):
            await plugin.admit(attrs)

    def validate(self, attrs: Attributes) -> None:
        for plugin in self._for(attrs.info.kind, "validate"):
            plugin.validate(attrs)

    @contextlib.asynccontextmanager
    async def guarded(self, attrs: Attributes) -> AsyncIterator[Guarded]:
        """Every plugin's :meth:`AdmissionPlugin.guard` around the write the body makes; the body
        sends ``guarded.guards`` with it and sets ``guarded.revision`` once it committed."""
        guarded = Guarded()
        plugins = self._for(attrs.info.kind, "guard")
        if not plugins:
            yield guarded
            return
        async with contextlib.AsyncExitStack() as stack:
            for plugin in plugins:
                await stack.enter_async_context(plugin.guard(attrs, guarded))
            yield guarded
