"""What the two IRI servicers share: running a driver call and answering its errors, and binding.

A driver (:class:`~ironpool.runtime.machine.driver.MachineDriver`,
:class:`~ironpool.runtime.volume.driver.VolumeDriver`) is synchronous and raises
:class:`~ironpool.runtime.errors.IriError`; a servicer runs the calls that block on libvirt or
qemu-img in its own thread pool (so an embedding process keeps its default executor) and answers
each error with its status code. Anything else that escapes a driver is a bug or a host failure
and becomes INTERNAL with its message.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import stat
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, NoReturn, TypeAlias, TypeVar

import grpc
import grpc.aio
import libvirt

from ironpool.iri.endpoint import EndpointError, parse_endpoint

from .errors import REASON_METADATA, IriError

log = logging.getLogger(__name__)
T = TypeVar("T")
Context: TypeAlias = "grpc.aio.ServicerContext[Any, Any]"

GRPC_OPTIONS = [
    ("grpc.max_receive_message_length", 64 * 1024 * 1024),
    ("grpc.max_send_message_length", 64 * 1024 * 1024),
]


class RuntimeService:
    """Base of the IRI servicers: :meth:`call` for blocking driver calls, :meth:`now` for the
    ones answered from memory on the event loop."""

    def __init__(self, executor: ThreadPoolExecutor) -> None:
        self.executor = executor

    async def call(self, context: Context, fn: Callable[..., T], *args: Any) -> T:
        try:
            return await asyncio.get_running_loop().run_in_executor(
                self.executor, functools.partial(fn, *args)
            )
        except Exception as exc:
            await abort(context, exc, fn)

    async def now(self, context: Context, fn: Callable[..., T], *args: Any) -> T:
        try:
            return fn(*args)
        except Exception as exc:
            await abort(context, exc, fn)


async def abort(context: Context, exc: Exception, fn: Callable[..., Any]) -> NoReturn:
    """End the RPC with the status code ``exc`` carries (INTERNAL for anything unexpected)."""
    what = getattr(fn, "__name__", str(fn))
    if isinstance(exc, IriError):
        await context.abort(exc.code, exc.message, ((REASON_METADATA, exc.reason),) if exc.reason else ())
    if isinstance(exc, libvirt.libvirtError):
        log.warning("%s: libvirt error: %s", what, exc)
        await context.abort(grpc.StatusCode.INTERNAL, f"libvirt: {exc.get_error_message()}")
    if isinstance(exc, OSError):
        log.warning("%s: host error: %s", what, exc)
        await context.abort(grpc.StatusCode.INTERNAL, f"host: {exc}")
    log.exception("%s failed", what, exc_info=exc)
    await context.abort(grpc.StatusCode.INTERNAL, f"{what}: {exc}")
    raise AssertionError("unreachable: context.abort raises")


def bind_address(server: grpc.aio.Server, address: str) -> str:
    """Listen on ``unix:///abs/path`` or ``tcp://host:port``; the address bound (the real port).

    A stale socket file is removed first; any other file at that path is refused, never deleted.
    Raises ValueError naming ``--address``.
    """
    try:
        ep = parse_endpoint(address)
    except EndpointError as exc:
        raise ValueError(f"--address: {exc}") from None
    if ep.scheme == "unix":
        path = Path(ep.path)
        path.parent.mkdir(parents=True, exist_ok=True)
        with contextlib.suppress(FileNotFoundError):
            if not stat.S_ISSOCK(path.lstat().st_mode):
                raise ValueError(f"--address: {path} exists and is not a socket")
            path.unlink()
        server.add_insecure_port(f"unix:{path}")
        return f"unix://{path}"
    if ep.scheme == "tcp":
        port = server.add_insecure_port(ep.grpc_target)
        return f"tcp://{ep.host}:{port}"
    raise ValueError(f"--address {address!r}: a runtime listens on unix:// or tcp:// only")


def remove_socket(address: str) -> None:
    """Remove the unix socket a server listened on (nothing for tcp)."""
    with contextlib.suppress(EndpointError, FileNotFoundError):
        ep = parse_endpoint(address)
        if ep.scheme == "unix":
            Path(ep.path).unlink()
