"""Kubernetes object semantics on top of the store.

The store keeps versioned JSON; this layer adds what the API promises: uid, creationTimestamp,
generation (bumped only when the spec part changes), resourceVersion preconditions, finalizers and
deletionTimestamp, the status subresource (spec and status are written separately), generateName,
namespace checks, validation and dry runs. Store errors become Kubernetes ``Status`` errors here.
"""

from __future__ import annotations

import base64
import contextlib
import secrets
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import orjson

from ironpool.api import errors, validation
from ironpool.api.resources import RESOURCES, ResourceInfo, by_path
from ironpool.api.selectors import parse_field_selector, parse_label_selector
from ironpool.apiserver.admission import INDEXED_KINDS, CapacityIndex
from ironpool.store.interface import (
    Document,
    KeyExists,
    KeyNotFound,
    RevisionCompacted,
    RevisionConflict,
    Store,
    WatchEvent,
)

# Metadata the server owns: a client's values for these are ignored on create and update.
_SERVER_FIELDS = ("uid", "resourceVersion", "creationTimestamp", "deletionTimestamp", "generation")
# Namespaces that exist without an object (Kubernetes creates them at start-up).
_IMPLICIT_NAMESPACES = frozenset({"default"})
# Kubernetes' NamespaceLifecycle admission refuses to delete these; kube-system's uid is the cluster uid.
_UNDELETABLE_NAMESPACES = frozenset({"default", "kube-system"})
NAMESPACES = by_path("", "v1", "namespaces")
_GENERATE_ALPHABET = "bcdfghjklmnpqrstvwxz2456789"  # Kubernetes' generateName alphabet
_CONFLICT_RETRIES = 16

ObjectCheck = Callable[[Document | None, Document | None, Store], Awaitable[None]]
"""``check(old, new, store)``: an authorizer's condition on the stored object (``None`` on create)
and the object about to be written (``None`` on delete); raises Forbidden to refuse. It runs inside
the write's read-modify-write loop, so it sees the object the write applies to without another read.
"""


