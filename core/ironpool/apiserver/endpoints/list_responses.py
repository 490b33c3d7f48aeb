"""The HTTP answer of a list: a ``<Kind>List`` or a kubectl ``Table``, whole or streamed.

A list that fits in the store's first page is answered as before, whole, with its
``Content-Length`` (:class:`.sliced.SlicedResponse`); a larger one is written as it is read
(:class:`.sliced.StreamedResponse`). The bytes of the body are the same either way.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Awaitable, Callable

from starlette.responses import Response

from ironpool.apiserver.endpoints.aliased import served_raw
from ironpool.apiserver.endpoints.request_parsing import RequestInfo
from ironpool.apiserver.endpoints.sliced import SlicedResponse, StreamedResponse
from ironpool.apiserver.endpoints.tables import writer_for
from ironpool.apiserver.registry.list_stream import StreamedList
from ironpool.apiserver.registry.listing import list_head

Done = Callable[[], Awaitable[object]]


def list_response(t: RequestInfo, listed: StreamedList, table: str | None, include: str,
                  done: Done) -> tuple[Response, bool]:
    """The response of ``listed`` (as a Table of version ``table`` when not None), and whether it
    streams: then it calls ``done`` once written, else the caller does at once."""
    if table is not None:
        writer = writer_for(t.info)
        now = time.time()
        embed = t.aliased and include == "Object"  # the rows embed the objects themselves

        def item(raw: bytes) -> bytes:
            return writer.row(served_raw(t, raw) if embed else raw, include, table, now)

        head = writer.head(listed.metadata, table)
    else:
        head = list_head(t.served.api_version, t.info.kind, listed.metadata)

        def item(raw: bytes) -> bytes:
            return served_raw(t, raw)  # the stored JSON itself unless the request is aliased

    first = [item(raw) for raw in listed.first]
    if listed.rest is None:
        pieces = [head]
        for piece in first:
            pieces += (piece, b",")
        if first:
            pieces.pop()  # the last item's comma
        pieces.append(b"]}")
        return SlicedResponse(pieces), False
    return StreamedResponse(head, first, _mapped(listed.rest, item), b"]}", done=done), True


async def _mapped(pages: AsyncIterator[list[bytes]], fn: Callable[[bytes], bytes],
                  ) -> AsyncIterator[list[bytes]]:
    try:
        async for page in pages:
            yield [fn(raw) for raw in page]
    finally:
        await pages.aclose()  # type: ignore[attr-defined]
