"""Options and start-up shared by the long-running commands (poollets, scheduler, up, servers):
apiserver connection, quantities, logging, and running an asyncio main until SIGINT/SIGTERM."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar

import click

F = TypeVar("F", bound=Callable[..., Any])

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


def server_options(f: F) -> F:
    """``--server`` and ``--token-file``: where the apiserver is and the bearer token to use."""
    f = click.option("--token-file", type=click.Path(path_type=Path, dir_okay=False), default=None,
                     help="File holding the bearer token.")(f)
    return click.option("--server", default=None,
                        help="apiserver URL, or several of one control plane comma-separated (failover) "
                             "(default: client config / IRONPOOL_SERVER).")(f)


def log_level_option(f: F) -> F:
    """``--log-level`` (DEBUG, INFO, WARNING, ERROR; case-insensitive), default INFO."""
    return click.option("--log-level", default="INFO", show_default=True,
                        type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"], case_sensitive=False))(f)


def gc_options(f: F) -> F:
    """``--gc-policy``, ``--gc-grace``, ``--gc-max-per-pass``: how orphaned runtime objects are collected."""
    f = click.option("--gc-max-per-pass", default=20, show_default=True, type=click.IntRange(1),
                     help="Most orphans deleted per relist; more wait for the next one.")(f)
    f = click.option("--gc-grace", default=300.0, show_default=True, type=click.FloatRange(0),
                     help="Seconds a runtime object must stay orphaned (across two relists) before it "
                          "is deleted.")(f)
    return click.option("--gc-policy", type=click.Choice(["collect", "report"]), default="collect",
                        show_default=True,
                        help="collect: delete this installation's orphaned machines and volumes after the "
                             "grace period; report: only log them and show them on the pool.")(f)


def collect_options(gc_policy: str, gc_grace: float, gc_max_per_pass: int) -> Any:
    """The poollets' :class:`~ironpool.poollet.collector.CollectOptions` from :func:`gc_options`."""
    from ironpool.poollet.collector import CollectOptions

    return CollectOptions(policy="report" if gc_policy == "report" else "collect", grace=gc_grace,
                          max_per_pass=gc_max_per_pass)


def setup_logging(level: str) -> None:
    """Log to stderr at ``level`` with timestamps and logger names."""
    logging.basicConfig(level=level.upper(), format=LOG_FORMAT)


def read_token(path: Path) -> str:
    """A bearer token from a file: the whole (stripped) content, or the first column of a token CSV."""
    try:
        text = path.read_text().strip()
    except OSError as exc:
        raise click.BadParameter(f"cannot read {path}: {exc}", param_hint="--token-file") from exc
    first = text.splitlines()[0].strip() if text else ""
    token = first.split(",")[0].strip() if "," in first else first
    if not token:
        raise click.BadParameter(f"{path} holds no token", param_hint="--token-file")
    return token


def client_config(server: str | None, token: str | None, token_file: Path | None,
                  namespace: str | None = None) -> Any:
    """The client configuration (flags over environment over config file); it must name a server."""
    from ironpool.client.config import ClientConfig, ConfigError

    if token_file is not None:
        token = read_token(token_file)
    try:
        return ClientConfig.load(server=server, token=token, namespace=namespace).require_server()
    except ConfigError as exc:
        raise click.UsageError(str(exc)) from exc


def quantity_option(value: str | None, option: str) -> int | None:
    """A non-negative quantity option (``16Gi``, ``4``) rounded up to an integer; None if not given."""
    from ironpool.api.quantity import parse_quantity

    if value is None:
        return None
    try:
        q = parse_quantity(value).value()
    except ValueError as exc:
        raise click.BadParameter(f"{value!r}: {exc}", param_hint=option) from exc
    if q < 0:
        raise click.BadParameter(f"{value!r} must not be negative", param_hint=option)
    return q


def run_until_signalled(main: Callable[[asyncio.Event], Awaitable[None]]) -> None:
    """Run ``main(stop)`` in a new event loop; SIGINT and SIGTERM set ``stop``."""

    async def runner() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, stop.set)
        await main(stop)

    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(runner())


def run_in_foreground(system: Any, progress: Any, started: Callable[[Any], None], label: str,
                      errors: tuple[type[Exception], ...]) -> None:
    """Run ``system.run(stop, started)`` (``ironpool up``, ``ironpool join``) in a new event loop: the
    first SIGINT or SIGTERM stops it in order, a second at once. A failure in ``errors`` is reported on
    ``progress`` as ``label`` failing, with exit status 1."""

    async def main() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()

        def on_signal() -> None:
            if stop.is_set():
                progress.note("stopping at once (second signal)")
                os._exit(130)
            progress.note("stopping... (Ctrl-C again to stop at once)")
            stop.set()

        for sig in (signal.SIGINT, signal.SIGTERM):
            loop.add_signal_handler(sig, on_signal)
        await system.run(stop, started)

    try:
        asyncio.run(main())
    except errors as exc:
        progress.fail(label, str(exc))
        raise SystemExit(1) from None
