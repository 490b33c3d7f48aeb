"""Kubernetes object semantics on top of the store, the same for every kind.

The store keeps versioned JSON; the registry adds what the API promises: uid, creationTimestamp,
generation (bumped only when the desired state changes), resourceVersion preconditions, finalizers
and deletionTimestamp, generateName, dry runs, field ownership (``managedFields``, server-side
apply; :mod:`.fieldmanager`), merge and strategic merge patches, and Kubernetes ``Status`` errors
for the store's (the per-object rules of a write: :mod:`.objectmeta`). What differs per kind comes
from its strategy (:mod:`ironpool.api.strategies`) through :mod:`ironpool.api.validation`; what
may refuse a write besides validation is the admission chain (:mod:`ironpool.apiserver.admission`).
A subresource's writes go through the same loop with its handler's rules (:mod:`.subresources`:
the status written apart from the rest, a binding, an eviction).

One write, in order (Kubernetes' ``BeforeCreate``/``GuaranteedUpdate``):

1. the body is checked against the path (kind, namespace, name);
2. admission ``admit`` (may read: is the namespace alive?);
3. server-owned metadata is set or carried over, once;
4. the authorizer's condition on the stored object (:data:`~ironpool.apiserver.auth.ObjectCheck`);
5. validation and defaulting by the kind's strategy;
6. admission ``validate`` (synchronous), then admission ``guard`` around the store write: plugins
   that must hold across apiservers (capacity) attach guard keys the write commits with;
7. the observers (admission plugins, the namespace controller) are told what was committed.

Updates and deletes run steps 2-6 in one read-modify-write loop (:mod:`.read_modify_write`),
written once: a concurrent writer's newer revision makes the loop read again and retry, unless the
client pinned a resourceVersion, which makes it a 409 as in Kubernetes (within one apiserver the
read-modify-writes of one object queue on a lock, :mod:`.keylocks`, so they rarely lose). A guard
key that moved (``GuardConflict``: another write changed the state admission decided on) is retried
in any case: the client's object did not change. Creates retry that way too.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any, Literal, Protocol

import orjson

from ironpool.api import errors
from ironpool.api.merge_patch import apply_merge_patch
from ironpool.api.meta import now_rfc3339
from ironpool.api.resource_info import ResourceInfo
from ironpool.api.resources import strategy_for
from ironpool.api.validation import validate_create
from ironpool.apiserver.admission import AdmissionChain, AdmissionPlugin, Attributes, default_chain
from ironpool.apiserver.auth.interface import ObjectCheck
from ironpool.apiserver.registry.fieldmanager import (
    apply_ownership,
    field_set,
    merge_configuration,
    track_create,
)
from ironpool.apiserver.registry.json_patch import apply_json_patch, parse_json_patch
from ironpool.apiserver.registry.keylocks import KeyLocks
from ironpool.apiserver.registry.list_stream import StreamedList, open_list
from ironpool.apiserver.registry.listing import (
    ListOptions,
    parse_resource_version,
    revision_of,
)
from ironpool.apiserver.registry.listing import watch as watch_store
from ironpool.apiserver.registry.managed_fields import FieldSet, store_entries
from ironpool.apiserver.registry.objectmeta import (
    Prepare,
    already_exists,
    check_object_size,
    conflict,
    delete_preconditions,
    new_name,
    not_found,
    prepare_update,
    request_object,
    stamp_new,
    tracked,
)
from ironpool.apiserver.registry.read_modify_write import (
    GuardRetries,
    Unconfirmed,
    read_modify_write,
    too_many_writers,
)
from ironpool.apiserver.registry.schemas import shape_of
from ironpool.apiserver.registry.strategic_patch import apply_strategic_patch
from ironpool.apiserver.registry.subresources import HANDLERS
from ironpool.store.interface import Document, GuardConflict, KeyExists, Store

PatchKind = Literal["merge", "strategic", "json"]


class CommitObserver(Protocol):
    """Told of every committed write: ``doc`` as stored, or None when ``key`` was removed."""

    def committed(self, info: ResourceInfo, key: str, doc: Document | None) -> None: ...


class Registry:
    """CRUD, list and watch of API objects with Kubernetes semantics, over one :class:`Store`."""

    def __init__(self, store: Store, admission: AdmissionChain | None = None) -> None:
        self.store = store
        self.admission = admission if admission is not None else default_chain(store)
        self.observers: list[CommitObserver] = [
            p for p in self.admission.plugins if type(p).committed is not AdmissionPlugin.committed
        ]
        self._key_locks = KeyLocks()  # read-modify-writes of one object queue here (see .keylocks)

    def _committed(self, info: ResourceInfo, key: str, doc: Document | None) -> None:
        for observer in self.observers:
            observer.committed(info, key, doc)

    async def _current(self, info: ResourceInfo, namespace: str | None, name: str,
                       fresh: bool = True) -> Document:
        """The stored object (``fresh``: read now; else maybe stale, see :mod:`.read_modify_write`)."""
        key = info.key(namespace, name)
        obj = await (self.store.get(key) if fresh else self.store.get_recent(key))
        if obj is None:
            raise not_found(info, name)
        return obj

    async def remove(self, info: ResourceInfo, namespace: str | None, name: str, revision: int,
                     old: Document | None = None) -> Document:
        """Remove an object whose deletion is complete (its last finalizer is gone, or a controller
        finalized it); ``old`` is the object at ``revision`` when the caller has it (admission's
        guards release what it held). Raises the store's KeyNotFound, RevisionConflict and
        GuardConflict."""
        key = info.key(namespace, name)
        await self.admission.ready()
        async with self.admission.guarded(Attributes("DELETE", info, namespace, name, old, None)) as guarded:
            removed = await self.store.delete(key, expected_revision=revision, guards=guarded.guards)
            guarded.revision = revision_of(removed)
        self._committed(info, key, None)
        return removed

    # -- create --------------------------------------------------------------------------------

    async def create(
        self,
        info: ResourceInfo,
        namespace: str | None,
        body: Any,
        *,
        dry_run: bool = False,
        check: ObjectCheck | None = None,
        manager: str | None = None,
        applied: FieldSet | None = None,
    ) -> Document:
        """POST: a new object; ``manager`` owns its fields (``applied``: the fields of an apply
        configuration, owned as an Apply)."""
        obj = request_object(info, body, namespace, None)
        name = new_name(info, obj)
        ns = obj["metadata"].get("namespace")
        await self.admission.admit(Attributes("CREATE", info, ns, name, None, obj, dry_run=dry_run))
        stamp_new(info, obj)
        if check is not None:
            await check(None, obj, self.store)  # authorization answers before validation (Kubernetes)
        obj = validate_create(info, obj)
        if manager is not None:
            track_create(info, obj, manager, applied)
        check_object_size(info.kind, name, obj)
        key = info.key(ns, name)
        await self.admission.ready()
        attrs = Attributes("CREATE", info, ns, name, None, obj, dry_run=dry_run)
        retries = GuardRetries()
        while True:
            # Admission's check, then the write with no suspension in between (see .admission).
            self.admission.validate(attrs)
            try:
                async with self.admission.guarded(attrs) as guarded:
                    if dry_run:
                        if await self.store.get(key) is not None:
                            raise already_exists(info, name)
                        return obj
                    try:
                        created = await self.store.create(key, obj, guards=guarded.guards)
                    except KeyExists:
                        raise already_exists(info, name) from None
                    guarded.revision = revision_of(created)
                break
            except GuardConflict:
                if not await retries.again():  # the state admission decided on moved: decide again
                    raise too_many_writers(info, name) from None
        self._committed(info, key, created)
        return created

    # -- read ----------------------------------------------------------------------------------

    async def get_raw(self, info: ResourceInfo, namespace: str | None, name: str) -> bytes:
        raw = await self.store.get_raw(info.key(namespace, name))
        if raw is None:
            raise not_found(info, name)
        return raw

    async def list_stream(self, info: ResourceInfo, namespace: str | None,
                          options: ListOptions) -> StreamedList:
        """A list (or a page of it) as stored JSON, its first page read, the rest read as it is
        written (:func:`.list_stream.open_list`)."""
        return await open_list(self.store, info, namespace, options)

    def watch(
        self, info: ResourceInfo, namespace: str | None, options: ListOptions,
        initial: Callable[[], AbstractAsyncContextManager[None]] | None = None,
    ) -> AsyncIterator[tuple[str, Document | None, bytes | None, int]]:
        """Changes after the requested revision (see :func:`.listing.watch`)."""
        return watch_store(self.store, info, namespace, options, initial)

    # -- update --------------------------------------------------------------------------------

    async def update(
        self,
        info: ResourceInfo,
        namespace: str | None,
        name: str,
        body: Any,
        *,
        subresource: str | None = None,
        dry_run: bool = False,
        check: ObjectCheck | None = None,
        manager: str | None = None,
    ) -> Document:
        """PUT: replace the object (or, with a ``subresource``, what its handler lets it write: the
        status)."""
        new = request_object(info, body, namespace, name)
        expected = parse_resource_version(new["metadata"].get("resourceVersion"))
        mutate, ownership = tracked(info, manager, subresource, lambda old: new)
        return await self.modify(info, namespace, name, mutate, expected=expected, subresource=subresource,
                                 dry_run=dry_run, check=check, ownership=ownership,
                                 prepare=_prepare_of(info, subresource))

    async def patch(
        self,
        info: ResourceInfo,
        namespace: str | None,
        name: str,
        patch: Any,
        *,
        subresource: str | None = None,
        dry_run: bool = False,
        check: ObjectCheck | None = None,
        manager: str | None = None,
        kind: PatchKind = "merge",
    ) -> Document:
        """PATCH with a JSON merge patch (RFC 7386), a strategic merge patch or a JSON patch (RFC
        6902) (``subresource`` as for :meth:`update`). A patch that sets ``metadata.resourceVersion``
        makes it a precondition, as in Kubernetes."""
        if kind == "json":
            ops = parse_json_patch(patch)

            def patched(old: Document) -> Document:
                new = request_object(info, apply_json_patch(old, ops), namespace, name)
                sent = new["metadata"].get("resourceVersion")
                if sent and parse_resource_version(sent) != revision_of(old):
                    raise conflict(info, name)
                return new

            expected = None
        else:
            if not isinstance(patch, dict):
                raise errors.BadRequest(f"a {kind} merge patch must be a JSON object")
            patch_meta = patch.get("metadata")
            expected = parse_resource_version(
                patch_meta.get("resourceVersion") if isinstance(patch_meta, dict) else None
            )

            def patched(old: Document) -> Document:
                if kind == "strategic":
                    merged = apply_strategic_patch(old, patch, shape_of(info))
                else:
                    merged = apply_merge_patch(orjson.loads(orjson.dumps(old)), patch)
                return request_object(info, merged, namespace, name)

        mutate, ownership = tracked(info, manager, subresource, patched)
        return await self.modify(info, namespace, name, mutate, expected=expected, subresource=subresource,
                                 dry_run=dry_run, check=check, ownership=ownership,
                                 prepare=_prepare_of(info, subresource))

    async def apply(
        self,
        info: ResourceInfo,
        namespace: str | None,
        name: str,
        config: Any,
        *,
        manager: str,
        force: bool = False,
        subresource: str | None = None,
        dry_run: bool = False,
        check: ObjectCheck | None = None,
        may_create: Callable[[], ObjectCheck | None] | None = None,
    ) -> Document:
        """Server-side apply of ``config`` by ``manager`` (see :mod:`.fieldmanager`): creates the
        object if it does not exist, once ``may_create`` (the authorizer's say on a create: raises
        Forbidden, or returns its condition) allows it (``subresource`` as for :meth:`update`; a
        subresource is never created)."""
        if not isinstance(config, dict):
            raise errors.BadRequest("an apply configuration must be an object")
        config = request_object(info, config, namespace, name)
        if subresource is None and await self.store.get(info.key(namespace, name)) is None:
            create_check = may_create() if may_create is not None else check
            try:
                return await self.create(info, namespace, orjson.loads(orjson.dumps(config)), dry_run=dry_run,
                                         check=create_check, manager=manager, applied=field_set(config, info))
            except errors.AlreadyExists:
                pass  # created meanwhile: apply to it
        def merged(old: Document) -> Document:
            return request_object(info, merge_configuration(info, old, config, manager, subresource),
                                  namespace, name)

        def owned(old: Document, new: Document) -> None:
            # Judged on the object as it will be stored (defaulted, canonical), as Kubernetes does.
            store_entries(new, apply_ownership(info, old, new, config, manager, force, subresource))

        return await self.modify(info, namespace, name, merged, expected=None, subresource=subresource,
                                 dry_run=dry_run, check=check, ownership=owned,
                                 prepare=_prepare_of(info, subresource))

    async def modify(
        self,
        info: ResourceInfo,
        namespace: str | None,
        name: str,
        mutate: Callable[[Document], Document],
        *,
        expected: int | None,
        subresource: str | None,
        dry_run: bool = False,
        check: ObjectCheck | None = None,
        ownership: Callable[[Document, Document], None] | None = None,
        prepare: Prepare | None = None,
    ) -> Document:
        """One read-modify-write (Kubernetes' ``GuaranteedUpdate``): ``mutate`` the stored object,
        make the object to store of it (``prepare``; :func:`.objectmeta.prepare_update` unless a
        subresource's handler gives its own), record field ownership (``ownership``), admit it and
        store it if it changed. ``subresource`` is what admission and field ownership are told."""
        key = info.key(namespace, name)
        strategy = strategy_for(info)
        await self.admission.ready()

        async def attempt(fresh: bool) -> Document:
            old = await self._current(info, namespace, name, fresh)
            old_rev = revision_of(old)
            if expected is not None and expected != old_rev:
                raise conflict(info, name)
            new = mutate(old)
            await self.admission.admit(
                Attributes("UPDATE", info, namespace, name, old, new, subresource, dry_run)
            )
            try:
                obj = prepare_update(info, old, new) if prepare is None else prepare(old, new)
            except errors.Invalid:
                if check is not None:
                    # Authorization answers before validation (as in Kubernetes): judge the request
                    # as sent, so a refused identity learns nothing from validation errors.
                    await check(old, new, self.store)
                raise
            if check is not None:
                await check(old, obj, self.store)
            if ownership is not None:
                ownership(old, obj)
            if obj == old:
                if not fresh:
                    raise Unconfirmed  # the stored object may differ from this read
                return old  # nothing changed: no write, no new resourceVersion (as Kubernetes)
            m = obj["metadata"]
            if (
                m.get("deletionTimestamp")
                and not m.get("finalizers")
                and not strategy.finalized_by_controller
            ):
                # The last finalizer of an object being deleted is gone: remove it.
                return obj if dry_run else await self.remove(info, namespace, name, old_rev, old)
            check_object_size(info.kind, name, obj)
            # Admission's check, then the write with no await in between (see .admission).
            attrs = Attributes("UPDATE", info, namespace, name, old, obj, subresource, dry_run)
            self.admission.validate(attrs)
            async with self.admission.guarded(attrs) as guarded:
                if dry_run:
                    return obj
                updated = await self.store.update(key, obj, expected_revision=old_rev, guards=guarded.guards)
                guarded.revision = revision_of(updated)
            self._committed(info, key, updated)
            return updated

        async with self._key_locks.hold(key):
            return await read_modify_write(info, name, expected is not None, attempt,
                                         fresh=dry_run or not self.store.recent_may_be_stale)

    # -- delete --------------------------------------------------------------------------------

    async def delete(
        self,
        info: ResourceInfo,
        namespace: str | None,
        name: str,
        options: Any = None,
        *,
        dry_run: bool = False,
        check: ObjectCheck | None = None,
    ) -> Document:
        """DELETE: remove the object, or with finalizers (or a finalizing controller) set its
        deletionTimestamp and return it."""
        expected_rv, expected_uid = delete_preconditions(options)
        key = info.key(namespace, name)
        strategy = strategy_for(info)
        await self.admission.ready()
        # As in Kubernetes, a delete is admitted before the object is read and validated with it.
        await self.admission.admit(Attributes("DELETE", info, namespace, name, None, None, dry_run=dry_run))

        async def attempt(fresh: bool) -> Document:
            old = await self._current(info, namespace, name, fresh)
            old_rev = revision_of(old)
            m = old["metadata"]
            if (expected_rv is not None and expected_rv != old_rev) or (
                expected_uid is not None and expected_uid != m.get("uid")
            ):
                raise conflict(info, name)
            if check is not None:
                await check(old, None, self.store)
            self.admission.validate(Attributes("DELETE", info, namespace, name, old, None, dry_run=dry_run))
            if not m.get("finalizers") and not strategy.finalized_by_controller:
                return old if dry_run else await self.remove(info, namespace, name, old_rev, old)
            if m.get("deletionTimestamp"):
                return old
            marked = {**old, "metadata": {**m, "deletionTimestamp": now_rfc3339()}}
            strategy.prepare_for_delete(marked)
            if dry_run:
                return marked
            attrs = Attributes("UPDATE", info, namespace, name, old, marked)
            async with self.admission.guarded(attrs) as guarded:
                marked = await self.store.update(key, marked, expected_revision=old_rev,
                                                 guards=guarded.guards)
                guarded.revision = revision_of(marked)
            self._committed(info, key, marked)
            return marked

        async with self._key_locks.hold(key):
            # Always a fresh read: a delete may answer without a write (deletionTimestamp set already).
            return await read_modify_write(info, name, expected_rv is not None, attempt, fresh=True)


def _prepare_of(info: ResourceInfo, subresource: str | None) -> Prepare | None:
    """What makes the object to store for an update or patch of ``subresource``: its handler's
    rules (the status handler's: only the status changes), or None for the main resource's."""
    if subresource is None:
        return None
    return functools.partial(HANDLERS[subresource].prepare, info)
