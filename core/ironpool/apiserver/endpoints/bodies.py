"""Request bodies: read within a size limit, decoded from JSON or YAML (or, for the built-in kinds
kubectl creates, Kubernetes protobuf: :mod:`.protobuf`) so that no encoding gets around the limits.

A body is at most :data:`MAX_BODY` bytes on the wire, and the document it decodes to is held to
the same size *after* expansion: YAML aliases (``&a`` ... ``*a``) are allowed but counted every
time they are used, so a few hundred bytes of nested aliases (the "billion laughs") cannot turn
into a 47 MB object, and an alias that refers to itself is refused. Documents nest at most
:data:`MAX_DEPTH` levels (JSON, YAML, merge and strategic patches alike): the recursive code
downstream (patches, validation) stays far from Python's recursion limit, and the C YAML composer
never sees a deep document, since depth is checked first on libyaml's event stream, which keeps
no C stack.

YAML goes through libyaml (PyYAML's C loader) when it is there. Bodies larger than
:data:`OFF_LOOP_BYTES` are decoded in a worker thread, so one large body does not stall every other
request, ``/healthz`` included; at most :data:`LARGE_BODIES` such requests are handled at once
(the others wait for a slot, and past :data:`LARGE_BODY_QUEUE` waiting the answer is 429 with
``Retry-After``), which bounds the memory large bodies can take together: about
``LARGE_BODIES * (MAX_BODY + its decoded form)``, some 60 MB, plus 64 KiB per waiting request.
While a worker decodes, Python's cyclic garbage collector is paused: a document of a hundred
thousand entries would otherwise set off several full collections, each holding the interpreter
lock over the whole heap for 50-100 ms, and the event loop with it (decoded documents hold no
cycles for it to find; it resumes when the last decode ends). The interpreter also hands its lock
over every millisecond instead of every five meanwhile, so the event loop's turns come quickly.

What a YAML document may hold is what JSON can say: timestamps become RFC 3339 strings, non-string
keys become strings (as Kubernetes' YAML-to-JSON conversion does), ``!!binary`` becomes base64;
sets and integers beyond 64 bits are refused with 400.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime
import gc
import sys
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import orjson
import yaml
from starlette.requests import Request

from ironpool.api import errors
from ironpool.apiserver.endpoints.protobuf import PROTOBUF, decode_object
from ironpool.apiserver.registry.objectmeta import RequestEntityTooLarge

JSON = "application/json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"
JSON_PATCH = "application/json-patch+json"
PATCH_TYPES = (MERGE_PATCH, STRATEGIC_PATCH, APPLY_PATCH, JSON_PATCH)
CURL_DEFAULT = "application/x-www-form-urlencoded"
YAML_TYPES = ("application/yaml", "application/x-yaml", "text/yaml", APPLY_PATCH)

MAX_BODY = 3 * 1024 * 1024  # Kubernetes' limit for one request body
MAX_DEPTH = 64  # objects and lists nested in each other; real objects nest fewer than 15
OFF_LOOP_BYTES = 64 * 1024  # larger bodies are decoded in a worker thread
LARGE_BODIES = 2  # requests with a large body handled at once
LARGE_BODY_QUEUE = 32  # requests with a large body waiting for a slot, at most

_Loader: type[Any] = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_pool = ThreadPoolExecutor(max_workers=LARGE_BODIES, thread_name_prefix="ironpool-decode")
_gc_lock = threading.Lock()
_gc_pausers = 0
_switch_interval = sys.getswitchinterval()
_DECODING_SWITCH_INTERVAL = 0.001  # seconds (CPython's default: 0.005)
_OPEN = (yaml.MappingStartEvent, yaml.SequenceStartEvent)
_CLOSE = (yaml.MappingEndEvent, yaml.SequenceEndEvent)


def media_type(request: Request) -> str:
    """The request's Content-Type without parameters, lower case."""
    return request.headers.get("content-type", "").split(";")[0].strip().lower()


