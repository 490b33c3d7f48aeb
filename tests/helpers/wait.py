"""Waiting on a condition with a deadline: how tests synchronise, never with bare sleeps."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any, TypeVar

import pytest

T = TypeVar("T")


def wait_for(
    fn: Callable[[], T | None],
    timeout: float,
    what: str,
    interval: float = 0.1,
    retry_on: tuple[type[Exception], ...] = (),
) -> T:
    """Poll ``fn`` until it returns something truthy and return that; fail the test naming ``what``
    after ``timeout`` seconds. Exceptions in ``retry_on`` count as "not yet"."""
    deadline = time.monotonic() + timeout
    last_exc: Exception | None = None
    while True:
        try:
            value = fn()
            if value:
                return value
        except retry_on as exc:
            last_exc = exc
        if time.monotonic() > deadline:
            pytest.fail(
                f"timed out after {timeout}s waiting for {what}"
                + (f" (last error: {last_exc})" if last_exc else "")
            )
        time.sleep(interval)


def wait_until(
    predicate: Callable[[], Any], timeout: float, interval: float = 0.02, message: str = "condition"
) -> None:
    """Poll ``predicate`` until it is truthy; fail the test after ``timeout`` seconds."""
    wait_for(predicate, timeout, message, interval)


async def eventually(predicate: Callable[[], Any], timeout: float = 10.0, message: str = "condition") -> Any:
    """Await until ``predicate()`` (sync or async) returns something truthy and return it; an
    ``AssertionError`` it raises counts as "not yet" and is quoted if the deadline passes."""
    deadline = time.monotonic() + timeout
    last: BaseException | None = None
    while True:
        try:
            result = predicate()
            if asyncio.iscoroutine(result):
                result = await result
            if result:
                return result
        except AssertionError as exc:
            last = exc
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {message}" + (f": {last}" if last else ""))
        await asyncio.sleep(0.02)
