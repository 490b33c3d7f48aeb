"""Watch requests: the query checked before the stream starts (timeout, resourceVersion, selectors),
then the store's events streamed as Kubernetes watch events, with bookmarks, Tables and in-band
errors; through an alias group, every object in the group the request named (:mod:`.aliased`)."""

from __future__ import annotations

import asyncio
import functools
import logging
import math
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse

from ironpool.api import errors
from ironpool.api.resources import ResourceInfo
from ironpool.apiserver.endpoints.aliased import served_error, served_raw
from ironpool.apiserver.endpoints.bodies import JSON
from ironpool.apiserver.endpoints.metrics import Metrics
from ironpool.apiserver.endpoints.request_parsing import RequestInfo, list_options
from ironpool.apiserver.endpoints.tables import TableWriter, include_object, table_version, writer_for
from ironpool.apiserver.registry.generic import Registry
from ironpool.apiserver.registry.listing import ListOptions, wait_for_revision
from ironpool.apiserver.serving.seats import Seats
from ironpool.apiserver.serving.watch_slots import HeldStream, WatchSlots
from ironpool.store.interface import Store

log = logging.getLogger("ironpool.apiserver")
#: what the registry's watch yields: (type, object or None, its JSON or None, revision)
Event = tuple[str, dict[str, Any] | None, bytes | None, int]

DEFAULT_WATCH_TIMEOUT = 1800.0
BOOKMARK_INTERVAL = 30.0
MAX_TIMEOUT_SECONDS = 2**31 - 1
#: at most this many events (and about this many bytes) that are ready at once go out in one write;
#: the next write waits until the client has taken this one (flow control), so a watcher that reads
#: slowly holds about one batch in the server
WRITE_BATCH = 256
WRITE_BATCH_BYTES = 64 * 1024


class WatchStreams:
    """Answers watch requests over the registry; counts the open streams in ``metrics``, and each
    user's in ``slots`` (429 past the user's limit); a watch's initial events hold one of its user's
    ``seats``."""

    def __init__(self, store: Store, registry: Registry, metrics: Metrics,
                 slots: WatchSlots | None = None, seats: Seats | None = None) -> None:
        self.store = store
        self.registry = registry
        self.metrics = metrics
        self.slots = slots or WatchSlots()
        self.seats = seats or Seats()

    async def response(self, request: Request, t: RequestInfo, user: str) -> Response:
        """The streamed answer to ``user``'s watch request; a 400 for a malformed query and a 429
        past the user's watch limit, before it starts."""
        options = list_options(request)
        q = request.query_params
        timeout_s = q.get("timeoutSeconds")
        try:
            timeout = float(timeout_s) if timeout_s else DEFAULT_WATCH_TIMEOUT
        except ValueError:
            raise errors.BadRequest(f"timeoutSeconds: {timeout_s!r} is not a number") from None
        if not math.isfinite(timeout) or not 0 <= timeout <= MAX_TIMEOUT_SECONDS:
            raise errors.BadRequest(
                f"timeoutSeconds: must be between 0 and {MAX_TIMEOUT_SECONDS}, got {timeout_s}")
        start = options.validate(watch=True)
        if start:
            await wait_for_revision(self.store, start)
        bookmarks = options.allow_watch_bookmarks
        options.selection()  # a malformed selector is a 400 before the stream starts
        version = table_version(request.headers.get("accept"))
        table = None
        if version is not None:
            table = WatchTable(writer_for(t.info), include_object(q.get("includeObject")), version)
        release = self.slots.take(user)
        seat = functools.partial(self.seats.hold, user, bounded=False)  # for its initial events
        return StreamingResponse(
            HeldStream(self._watch_stream(t, options, timeout, bookmarks, table, seat), release),
            media_type=JSON,
            headers={"Cache-Control": "no-cache"},
        )

    async def _watch_stream(
        self, t: RequestInfo, options: ListOptions, timeout: float, bookmarks: bool,
        table: WatchTable | None = None,
        seat: Callable[[], AbstractAsyncContextManager[None]] | None = None,
    ) -> AsyncIterator[bytes]:
        info = t.info
        served = functools.partial(served_raw, t) if t.aliased else None
        events = aiter(self.registry.watch(info, t.namespace, options, seat))
        deadline = time.monotonic() + timeout
        last_rev = options.resource_version or "0"
        pending: asyncio.Future[Event] | None = None
        self.metrics.watchers.inc()
        try:
            while True:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    break
                if pending is None:
                    pending = asyncio.ensure_future(anext(events))
                done, _ = await asyncio.wait({pending}, timeout=min(remaining, BOOKMARK_INTERVAL))
                if not done:
                    if bookmarks and remaining > BOOKMARK_INTERVAL:
                        yield _bookmark(t.served, last_rev)
                    continue
                try:
                    event = pending.result()
                except StopAsyncIteration:
                    break
                finally:
                    pending = None
                # The events the store holds already go out in one write, not one each: a burst
                # (a group commit of many binds) costs a watcher one send instead of hundreds.
                lines = [_line(event, table, served)]
                size = len(lines[0])
                while len(lines) < WRITE_BATCH and size < WRITE_BATCH_BYTES:
                    pending = asyncio.ensure_future(anext(events))
                    await asyncio.sleep(0)  # one turn: enough for an event the store has already
                    if not pending.done() or pending.exception() is not None:
                        break  # not there yet (or the end, or a failure): the loop above waits
                    event = pending.result()
                    pending = None
                    lines.append(_line(event, table, served))
                    size += len(lines[-1])
                last_rev = str(event[3])
                yield b"".join(lines)
        except errors.ApiError as exc:
            yield orjson.dumps({"type": "ERROR", "object": served_error(t, exc).to_status()}) + b"\n"
        except Exception as exc:  # headers are sent: report in-band, as Kubernetes does
            log.exception("watch of %s failed", info.plural)
            status = errors.InternalError(f"watch failed: {type(exc).__name__}: {exc}").to_status()
            yield orjson.dumps({"type": "ERROR", "object": status}) + b"\n"
        finally:
            self.metrics.watchers.dec()
            if pending is not None:
                # The generator is running inside this task: let the cancellation finish it
                # before closing, or aclose() finds it still running.
                pending.cancel()
                await asyncio.wait({pending})
            await events.aclose()  # type: ignore[attr-defined]


class WatchTable:
    """Watch events as Tables of one row; only the first carries the column definitions."""

    def __init__(self, writer: TableWriter, include: str, version: str) -> None:
        self.writer, self.include, self.version = writer, include, version
        self.headers = True

    def event(self, raw: bytes, revision: str) -> bytes:
        meta = {"resourceVersion": revision}
        body = self.writer.table([raw], meta, self.include, self.version, self.headers)
        self.headers = False
        return body


def _line(event: Event, table: WatchTable | None, served: Callable[[bytes], bytes] | None = None) -> bytes:
    """One watch event as the line the client reads (``served``: the object put in the request's
    group, for a watch through an alias group)."""
    type_, obj, raw, rev = event
    body = raw if raw is not None else orjson.dumps(obj)
    if served is not None:
        body = served(body)
    if table is not None and type_ != "BOOKMARK":
        body = table.event(body, str(rev))
    return b'{"type":"' + type_.encode() + b'","object":' + body + b"}\n"


def _bookmark(info: ResourceInfo, revision: str) -> bytes:
    obj = {"apiVersion": info.api_version, "kind": info.kind, "metadata": {"resourceVersion": revision}}
    return orjson.dumps({"type": "BOOKMARK", "object": obj}) + b"\n"