def _too_deep() -> errors.BadRequest:
    return errors.BadRequest(f"the request body nests objects and lists deeper than {MAX_DEPTH} levels")


def _too_large(what: str = "the request body") -> RequestEntityTooLarge:
    return RequestEntityTooLarge(f"{what} is larger than {MAX_BODY} bytes once decoded")


def _scan_yaml_events(body: bytes) -> None:
    """Refuse a YAML body nested deeper than :data:`MAX_DEPTH`, from the parser's events alone."""
    depth = 0
    for event in yaml.parse(body, Loader=_Loader):
        if isinstance(event, _OPEN):
            depth += 1
            if depth > MAX_DEPTH:
                raise _too_deep()
        elif isinstance(event, _CLOSE):
            depth -= 1


def _scalar_size(value: Any) -> int:
    """The length of a scalar in compact JSON (a string without its escapes)."""
    if isinstance(value, str):
        return len(value) + 2
    if value is None or value is True:
        return 4
    if value is False:
        return 5
    if isinstance(value, int):
        # Past 64 bits JSON cannot carry it anyway (refused later); str() of a huge int is slow.
        return len(str(value)) if -(2**63) <= value < 2**64 else 21
    if isinstance(value, float):
        return len(repr(value))
    return 8  # a YAML date or binary: its JSON string is about this long or longer


def expanded_size(doc: Any) -> int:
    """The length of ``doc`` as compact JSON with every shared (aliased) part written out (a
    string's escapes not counted); raises BadRequest for a cycle or nesting beyond
    :data:`MAX_DEPTH`, and RequestEntityTooLarge as soon as the size passes :data:`MAX_BODY`. Each
    distinct container is measured once, so aliases cost no more to measure than to parse."""
    sizes: dict[int, int] = {}
    open_ids: set[int] = set()

    def size(node: Any, depth: int) -> int:
        if not isinstance(node, dict | list):
            return _scalar_size(node)
        known = sizes.get(id(node))
        if known is not None:
            return known
        if depth >= MAX_DEPTH:
            raise _too_deep()
        if id(node) in open_ids:
            raise errors.BadRequest("the request body refers to itself (a recursive YAML alias)")
        open_ids.add(id(node))
        total = 1 + max(len(node), 1)  # the brackets and the commas between items
        if isinstance(node, dict):
            for key, value in node.items():
                total += len(str(key)) + 3 + size(value, depth + 1)  # "key":
                if total > MAX_BODY:
                    raise _too_large()
        else:
            for value in node:
                total += size(value, depth + 1)
                if total > MAX_BODY:
                    raise _too_large()
        open_ids.discard(id(node))
        sizes[id(node)] = total
        return total

    return size(doc, 0)


def _json_default(value: Any) -> Any:
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if isinstance(value, datetime.date):
        return value.isoformat()
    raise TypeError(f"a YAML {type(value).__name__} has no JSON form")


def decode_yaml(body: bytes) -> Any:
    """A YAML body as the JSON document it stands for, within the limits (see the module doc)."""
    try:
        _scan_yaml_events(body)
        doc = yaml.load(body, Loader=_Loader)
    except yaml.YAMLError as exc:
        raise errors.BadRequest(f"the request body is not valid YAML: {exc}") from None
    except RecursionError:  # the pure-Python constructor, without libyaml
        raise _too_deep() from None
    expanded_size(doc)
    try:
        return orjson.loads(orjson.dumps(doc, default=_json_default, option=orjson.OPT_NON_STR_KEYS))
    except TypeError as exc:
        raise errors.BadRequest(f"the request body cannot be expressed as JSON: {exc}") from None


def decode_json(body: bytes) -> Any:
    """A JSON body, nested at most :data:`MAX_DEPTH` levels."""
    try:
        doc = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        if "recursion" in str(exc).lower():
            raise _too_deep() from None
        raise errors.BadRequest(f"the request body is not valid JSON: {exc}") from None
    # Depth cannot exceed the number of brackets: most bodies need no walk at all.
    if body.count(b"{") + body.count(b"[") > MAX_DEPTH:
        expanded_size(doc)
    return doc


