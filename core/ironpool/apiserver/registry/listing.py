"""Reads of collections: the options of a list (``limit``/``continue``, selectors, resourceVersion)
and watches; the list itself is read and written as a stream (:mod:`.list_stream`).

A list is served from the store's JSON, never decoded and encoded again: without a selector as it is,
with one after matching each object mostly without decoding it (:mod:`.selection`). A continue
token pins the first page's revision, so a paged list is one consistent snapshot (as etcd gives
Kubernetes). A watch starts from a list (no resourceVersion) or a revision, and with selectors
reports objects entering and leaving the selection as ADDED and DELETED.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import time
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any

import orjson

from ironpool.api import errors
from ironpool.api.resource_info import ResourceInfo
from ironpool.apiserver.registry.selection import Selection
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

    def selection(self) -> Selection | None:
        """What the selectors select (None: everything); 400 for a malformed one."""
        return Selection.parse(self.label_selector, self.field_selector)

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
class ListStart:
    """Where a list starts, from its options: the objects' prefix, what selects them, the key it
    continues after, and the revision it reads at (None: the latest)."""

    prefix: str
    selection: Selection | None
    start_after: str | None
    revision: int | None


async def list_start(store: Store, info: ResourceInfo, namespace: str | None,
                     options: ListOptions) -> ListStart:
    """The options of a list checked (400/422 as Kubernetes answers them) and resolved against the
    store; waits for a requested revision this apiserver has not seen yet."""
    requested = options.validate(watch=False)
    selection = options.selection()
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
    return ListStart(prefix, selection, start_after, revision)


def expired(options: ListOptions, revision: int | None) -> errors.Expired:
    """The 410 of a list whose revision has been compacted."""
    if not options.continue_token:
        return errors.Expired(f"too old resource version: {revision} (the history before it has been "
                              "compacted)")
    return errors.Expired("the continue token has expired: the list's revision was compacted; "
                          "restart the list")


FILTER_SLICE = 0.001  # seconds of matching between two turns of the event loop


async def filtered(store: Store, prefix: str, selection: Selection, *, limit: int = 0,
                   start_after: str | None = None, revision: int | None = None,
                   ) -> tuple[list[bytes], int, bool]:
    """The objects under ``prefix`` that ``selection`` selects (as stored JSON), the revision read
    at, and whether more follow past ``limit``. The rows are read at once (one consistent snapshot);
    matching them, the costly part, hands the event loop over every :data:`FILTER_SLICE`, so a large
    filtered list delays other requests (``/healthz``, a pool's heartbeat) by about that much, not
    by the whole list. Time, not a count of objects, ends a slice: a document costs from
    microseconds (its labels read alone) to milliseconds (a large one decoded for a field selector)."""
    raw = await store.list_raw(prefix, start_after=start_after, revision=revision)
    matched: list[bytes] = []
    more = False
    clock = time.perf_counter
    turn_ends = clock() + FILTER_SLICE
    for data in raw.items:
        if clock() >= turn_ends:
            await asyncio.sleep(0)
            turn_ends = clock() + FILTER_SLICE
        if selection.matches_stored(data):
            if limit and len(matched) >= limit:
                more = True
                break
            matched.append(data)
    return matched, raw.revision, more


def list_head(api_version: str, kind: str, metadata: dict[str, Any]) -> bytes:
    """A ``<kind>List``'s JSON up to its first item (its items follow, separated by commas, then ``]}``)."""
    head = orjson.dumps({"apiVersion": api_version, "kind": f"{kind}List", "metadata": metadata})
    return head[:-1] + b',"items":['


def list_pieces(api_version: str, kind: str, metadata: dict[str, Any], items: Iterable[bytes]) -> list[bytes]:
    """The ``<kind>List`` JSON of ``items`` (each an object's JSON) as pieces that make it in order:
    a list of megabytes is written from its items as stored, never copied into one ``bytes``."""
    pieces = [list_head(api_version, kind, metadata)]
    for item in items:
        pieces += (item, b",")
    if len(pieces) > 1:
        pieces.pop()  # the last item's comma
    pieces.append(b"]}")
    return pieces


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
    selection = options.selection()
    start = parse_resource_version(options.resource_version, "resourceVersion")
    prefix = info.prefix(namespace)
    matching: set[str] = set()
    try:
        async with (initial or contextlib.nullcontext)():
            if not start or options.send_initial_events:
                # With sendInitialEvents (client-go's streaming list) the state is at least as new
                # as the requested revision: the current one.
                start, current = await current_objects(store, info, prefix, selection)
                async for data, obj in current:
                    if selection is not None:
                        m = obj["metadata"]
                        matching.add(info.key(m.get("namespace"), m["name"]))
                    yield "ADDED", obj, data, revision_of(obj)
                if options.send_initial_events:
                    yield "BOOKMARK", initial_events_end(info, start), None, start
            elif selection is not None:
                selected, _, _ = await filtered(store, prefix, selection,
                                                revision=min(start, await store.current_revision()))
                metas = (orjson.loads(data)["metadata"] for data in selected)
                matching = {info.key(m.get("namespace"), m["name"]) for m in metas}
        events: AsyncIterator[StoreEvent] = aiter(store.watch(prefix, start))
        async for event in events:
            if selection is None:
                yield event.type, None if event.raw is not None else event.object, event.raw, event.revision
                continue
            was = event.key in matching
            obj = event.object
            now_matches = event.type != "DELETED" and selection.matches(obj)
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
    store: Store, info: ResourceInfo, prefix: str, selection: Selection | None
) -> tuple[int, AsyncIterator[tuple[bytes, Document]]]:
    """The revision of now, and the objects under ``prefix`` at it that ``selection`` selects (as
    stored JSON and decoded), read :data:`INITIAL_PAGE` at a time as they are taken: a watch whose
    client reads slowly (or not at all) holds one page, not the whole collection, decoded."""
    first = await store.list_raw(prefix, limit=INITIAL_PAGE)

    async def pages() -> AsyncIterator[tuple[bytes, Document]]:
        page = first
        while True:
            for data in page.items:
                if selection is None or selection.matches_stored(data):
                    yield data, orjson.loads(data)
            if not page.more or not page.items:
                return
            m = orjson.loads(page.items[-1])["metadata"]  # where the next page starts
            page = await store.list_raw(prefix, limit=INITIAL_PAGE, revision=first.revision,
                                        start_after=info.key(m.get("namespace"), m["name"]))

    return first.revision, pages()


def initial_events_end(info: ResourceInfo, revision: int) -> Document:
    """The bookmark that ends the initial events of a streaming list (``k8s.io/initial-events-end``)."""
    meta = {"resourceVersion": str(revision), "annotations": {"k8s.io/initial-events-end": "true"}}
    return {"apiVersion": info.api_version, "kind": info.kind, "metadata": meta}