def now() -> str:
    """The current time as Kubernetes writes timestamps (RFC 3339, seconds, UTC)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def meta(obj: Document) -> dict[str, Any]:
    """``obj["metadata"]``, created if missing or not an object."""
    m = obj.get("metadata")
    if m is None:
        m = obj["metadata"] = {}
    elif not isinstance(m, dict):
        raise errors.Invalid(
            "metadata must be an object",
            causes=[
                errors.Cause(
                    "metadata", f"must be an object, not {type(m).__name__}", "FieldValueTypeInvalid"
                )
            ],
        )
    return m


def revision_of(obj: Document) -> int:
    return int(obj["metadata"]["resourceVersion"])


def parse_resource_version(value: Any, what: str = "metadata.resourceVersion") -> int | None:
    """A client-supplied resourceVersion as an int (None when empty); 400 if it is not a number."""
    if value is None or value == "":
        return None
    try:
        rev = int(str(value))
    except ValueError:
        raise errors.BadRequest(f"{what}: {value!r} is not a valid resourceVersion") from None
    if rev < 0:
        raise errors.BadRequest(f"{what}: {value!r} is not a valid resourceVersion")
    return rev


def encode_continue(key: str, revision: int) -> str:
    return base64.urlsafe_b64encode(orjson.dumps({"key": key, "rev": revision})).decode()


def decode_continue(token: str) -> tuple[str, int]:
    try:
        data = orjson.loads(base64.urlsafe_b64decode(token.encode()))
        return str(data["key"]), int(data["rev"])
    except (ValueError, KeyError, TypeError):
        raise errors.BadRequest(f"continue: {token!r} is not a valid continue token") from None


@dataclass(frozen=True)
class ListOptions:
    """The query parameters of a list or watch."""

    label_selector: str = ""
    field_selector: str = ""
    limit: int = 0
    continue_token: str = ""
    resource_version: str = ""

    def predicate(self) -> Callable[[Document], bool] | None:
        labels = parse_label_selector(self.label_selector) if self.label_selector else None
        fields = parse_field_selector(self.field_selector) if self.field_selector else None
        if labels is None and fields is None:
            return None

        def matches(obj: Document) -> bool:
            if labels is not None and not labels.matches(obj.get("metadata", {}).get("labels") or {}):
                return False
            return fields is None or bool(fields.matches(obj))

        return matches


class Registry:
    """CRUD, list and watch of API objects with Kubernetes semantics, over one :class:`Store`."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.capacity = CapacityIndex.for_store(store)

    # -- helpers -------------------------------------------------------------------------------

    @staticmethod
    def _not_found(info: ResourceInfo, name: str) -> errors.NotFound:
        return errors.NotFound(
            f'{info.plural}.{info.group or "core"} "{name}" not found',
            kind=info.plural,
            name=name,
            group=info.group,
        )

    async def _current(self, info: ResourceInfo, namespace: str | None, name: str) -> Document:
        obj = await self.store.get(info.key(namespace, name))
        if obj is None:
            raise self._not_found(info, name)
        return obj

    async def _check_namespace(self, info: ResourceInfo, namespace: str | None) -> None:
        if not info.namespaced or namespace in _IMPLICIT_NAMESPACES:
            return
        assert namespace is not None
        ns = await self.store.get(NAMESPACES.key(None, namespace))
        if ns is None:
            raise errors.NotFound(f'namespaces "{namespace}" not found', kind="namespaces", name=namespace)
        if ns["metadata"].get("deletionTimestamp"):
            raise errors.Forbidden(
                f"unable to create new content in namespace {namespace} because it is being terminated",
                kind="namespaces",
                name=namespace,
            )

    async def _remove(self, info: ResourceInfo, namespace: str | None, name: str, revision: int) -> Document:
        """Remove an object for good; the last one of a terminating namespace takes the namespace along."""
        removed = await self.store.delete(info.key(namespace, name), expected_revision=revision)
        self.capacity.committed(info, info.key(namespace, name), None)
        if info.namespaced and namespace is not None and namespace not in _IMPLICIT_NAMESPACES:
            await self._reap_namespace(namespace)
        return removed

    async def _namespace_empty(self, namespace: str) -> bool:
        for r in RESOURCES:
            if r.namespaced and (await self.store.list(r.prefix(namespace), limit=1)).items:
                return False
        return True

    async def _reap_namespace(self, namespace: str) -> None:
        """Remove a terminating namespace once it is empty and has no finalizers left."""
        key = NAMESPACES.key(None, namespace)
        for _ in range(_CONFLICT_RETRIES):
            ns = await self.store.get(key)
            if ns is None:
                return
            m = ns["metadata"]
            if (
                not m.get("deletionTimestamp")
                or m.get("finalizers")
                or not await self._namespace_empty(namespace)
            ):
                return
            try:
                await self.store.delete(key, expected_revision=revision_of(ns))
                return
            except KeyNotFound:
                return
            except RevisionConflict:
                continue  # the namespace changed meanwhile: look again

    async def _delete_namespace(
        self, name: str, expected_rv: int | None, expected_uid: str | None, dry_run: bool
    ) -> Document:
        """Mark the namespace Terminating, delete what it holds, and remove it once it is empty."""
        if name in _UNDELETABLE_NAMESPACES:
            raise errors.Forbidden(f'namespace "{name}" may not be deleted', kind="namespaces", name=name)
        key = NAMESPACES.key(None, name)
        for _ in range(_CONFLICT_RETRIES):
            ns = await self._current(NAMESPACES, None, name)
            rev = revision_of(ns)
            if (expected_rv is not None and expected_rv != rev) or (
                expected_uid is not None and expected_uid != ns["metadata"].get("uid")
            ):
                raise self._conflict(NAMESPACES, name)
            if ns["metadata"].get("deletionTimestamp"):
                break
            terminating = {
                **ns,
                "metadata": {**ns["metadata"], "deletionTimestamp": now()},
                "status": {**(ns.get("status") or {}), "phase": "Terminating"},
            }
            if dry_run:
                return terminating
            try:
                ns = await self.store.update(key, terminating, expected_revision=rev)
                break
            except RevisionConflict:
                if expected_rv is not None:
                    raise self._conflict(NAMESPACES, name) from None
        else:
            raise errors.Conflict(f"namespace {name!r}: too many concurrent writers, try again")
        if dry_run:
            return ns
        for r in RESOURCES:
            if not r.namespaced:
                continue
            for item in (await self.store.list(r.prefix(name))).items:
                with contextlib.suppress(errors.NotFound):  # removed meanwhile
                    await self.delete(r, name, item["metadata"]["name"])
        await self._reap_namespace(name)
        return ns

    @staticmethod
    def _check_identity(info: ResourceInfo, body: Any, namespace: str | None, name: str | None) -> Document:
        """The request body as an object of ``info``'s kind, in the path's namespace (and name)."""
        if not isinstance(body, dict):
            raise errors.BadRequest(f"the request body must be a JSON object ({info.kind})")
        api_version = body.setdefault("apiVersion", info.api_version)
        kind = body.setdefault("kind", info.kind)
        if api_version != info.api_version or kind != info.kind:
            raise errors.BadRequest(
                f"the body is {api_version}/{kind} but the path is for {info.api_version}/{info.kind}"
            )
        m = meta(body)
        if info.namespaced:
            body_ns = m.get("namespace")
            if body_ns and namespace and body_ns != namespace:
                raise errors.BadRequest(
                    f"the namespace of the object ({body_ns}) does not match the namespace of the request "
                    f"({namespace})"
                )
            m["namespace"] = body_ns or namespace
        else:
            m.pop("namespace", None)
        if name is not None and m.setdefault("name", name) != name:
            raise errors.BadRequest(
                f"the name of the object ({m.get('name')}) does not match the name in the path ({name})"
            )
        return body

    # -- create --------------------------------------------------------------------------------

    async def create(
        self,
        info: ResourceInfo,
        namespace: str | None,
        body: Any,
        *,
        dry_run: bool = False,
        check: ObjectCheck | None = None,
    ) -> Document:
        obj = self._check_identity(info, body, namespace, None)
        m = meta(obj)
        if info.namespaced and not m.get("namespace"):
            raise errors.Invalid(
                f"{info.kind}: metadata.namespace is required",
                kind=info.kind,
                causes=[errors.Cause("metadata.namespace", "Required value", "FieldValueRequired")],
            )
        if not m.get("name"):
            generate = m.get("generateName")
            if not generate:
                raise errors.Invalid(
                    f"{info.kind}: name or generateName is required",
                    kind=info.kind,
                    causes=[
                        errors.Cause(
                            "metadata.name", "name or generateName is required", "FieldValueRequired"
                        )
                    ],
                )
            m["name"] = str(generate) + "".join(secrets.choice(_GENERATE_ALPHABET) for _ in range(5))
        ns = m.get("namespace")
        await self._check_namespace(info, ns)
        for field in _SERVER_FIELDS:
            m.pop(field, None)
        if info.has_status:
            obj.pop("status", None)  # status is written through the status subresource only
        if check is not None:
            await check(None, obj, self.store)  # authorization answers before validation (Kubernetes)
        obj = validation.validate_create(info, obj)
        m = meta(obj)
        for field in _SERVER_FIELDS:
            m.pop(field, None)
        m["uid"] = str(uuid.uuid4())
        m["creationTimestamp"] = now()
        m["generation"] = 1
        key = info.key(ns, m["name"])
        if not self.capacity.loaded and info.kind in INDEXED_KINDS:
            await self.capacity.ready()
        # Check, then write with no suspension in between: SQLiteStore.create/update contain no
        # await, so awaiting them runs the write to completion before any other request runs.
        self.capacity.admit(info, None, obj)
        if dry_run:
            if await self.store.get(key) is not None:
                raise self._already_exists(info, m["name"])
            return obj
        try:
            created = await self.store.create(key, obj)
        except KeyExists:
            raise self._already_exists(info, m["name"]) from None
        self.capacity.committed(info, key, created)
        return created

    @staticmethod
    def _already_exists(info: ResourceInfo, name: str) -> errors.AlreadyExists:
        return errors.AlreadyExists(
            f'{info.plural}.{info.group or "core"} "{name}" already exists',
            kind=info.plural,
            name=name,
            group=info.group,
        )

    # -- read ----------------------------------------------------------------------------------

    async def get_raw(self, info: ResourceInfo, namespace: str | None, name: str) -> bytes:
        raw = await self.store.get_raw(info.key(namespace, name))
        if raw is None:
            raise self._not_found(info, name)
        return raw

    async def list(self, info: ResourceInfo, namespace: str | None, options: ListOptions) -> bytes:
        """The ``<Kind>List`` JSON of one page."""
        predicate = options.predicate()
        start_after: str | None = None
        revision: int | None = None
        if options.continue_token:
            start_after, revision = decode_continue(options.continue_token)
            if not start_after.startswith(info.prefix(namespace)):
                raise errors.BadRequest("continue: the token belongs to a different list")
            if revision <= 0 or revision > await self.store.current_revision():
                raise errors.BadRequest("continue: the token names a revision this server never had")
        if options.limit < 0:
            raise errors.BadRequest("limit: must not be negative")
        prefix = info.prefix(namespace)
        try:
            if predicate is None:
                # The common case needs no decoding: the stored JSON is spliced into the response.
                raw = await self.store.list_raw(
                    prefix, limit=options.limit, start_after=start_after, revision=revision
                )
                revision, more, items = raw.revision, raw.more, raw.items
                last = orjson.loads(items[-1])["metadata"] if more and items else None
            else:
                page = await self.store.list(
                    prefix,
                    limit=options.limit,
                    start_after=start_after,
                    revision=revision,
                    predicate=predicate,
                )
                revision, more, items = page.revision, page.more, [orjson.dumps(d) for d in page.items]
                last = page.items[-1]["metadata"] if more and page.items else None
        except RevisionCompacted:
            raise errors.Expired(
                "the continue token has expired: the list's revision was compacted; restart the list"
            ) from None
        list_meta: dict[str, Any] = {"resourceVersion": str(revision)}
        if last is not None:
            list_meta["continue"] = encode_continue(info.key(last.get("namespace"), last["name"]), revision)
        head = orjson.dumps(
            {"apiVersion": info.api_version, "kind": f"{info.kind}List", "metadata": list_meta}
        )
        return head[:-1] + b',"items":[' + b",".join(items) + b"]}"

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
    ) -> Document:
        """PUT: replace the object (or only its status, for ``subresource="status"``)."""
        new = self._check_identity(info, body, namespace, name)
        expected = parse_resource_version(meta(new).get("resourceVersion"))

        async def mutate(old: Document) -> Document:
            return new

        return await self._guaranteed_update(
            info, namespace, name, mutate, expected, subresource, dry_run, check
        )

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
    ) -> Document:
        """PATCH with a JSON merge patch (RFC 7386)."""
        from ironpool.api.merge_patch import apply_merge_patch

        if not isinstance(patch, dict):
            raise errors.BadRequest("a merge patch must be a JSON object")
        patch_meta = patch.get("metadata")
        expected = parse_resource_version(
            patch_meta.get("resourceVersion") if isinstance(patch_meta, dict) else None
        )

        async def mutate(old: Document) -> Document:
            patched = apply_merge_patch(orjson.loads(orjson.dumps(old)), patch)
            return self._check_identity(info, patched, namespace, name)

        return await self._guaranteed_update(
            info, namespace, name, mutate, expected, subresource, dry_run, check
        )

    async def _guaranteed_update(
        self,
        info: ResourceInfo,
        namespace: str | None,
        name: str,
        mutate: Callable[[Document], Any],
        expected: int | None,
        subresource: str | None,
        dry_run: bool,
        check: ObjectCheck | None = None,
    ) -> Document:
        """Read, apply, validate and write; retried when a concurrent writer wins (unless the client
        asked for a specific resourceVersion, then that is a 409)."""
        key = info.key(namespace, name)
        if not self.capacity.loaded and info.kind in INDEXED_KINDS:
            await self.capacity.ready()
        for _ in range(_CONFLICT_RETRIES):
            old = await self._current(info, namespace, name)
            old_rev = revision_of(old)
            if expected is not None and expected != old_rev:
                raise self._conflict(info, name)
            new = await mutate(old)
            try:
                obj = self._prepare_update(info, old, new, subresource)
            except errors.Invalid:
                if check is not None:
                    # Authorization answers before validation (as in Kubernetes): judge the request
                    # as sent, so a refused identity learns nothing from validation errors.
                    await check(old, new, self.store)
                raise
            if check is not None:
                await check(old, obj, self.store)
            if obj == old:
                return old  # nothing changed: no write, no new resourceVersion (as Kubernetes)
            m = meta(obj)
            if m.get("deletionTimestamp") and not m.get("finalizers") and info != NAMESPACES:
                # The last finalizer of an object being deleted is gone: remove it.
                if dry_run:
                    return obj
                try:
                    return await self._remove(info, namespace, name, old_rev)
                except RevisionConflict:
                    if expected is not None:
                        raise self._conflict(info, name) from None
                    continue
                except KeyNotFound:
                    raise self._not_found(info, name) from None
            # Capacity check, then the write with no await in between (atomic: see admission.py).
            self.capacity.admit(info, old, obj)
            if dry_run:
                return obj
            try:
                updated = await self.store.update(key, obj, expected_revision=old_rev)
                self.capacity.committed(info, key, updated)
                if info == NAMESPACES and m.get("deletionTimestamp"):
                    await self._reap_namespace(name)  # its own finalizers may have been the last hold
                return updated
            except RevisionConflict:
                if expected is not None:
                    raise self._conflict(info, name) from None
            except KeyNotFound:
                raise self._not_found(info, name) from None
        raise errors.Conflict(
            f"{info.plural} {name!r}: too many concurrent writers, try again",
            kind=info.plural,
            name=name,
            retry_after_seconds=1,
        )

    def _prepare_update(
        self, info: ResourceInfo, old: Document, new: Document, subresource: str | None
    ) -> Document:
        old_meta = old["metadata"]
        if subresource == "status":
            if not info.has_status:
                raise errors.NotFound(f"{info.plural} have no status subresource")
            candidate = dict(old)
            if "status" in new:
                candidate["status"] = new["status"]
            else:
                candidate.pop("status", None)
            validated = validation.validate_status_update(info, old, candidate)
            result = dict(old)
            if "status" in validated:
                result["status"] = validated["status"]
            else:
                result.pop("status", None)
            return result
        candidate = dict(new)
        new_meta = dict(meta(candidate))
        candidate["metadata"] = new_meta
        for field in _SERVER_FIELDS:
            if field in old_meta:
                new_meta[field] = old_meta[field]
            else:
                new_meta.pop(field, None)
        if info.has_status:
            # Writes to the main resource never change status (Kubernetes' status subresource rule).
            if "status" in old:
                candidate["status"] = old["status"]
            else:
                candidate.pop("status", None)
        if old_meta.get("deletionTimestamp"):
            added = set(new_meta.get("finalizers") or []) - set(old_meta.get("finalizers") or [])
            if added:
                raise errors.Invalid(
                    f"{info.kind} {old_meta['name']!r} is being deleted: no new finalizers may be added",
                    kind=info.kind,
                    name=old_meta["name"],
                    causes=[
                        errors.Cause(
                            "metadata.finalizers",
                            f"cannot add {sorted(added)} during deletion",
                            "FieldValueForbidden",
                        )
                    ],
                )
        validated = validation.validate_update(info, old, candidate)
        vmeta = meta(validated)
        for field in _SERVER_FIELDS:
            if field in old_meta:
                vmeta[field] = old_meta[field]
        if validation.spec_of(info, old) != validation.spec_of(info, validated):
            vmeta["generation"] = int(old_meta.get("generation") or 0) + 1
        return validated

    @staticmethod
    def _conflict(info: ResourceInfo, name: str) -> errors.Conflict:
        return errors.Conflict(
            f'Operation cannot be fulfilled on {info.plural}.{info.group or "core"} "{name}": the object has '
            "been modified; please apply your changes to the latest version and try again",
            kind=info.plural,
            name=name,
            group=info.group,
        )

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
        """DELETE: remove the object, or with finalizers set its deletionTimestamp and return it."""
        expected_rv: int | None = None
        expected_uid: str | None = None
        if options is not None:
            if not isinstance(options, dict):
                raise errors.BadRequest("the DELETE body must be a DeleteOptions object")
            pre = options.get("preconditions") or {}
            if not isinstance(pre, dict):
                raise errors.BadRequest("preconditions: must be an object")
            expected_rv = parse_resource_version(pre.get("resourceVersion"), "preconditions.resourceVersion")
            expected_uid = pre.get("uid") or None
        if info == NAMESPACES:
            if check is not None:
                await check(await self._current(info, namespace, name), None, self.store)
            return await self._delete_namespace(name, expected_rv, expected_uid, dry_run)
        key = info.key(namespace, name)
        if not self.capacity.loaded and info.kind in INDEXED_KINDS:
            await self.capacity.ready()
        for _ in range(_CONFLICT_RETRIES):
            old = await self._current(info, namespace, name)
            old_rev = revision_of(old)
            if (expected_rv is not None and expected_rv != old_rev) or (
                expected_uid is not None and expected_uid != old["metadata"].get("uid")
            ):
                raise self._conflict(info, name)
            if check is not None:
                await check(old, None, self.store)
            m = old["metadata"]
            try:
                if m.get("finalizers"):
                    if m.get("deletionTimestamp"):
                        return old
                    obj = dict(old)
                    obj["metadata"] = {**m, "deletionTimestamp": now()}
                    if dry_run:
                        return obj
                    marked = await self.store.update(key, obj, expected_revision=old_rev)
                    self.capacity.committed(info, key, marked)
                    return marked
                if dry_run:
                    return old
                return await self._remove(info, namespace, name, old_rev)
            except RevisionConflict:
                if expected_rv is not None:
                    raise self._conflict(info, name) from None
            except KeyNotFound:
                raise self._not_found(info, name) from None
        raise errors.Conflict(
            f"{info.plural} {name!r}: too many concurrent writers, try again", retry_after_seconds=1
        )

    # -- watch ---------------------------------------------------------------------------------

    async def watch(
        self, info: ResourceInfo, namespace: str | None, options: ListOptions
    ) -> AsyncIterator[tuple[str, Document, bytes | None, int]]:
        """``(type, object, raw JSON or None, revision)`` for every change after the requested revision.

        Without a resourceVersion (or "0") the current objects come first as ADDED events, as in
        Kubernetes. With selectors an object that stops matching is reported DELETED and one that
        starts matching ADDED, so a client's cache of the selection stays exact.
        Raises errors.Expired when the revision has been compacted.
        """
        predicate = options.predicate()
        start = parse_resource_version(options.resource_version, "resourceVersion")
        prefix = info.prefix(namespace)
        matching: set[str] = set()
        try:
            if not start:
                listed = await self.store.list(prefix, predicate=predicate)
                for obj in listed.items:
                    m = obj["metadata"]
                    matching.add(info.key(m.get("namespace"), m["name"]))
                    yield "ADDED", obj, None, revision_of(obj)
                start = listed.revision
            elif predicate is not None:
                listed = await self.store.list(
                    prefix, revision=min(start, await self.store.current_revision()), predicate=predicate
                )
                matching = {
                    info.key(o["metadata"].get("namespace"), o["metadata"]["name"]) for o in listed.items
                }
            events: AsyncIterator[WatchEvent] = aiter(self.store.watch(prefix, start))
            async for event in events:
                if predicate is None:
                    yield event.type, event.object, event.raw, event.revision
                    continue
                was = event.key in matching
                now_matches = event.type != "DELETED" and predicate(event.object)
                if now_matches:
                    matching.add(event.key)
                    yield ("MODIFIED" if was else "ADDED"), event.object, event.raw, event.revision
                elif was:
                    matching.discard(event.key)
                    yield "DELETED", event.object, event.raw, event.revision
        except RevisionCompacted:
            raise errors.Expired(
                f"too old resource version: {start} (the history before it has been compacted); relist"
            ) from None