@contextlib.contextmanager
def _decoding() -> Iterator[None]:
    """While at least one decode is in this block: the cyclic garbage collector paused, the
    interpreter's switch interval short (module doc)."""
    global _gc_pausers, _switch_interval
    with _gc_lock:
        _gc_pausers += 1
        if _gc_pausers == 1:
            gc.disable()
            _switch_interval = sys.getswitchinterval()
            sys.setswitchinterval(_DECODING_SWITCH_INTERVAL)
    try:
        yield
    finally:
        with _gc_lock:
            _gc_pausers -= 1
            if _gc_pausers == 0:
                sys.setswitchinterval(_switch_interval)
                gc.enable()


def _decode_off_loop(decode: Callable[[bytes], Any], body: bytes) -> Any:
    with _decoding():
        return decode(body)


class LargeBodies:
    """The slots for requests with a large body (see the module doc); one per apiserver."""

    def __init__(self, slots: int = LARGE_BODIES, queue: int = LARGE_BODY_QUEUE) -> None:
        self._slots = asyncio.Semaphore(slots)
        self._queue = queue
        self._waiting = 0

    @contextlib.asynccontextmanager
    async def slot(self) -> AsyncIterator[None]:
        if self._slots.locked() and self._waiting >= self._queue:
            raise errors.TooManyRequests(
                f"{self._waiting} requests with large bodies are waiting already; please try again later",
                retry_after_seconds=1)
        self._waiting += 1
        try:
            await self._slots.acquire()
        finally:
            self._waiting -= 1
        try:
            yield
        finally:
            self._slots.release()


async def read_bytes(request: Request, large: LargeBodies, stack: contextlib.AsyncExitStack) -> bytes:
    """The raw body, refused past :data:`MAX_BODY`; a body larger than :data:`OFF_LOOP_BYTES` takes
    a large-body slot, held by ``stack`` until the request is done."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > MAX_BODY:
        raise RequestEntityTooLarge(f"the request body is larger than {MAX_BODY} bytes")
    holding = False
    if declared.isdigit() and int(declared) > OFF_LOOP_BYTES:
        await stack.enter_async_context(large.slot())
        holding = True
    buffer = bytearray()
    async for chunk in request.stream():
        buffer += chunk
        if len(buffer) > MAX_BODY:
            raise RequestEntityTooLarge(f"the request body is larger than {MAX_BODY} bytes")
        if not holding and len(buffer) > OFF_LOOP_BYTES:
            await stack.enter_async_context(large.slot())
            holding = True
    return bytes(buffer)


async def read_body(request: Request, large: LargeBodies, stack: contextlib.AsyncExitStack, *,
                    patch: bool = False, optional: bool = False) -> Any:
    """The JSON (or YAML, or protobuf) body; 415 for other media types, 400 for malformed or too
    deeply nested input, 413 for too large input."""
    ctype = media_type(request)
    if ctype == CURL_DEFAULT:
        ctype = ""  # `curl -d` labels every body so; read it as JSON (a merge patch for PATCH)
    if patch and ctype not in ("", *PATCH_TYPES):
        raise errors.UnsupportedMediaType(f"PATCH supports {', '.join(PATCH_TYPES)} (got {ctype or 'none'})")
    is_yaml = ctype in YAML_TYPES
    if not is_yaml and not patch and ctype not in ("", JSON, "text/json", PROTOBUF):
        raise errors.UnsupportedMediaType(f"unsupported Content-Type {ctype!r}; send {JSON}")
    body = await read_bytes(request, large, stack)
    if optional and not body.strip():
        return None
    # Protobuf is what kubectl's typed clients send (for the built-in kinds it creates).
    decode = decode_object if ctype == PROTOBUF else decode_yaml if is_yaml else decode_json
    if len(body) <= OFF_LOOP_BYTES:
        return decode(body)
    return await asyncio.get_running_loop().run_in_executor(_pool, _decode_off_loop, decode, body)
