"""How commands fail: one clean message and exit status 1, never a traceback.

Errors from the server print as kubectl prints them (``Error from server (Invalid): ...``, then one
line per field cause); errors the CLI finds itself (:class:`CommandError`), an unreachable server and
a missing or malformed client configuration print ``error: ...``.
"""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, NoReturn, TypeVar

import click

from ironpool.api.errors import ApiError
from ironpool.client.config import ConfigError
from ironpool.client.wire import ServerUnreachable

F = TypeVar("F", bound=Callable[..., Any])


class CommandError(Exception):
    """A user error found by the CLI itself (bad argument, unknown kind, unreadable manifest)."""


def format_api_error(exc: ApiError) -> str:
    """kubectl's one-line ``Error from server (Reason): message``, then one line per cause."""
    lines = [f"Error from server ({exc.reason}): {exc.message}"]
    for cause in exc.causes:
        # Kubernetes messages for Invalid usually already embed the causes; avoid saying it twice.
        if cause.field and f"{cause.field}:" in exc.message:
            continue
        lines.append(f"  {cause.field}: {cause.message}" if cause.field else f"  {cause.message}")
    return "\n".join(lines)


def fail(message: str) -> NoReturn:
    click.echo(message, err=True)
    sys.exit(1)


@contextmanager
def cli_errors() -> Iterator[None]:
    """Turn the errors a command can meet into one clean message and exit status 1."""
    try:
        yield
    except ApiError as exc:
        fail(format_api_error(exc))
    except (ServerUnreachable, ConfigError, CommandError, ValueError) as exc:
        fail(f"error: {exc}")
    except KeyboardInterrupt:
        sys.exit(130)


def handle_errors(func: F) -> F:
    """Decorator form of :func:`cli_errors`."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        with cli_errors():
            return func(*args, **kwargs)

    return wrapper  # type: ignore[return-value]
