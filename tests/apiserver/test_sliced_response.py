"""SlicedResponse: a body (or its pieces) is written whole, with its Content-Length, a slice at a
time, and other tasks run between two slices. StreamedResponse: the same JSON as its items come,
without a length, and never ended when an item fails to come."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncIterator
from typing import Any

from ironpool.apiserver.endpoints.sliced import BODY_SLICE, SlicedResponse, StreamedResponse
from ironpool.apiserver.registry.listing import list_pieces
from ironpool.store.interface import RevisionCompacted

Message = dict[str, Any]


async def written(response: SlicedResponse, log: list[str] | None = None) -> list[Message]:
    messages: list[Message] = []

    async def receive() -> Message:
        raise AssertionError("a response does not read the request")

    async def send(message: Message) -> None:
        messages.append(message)
        if log is not None:
            log.append("slice")

    await response({"type": "http"}, receive, send)
    return messages


def body_of(messages: list[Message]) -> bytes:
    assert messages[0]["type"] == "http.response.start"
    assert all(m["more_body"] for m in messages[1:-1]) and not messages[-1]["more_body"]
    body = b"".join(m["body"] for m in messages[1:])
    assert (b"content-length", str(len(body)).encode()) in messages[0]["headers"]
    return body


async def test_a_small_body_is_one_message() -> None:
    messages = await written(SlicedResponse(b'{"kind":"List"}'))
    assert len(messages) == 2 and body_of(messages) == b'{"kind":"List"}'
    assert (b"content-type", b"application/json") in messages[0]["headers"]


async def test_a_large_body_and_many_pieces_are_written_in_slices() -> None:
    large = bytes(range(256)) * (3 * BODY_SLICE // 256 + 7)
    messages = await written(SlicedResponse(large))
    assert body_of(messages) == large
    assert len(messages) == 1 + 4 and max(len(m["body"]) for m in messages[1:]) == BODY_SLICE

    items = [b'{"n":%d,"pad":"%s"}' % (i, b"x" * 5000) for i in range(200)]
    pieces = list_pieces("v1", "Secret", {"resourceVersion": "5"}, items)
    messages = await written(SlicedResponse(pieces))
    assert body_of(messages) == b"".join(pieces)
    assert b"".join(pieces) == (b'{"apiVersion":"v1","kind":"SecretList","metadata":{"resourceVersion":"5"},'
                                b'"items":[' + b",".join(items) + b"]}")
    assert len(messages) > 3


async def test_an_empty_list_is_whole() -> None:
    pieces = list_pieces("v1", "Secret", {"resourceVersion": "5"}, [])
    assert body_of(await written(SlicedResponse(pieces))) == (
        b'{"apiVersion":"v1","kind":"SecretList","metadata":{"resourceVersion":"5"},"items":[]}')


async def test_other_tasks_run_between_two_slices() -> None:
    log: list[str] = []
    loop = asyncio.get_running_loop()
    done = False

    def other() -> None:  # one entry per turn of the event loop, for as long as the response is written
        if not done:
            log.append("other")
            loop.call_soon(other)

    loop.call_soon(other)
    await written(SlicedResponse(b"x" * (3 * BODY_SLICE)), log)
    done = True
    slices = [i for i, entry in enumerate(log) if entry == "slice"]
    assert len(slices) == 4  # the head, then three slices of the body
    assert all("other" in log[a:b] for a, b in itertools.pairwise(slices[1:]))


async def _pages(items: list[bytes], fail_after: int | None = None) -> AsyncIterator[list[bytes]]:
    for at in range(0, len(items), 7):
        if fail_after is not None and at >= fail_after:
            raise RevisionCompacted("compacted while the list was written")
        yield items[at : at + 7]


async def streamed(response: StreamedResponse) -> list[Message]:
    messages: list[Message] = []
    never: asyncio.Future[Message] = asyncio.get_running_loop().create_future()

    async def receive() -> Message:  # the client stays: nothing comes until the answer is done
        return await never

    async def send(message: Message) -> None:
        messages.append(message)

    await response({"type": "http"}, receive, send)
    return messages


async def test_a_streamed_list_is_the_same_json_without_a_length() -> None:
    items = [b'{"n":%d,"pad":"%s"}' % (i, b"x" * 5000) for i in range(200)]
    pieces = list_pieces("v1", "Secret", {"resourceVersion": "5"}, items)
    done: list[str] = []

    async def finished() -> None:
        done.append("done")

    response = StreamedResponse(pieces[0], items[:3], _pages(items[3:]), b"]}", done=finished)
    messages = await streamed(response)
    assert messages[0]["type"] == "http.response.start"
    assert not any(k == b"content-length" for k, _ in messages[0]["headers"])
    assert all(m["more_body"] for m in messages[1:-1]) and not messages[-1]["more_body"]
    assert b"".join(m["body"] for m in messages[1:]) == b"".join(pieces)
    assert len(messages) > 3 and done == ["done"]


async def test_a_streamed_list_that_fails_midway_never_ends_its_body() -> None:
    items = [b'{"n":%d,"pad":"%s"}' % (i, b"x" * 5000) for i in range(200)]
    done: list[str] = []

    async def finished() -> None:
        done.append("done")

    response = StreamedResponse(b'{"items":[', [], _pages(items, fail_after=150), b"]}", done=finished)
    messages = await streamed(response)
    # Slices of the body went out, but never the last message: the server closes the connection
    # without the final chunk, and no client reads the cut body as a whole list.
    assert len(messages) > 2 and all(m.get("more_body", True) for m in messages)
    assert done == ["done"]
