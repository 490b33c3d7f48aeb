"""Large bodies written a slice per turn of the event loop.

Writing a body is encrypting it (HTTPS) and copying it to the socket, all at once for one
``transport.write``: for a list of a few megabytes that held the event loop, and every other request
(``/healthz``, a pool's heartbeat), for 10-20 ms per list. :class:`SlicedResponse` writes about
:data:`BODY_SLICE` bytes, then lets the loop serve others before the next slice. Its body may come in
pieces (a list's items as stored, :func:`.listing.list_pieces`), joined a slice at a time, so a
large list is never copied into one ``bytes`` either.

A list larger than a page of the store is a :class:`StreamedResponse`: its items are written as
they are read, with no ``Content-Length`` (HTTP/1.1 chunked, as Kubernetes answers a large list),
so the server holds a page of it, not all of it. An error once the body has begun (the store
compacted past the list's revision, the store gone) cannot become a Status any more: the response
ends without its last chunk and the connection is closed, so no client takes the cut body for a
whole list (Kubernetes aborts the connection in that case too).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator, Sequence

from starlette.responses import Response
from starlette.types import Receive, Scope, Send

from ironpool.apiserver.endpoints.bodies import JSON

log = logging.getLogger("ironpool.apiserver")

BODY_SLICE = 256 * 1024  # bytes written per turn of the event loop (a fraction of a millisecond)


class SlicedResponse(Response):
    """A 200 whose body, ``bytes`` or pieces of it in order, is written :data:`BODY_SLICE` bytes at
    a time, with ``Content-Length`` (the whole body's size is known before the first byte)."""

    def __init__(self, body: bytes | Sequence[bytes], media_type: str = JSON) -> None:
        self.pieces: Sequence[bytes] = (body,) if isinstance(body, bytes) else body
        size = sum(len(p) for p in self.pieces)
        super().__init__(None, media_type=media_type, headers={"content-length": str(size)})

    def slices(self) -> Iterator[bytes]:
        """The body in slices of about :data:`BODY_SLICE` bytes (a larger piece is cut, smaller
        ones joined)."""
        batch: list[bytes] = []
        size = 0
        for piece in self.pieces:
            if len(piece) > BODY_SLICE:
                if batch:
                    yield b"".join(batch)
                    batch, size = [], 0
                view = memoryview(piece)
                for at in range(0, len(piece), BODY_SLICE):
                    yield bytes(view[at : at + BODY_SLICE])
                continue
            batch.append(piece)
            size += len(piece)
            if size >= BODY_SLICE:
                yield b"".join(batch)
                batch, size = [], 0
        if batch:
            yield b"".join(batch)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await send({"type": "http.response.start", "status": self.status_code, "headers": self.raw_headers})
        slices = self.slices()
        part = next(slices, b"")
        for following in slices:
            await send({"type": "http.response.body", "body": part, "more_body": True})
            await asyncio.sleep(0)  # the loop's turn: other requests between two slices
            part = following
        await send({"type": "http.response.body", "body": part, "more_body": False})


class StreamedResponse(Response):
    """A 200 of ``head``, the pieces of ``first`` and then of the pages of ``rest`` as they come,
    separated by ``separator``, and ``tail``: written :data:`BODY_SLICE` bytes at a time without a
    ``Content-Length``. ``done`` (if given) runs once the body is written or given up."""

    def __init__(self, head: bytes, first: Iterable[bytes], rest: AsyncIterator[list[bytes]], tail: bytes,
                 *, separator: bytes = b",", media_type: str = JSON,
                 done: Callable[[], Awaitable[object]] | None = None) -> None:
        super().__init__(None, media_type=media_type)
        self.raw_headers = [(k, v) for k, v in self.raw_headers if k != b"content-length"]
        self.head, self.first, self.rest, self.tail = head, first, rest, tail
        self.separator = separator
        self.done = done

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        gone = asyncio.get_running_loop().create_task(_disconnected(receive))
        batch: list[bytes] = [self.head]
        size = len(self.head)
        sep = b""

        async def flush(more: bool) -> None:
            nonlocal batch, size
            await send({"type": "http.response.body", "body": b"".join(batch), "more_body": more})
            batch, size = [], 0
            if more:
                await asyncio.sleep(0)  # the loop's turn: other requests between two slices

        async def write(page: Iterable[bytes]) -> bool:
            """Whether the client is still there, after the page went out in slices (all but
            the last, which waits for the next page's items or the tail)."""
            nonlocal size, sep
            for item in page:
                batch.extend((sep, item))
                size += len(sep) + len(item)
                sep = self.separator
                if size >= BODY_SLICE:
                    if gone.done():
                        return False  # the client went away: stop reading the store for nobody
                    await flush(True)
            return True

        try:
            await send({"type": "http.response.start", "status": self.status_code,
                        "headers": self.raw_headers})
            if not await write(self.first):
                return
            async for page in self.rest:  # a page is a few MiB at most: written before the next is read
                if not await write(page):
                    return
            batch.append(self.tail)
            await flush(False)
        except Exception as exc:
            # Returning without the last message has the server close the connection without the
            # chunked body's final chunk: the client sees an incomplete body, never a short list.
            log.warning("list cut off after its first bytes (connection closed): %s: %s",
                        type(exc).__name__, exc)
        finally:
            gone.cancel()
            with contextlib.suppress(Exception):
                await self.rest.aclose()  # type: ignore[attr-defined]
            if self.done is not None:
                await self.done()


async def _disconnected(receive: Receive) -> None:
    """Returns once the client has gone away (the request's body was read before the answer)."""
    while (await receive())["type"] != "http.disconnect":
        pass
