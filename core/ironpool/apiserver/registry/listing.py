"""Reads of collections: list pages (``limit``/``continue``, selectors) and watches.

A list is served from the store's JSON without decoding when no selector applies, and a continue
token pins the first page's revision, so a paged list is one consistent snapshot (as etcd gives
Kubernetes). A watch starts from a list (no resourceVersion) or a revision, and with selectors
reports objects entering and leaving the selection as ADDED and DELETED.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any

import orjson

from ironpool.api import errors
from ironpool.api.resource_info import ResourceInfo
from ironpool.api.selectors import parse_field_selector, parse_label_selector
from ironpool.store.interface import Document, RevisionCompacted, Store, StoreEvent


def revision_of(obj: Document) -> int:
    """The store revision of a stored object (its resourceVersion)."""
    return int(obj["metadata"]["resourceVersion"])


MAX_REVISION = 2**63 - 1  # revisions are int64, in etcd and in SQLite
FUTURE_REVISION_WAIT = 3.0  # how long a read at a revision not reached yet waits (Kubernetes: 3 s)
EXACT, NOT_OLDER_THAN = "Exact", "NotOlderThan"


def parse_resource_version(value: Any, what: str = "metadata.resourceVersion") -> int | None:
    """A client-supplied resourceVersion as an int (None when empty); 400 if it is not a number."""
    if value is None or value == "":
        return None
    try:
        rev = int(str(value))
    except ValueError:
        raise errors.BadRequest(f"{what}: {value!r} is not a valid resourceVersion") from None
    if not 0 <= rev <= MAX_REVISION:
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
    resource_version_match: str = ""
    send_initial_events: bool | None = None  # a watch starts with the current objects, then a bookmark
    allow_watch_bookmarks: bool = False

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

    def validate(self, watch: bool) -> int | None:
        """The requested revision (None: the latest), after Kubernetes' checks of the options
        (``ValidateListOptions``): 400 for a resourceVersion that is not one, 422 naming the option
        for combinations Kubernetes forbids."""
        revision = parse_resource_version(self.resource_version, "resourceVersion")
        match, initial = self.resource_version_match, self.send_initial_events is not None
        forbidden: list[tuple[str, str]] = []
        supported: tuple[str, ...] = (NOT_OLDER_THAN,) if watch else (EXACT, NOT_OLDER_THAN)
        if watch and initial and match != NOT_OLDER_THAN:
            forbidden.append(("resourceVersionMatch",
                              f"sendInitialEvents requires setting resourceVersionMatch to {NOT_OLDER_THAN}"))
        if watch and initial and not self.allow_watch_bookmarks:
            forbidden.append(("allowWatchBookmarks", "allowWatchBookmarks must be set to true when "
                                                     "sendInitialEvents is set"))
        if watch and match and not initial:
            forbidden.append(("resourceVersionMatch", "resourceVersionMatch is forbidden for watch unless "
                                                      "sendInitialEvents is provided"))
        if not watch and initial:
            forbidden.append(("sendInitialEvents", "sendInitialEvents is forbidden for list"))
        if not watch and match and not self.resource_version:
            forbidden.append(("resourceVersionMatch", "resourceVersionMatch is forbidden unless "
                                                      "resourceVersion is provided"))
        if not watch and match == EXACT and revision == 0:
            forbidden.append(("resourceVersionMatch", 'resourceVersionMatch "exact" is forbidden for '
                                                      'resourceVersion "0"'))
        if match and self.continue_token:
            forbidden.append(("resourceVersionMatch", "resourceVersionMatch is forbidden when continue is "
                                                      "provided"))
        causes = [errors.Cause(f, f"Forbidden: {m}", "FieldValueForbidden") for f, m in forbidden]
        if match and match not in supported:
            values = ", ".join(f'"{v}"' for v in supported)
            causes.append(errors.Cause("resourceVersionMatch", f'Unsupported value: "{match}": supported '
                                       f"values: {values}", "FieldValueNotSupported"))
        if causes:
            raise errors.Invalid(
                "ListOptions.meta.k8s.io is invalid: " + ", ".join(f"{c.field}: {c.message}" for c in causes),
                kind="ListOptions", group="meta.k8s.io", causes=causes)
        if not watch and self.continue_token and revision:
            raise errors.BadRequest("specifying resource version is not allowed when using continue")
        return revision


class TooLargeResourceVersion(errors.ApiError):
    """504: a read at a revision the store has not reached."""

    code = 504
    reason = "Timeout"


async def wait_for_revision(store: Store, revision: int) -> int:
    """The store's revision once it reaches ``revision``: wait a little for one this apiserver has
    not seen yet (another apiserver may have written it), then answer 504 as Kubernetes does ("Too
    large resource version")."""
    deadline = time.monotonic() + FUTURE_REVISION_WAIT
    while (current := await store.current_revision()) < revision:
        if time.monotonic() >= deadline:
            raise TooLargeResourceVersion(
                f"Too large resource version: {revision}, current: {current}", retry_after_seconds=1,
                causes=[errors.Cause("resourceVersion", "Too large resource version",
                                     "ResourceVersionTooLarge")],
            )
        await asyncio.sleep(0.05)
    return current


@dataclass(frozen=True)
class ListPage:
    """One page of a list as the store's JSON: the items, and the list's ``metadata``."""

    items: list[bytes]
    metadata: dict[str, Any]


async def list_page(
    store: Store, info: ResourceInfo, namespace: str | None, options: ListOptions
) -> ListPage:
    """One page of objects, with ``resourceVersion`` and (when more follow) ``continue``."""
    requested = options.validate(watch=False)
    predicate = options.predicate()
    prefix = info.prefix(namespace)
    start_after: str | None = None
    revision: int | None = None
    if options.continue_token:
        start_after, revision = decode_continue(options.continue_token)
        if not start_after.startswith(prefix):
            raise errors.BadRequest("continue: the token belongs to a different list")
        if revision <= 0 or revision > await store.current_revision():
            raise errors.BadRequest("continue: the token names a revision this server never had")
    elif requested:  # "0" (or none) is any revision: the latest serves it
        await wait_for_revision(store, requested)
        if options.resource_version_match == EXACT:
            revision = requested
    if options.limit < 0:
        raise errors.BadRequest("limit: must not be negative")
    try:
        if predicate is None:
            # The common case needs no decoding: the stored JSON is spliced into the response.
            raw = await store.list_raw(
                prefix, limit=options.limit, start_after=start_after, revision=revision
            )
            revision, more, items = raw.revision, raw.more, raw.items
            last = orjson.loads(items[-1])["metadata"] if more and items else None
        else:
            matched, revision, more = await filtered(store, prefix, predicate, limit=options.limit,
                                                     start_after=start_after, revision=revision)
            items = [data for data, _ in matched]
            last = matched[-1][1]["metadata"] if more and matched else None
    except RevisionCompacted:
        if not options.continue_token:
            raise errors.Expired(f"too old resource version: {revision} (the history before it has been "
                                 "compacted)") from None
        raise errors.Expired(
            "the continue token has expired: the list's revision was compacted; restart the list"
        ) from None
    list_meta: dict[str, Any] = {"resourceVersion": str(revision)}
    if last is not None:
        list_meta["continue"] = encode_continue(info.key(last.get("namespace"), last["name"]), revision)
    return ListPage(items, list_meta)


FILTER_CHUNK = 100  # objects decoded and matched between two turns of the event loop (a few ms)


async def filtered(store: Store, prefix: str, predicate: Callable[[Document], bool], *, limit: int = 0,
                   start_after: str | None = None, revision: int | None = None,
                   ) -> tuple[list[tuple[bytes, Document]], int, bool]:
    """The objects under ``prefix`` that ``predicate`` selects (as stored JSON and decoded), the
    revision read at, and whether more follow past ``limit``. The rows are read at once (one
    consistent snapshot); decoding and matching, the costly part, hand the event loop over every
    :data:`FILTER_CHUNK` objects, so a large filtered list delays other requests (``/healthz``, a
    pool's heartbeat) by one chunk, not by the whole list."""
    raw = await store.list_raw(prefix, start_after=start_after, revision=revision)
    matched: list[tuple[bytes, Document]] = []
    more = False
    for i, data in enumerate(raw.items):
        if i and not i % FILTER_CHUNK:
            await asyncio.sleep(0)
        doc = orjson.loads(data)
        if predicate(doc):
            if limit and len(matched) >= limit:
                more = True
                break
            matched.append((data, doc))
    return matched, raw.revision, more


async def list_json(store: Store, info: ResourceInfo, namespace: str | None, options: ListOptions) -> bytes:
    """The ``<Kind>List`` JSON of one page."""
    page = await list_page(store, info, namespace, options)
    kind = f"{info.kind}List"
    head = orjson.dumps({"apiVersion": info.api_version, "kind": kind, "metadata": page.metadata})
    return head[:-1] + b',"items":[' + b",".join(page.items) + b"]}"


async def watch(
    store: Store, info: ResourceInfo, namespace: str | None, options: ListOptions,
    initial: Callable[[], AbstractAsyncContextManager[None]] | None = None,
) -> AsyncIterator[tuple[str, Document | None, bytes | None, int]]:
    """``(type, object, raw JSON, revision)`` for every change after the requested revision: the
    object as a document or as JSON, whichever is at hand (a large one in the store's history is
    only JSON, and is not decoded once per watcher just to be encoded again).

    Without a resourceVersion (or "0") the current objects come first as ADDED events, as in
    Kubernetes. With selectors an object that stops matching is reported DELETED and one that
    starts matching ADDED, so a client's cache of the selection stays exact. The work before the
    first change (the current objects, or the selection they make) is done inside ``initial()``
    (the user's seat, :mod:`ironpool.apiserver.serving.seats`).
    Raises errors.Expired when the revision has been compacted.
    """
    predicate = options.predicate()
    start = parse_resource_version(options.resource_version, "resourceVersion")
    prefix = info.prefix(namespace)
    matching: set[str] = set()
    try:
        async with (initial or contextlib.nullcontext)():
            if not start or options.send_initial_events:
                # With sendInitialEvents (client-go's streaming list) the state is at least as new
                # as the requested revision: the current one.
                start, current = await current_objects(store, info, prefix, predicate)
                async for data, obj in current:
                    if predicate is not None:
                        m = obj["metadata"]
                        matching.add(info.key(m.get("namespace"), m["name"]))
                    yield "ADDED", obj, data, revision_of(obj)
                if options.send_initial_events:
                    yield "BOOKMARK", initial_events_end(info, start), None, start
            elif predicate is not None:
                selected, _, _ = await filtered(store, prefix, predicate,
                                                revision=min(start, await store.current_revision()))
                matching = {info.key(o["metadata"].get("namespace"), o["metadata"]["name"])
                            for _, o in selected}
        events: AsyncIterator[StoreEvent] = aiter(store.watch(prefix, start))
        async for event in events:
            if predicate is None:
                yield event.type, None if event.raw is not None else event.object, event.raw, event.revision
                continue
            was = event.key in matching
            obj = event.object
            now_matches = event.type != "DELETED" and predicate(obj)
            if now_matches:
                matching.add(event.key)
                yield ("MODIFIED" if was else "ADDED"), obj, event.raw, event.revision
            elif was:
                matching.discard(event.key)
                yield "DELETED", obj, event.raw, event.revision
    except RevisionCompacted:
        raise errors.Expired(
            f"too old resource version: {start} (the history before it has been compacted); relist"
        ) from None


INITIAL_PAGE = 32  # objects a watch's initial events read from the store at a time


async def current_objects(
    store: Store, info: ResourceInfo, prefix: str, predicate: Callable[[Document], bool] | None
) -> tuple[int, AsyncIterator[tuple[bytes, Document]]]:
    """The revision of now, and the objects under ``prefix`` at it that ``predicate`` selects (as
    stored JSON and decoded), read :data:`INITIAL_PAGE` at a time as they are taken: a watch whose
    client reads slowly (or not at all) holds one page, not the whole collection, decoded."""
    first = await store.list_raw(prefix, limit=INITIAL_PAGE)

    async def pages() -> AsyncIterator[tuple[bytes, Document]]:
        page = first
        while True:
            last: Document | None = None
            for data in page.items:
                last = orjson.loads(data)
                if predicate is None or predicate(last):
                    yield data, last
            if not page.more or last is None:
                return
            m = last["metadata"]
            page = await store.list_raw(prefix, limit=INITIAL_PAGE, revision=first.revision,
                                        start_after=info.key(m.get("namespace"), m["name"]))

    return first.revision, pages()


def initial_events_end(info: ResourceInfo, revision: int) -> Document:
    """The bookmark that ends the initial events of a streaming list (``k8s.io/initial-events-end``)."""
    meta = {"resourceVersion": str(revision), "annotations": {"k8s.io/initial-events-end": "true"}}
    return {"apiVersion": info.api_version, "kind": info.kind, "metadata": meta}
