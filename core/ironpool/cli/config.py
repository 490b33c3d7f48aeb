"""Shared plumbing of the resource commands: connection options, the client, and clean error output.

Every resource command takes ``--server``, ``--token`` and ``-n/--namespace``; errors print one line
(``Error from server (Invalid): ...`` as kubectl does, plus the field causes) and exit 1, never a
traceback.
"""

from __future__ import annotations

import functools
import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, NoReturn, TypeVar

import click

from ironpool.api.errors import ApiError
from ironpool.client.config import ClientConfig, ConfigError
from ironpool.client.rest import Client
from ironpool.client.wire import ServerUnreachable

F = TypeVar("F", bound=Callable[..., Any])


class CommandError(Exception):
    """A user error found by the CLI itself (bad argument, unknown kind, unreadable manifest)."""


def connection_options(func: F) -> F:
    """Add ``--server``, ``--token`` and ``-n/--namespace`` to a command."""
    func = click.option("-n", "--namespace", default=None,
                        help="Namespace for namespaced kinds (default: from config, else 'default').")(func)
    func = click.option("--token", default=None, help="Bearer token (default: IRONPOOL_TOKEN).")(func)
    func = click.option(
        "--server", default=None,
        help="apiserver URL (default: IRONPOOL_SERVER or ~/.config/ironpool/config.yaml).",
    )(func)
    return func


def load_config(server: str | None, token: str | None, namespace: str | None) -> ClientConfig:
    return ClientConfig.load(server=server, token=token, namespace=namespace).require_server()


def make_client(config: ClientConfig, timeout: float = 30.0) -> Client:
    return Client(config, timeout=timeout)


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


_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text: str, option: str = "--timeout") -> float:
    """``30s``, ``5m``, ``1h30m``, ``500ms`` or plain seconds, as kubectl accepts them."""
    raw = text.strip()
    if re.fullmatch(r"\d+(\.\d+)?", raw):
        return float(raw)
    parts = re.findall(r"(\d+(?:\.\d+)?)(ms|s|m|h)", raw)
    if not parts or "".join(n + u for n, u in parts) != raw:
        raise CommandError(f"{option}: invalid duration {text!r} (examples: 30s, 5m, 1h30m)")
    return sum(float(n) * _UNITS[u] for n, u in parts)
