"""Where a command finds its apiserver: one family of options for every command that talks to one.

``--server`` (one URL, or several of one control plane comma-separated, for failover) and
``--token-file``; commands a person runs also take ``--token``, and commands on namespaced objects
``-n/--namespace``. Unset, they fall back to ``IRONPOOL_SERVER`` / ``IRONPOOL_TOKEN`` /
``IRONPOOL_NAMESPACE``, then to the client configuration file (``$IRONPOOL_CONFIG`` or
``~/.config/ironpool/config.yaml``), which ``ironpool up`` writes.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from ironpool.client.config import ClientConfig, ConfigError

F = TypeVar("F", bound=Callable[..., Any])


def connection_options(*, token: bool = True, namespace: bool = True) -> Callable[[F], F]:
    """``--server`` and ``--token-file``, plus ``--token`` with ``token`` and ``-n/--namespace``
    with ``namespace``: the command receives each as a keyword of that name."""

    def decorate(f: F) -> F:
        if namespace:
            f = click.option("-n", "--namespace", default=None,
                             help="Namespace for namespaced kinds (default: from config, else 'default').")(f)
        f = click.option("--token-file", type=click.Path(path_type=Path, dir_okay=False), default=None,
                         help="File holding the bearer token (or a token CSV: its first column).")(f)
        if token:
            f = click.option("--token", default=None, help="Bearer token (default: IRONPOOL_TOKEN).")(f)
        return click.option(
            "--server", default=None,
            help="apiserver URL, or several of one control plane comma-separated (failover) "
                 "(default: IRONPOOL_SERVER, else the client config file).")(f)

    return decorate


def read_token(path: Path) -> str:
    """A bearer token from a file: the whole (stripped) content, or the first column of a token CSV."""
    try:
        text = path.read_text().strip()
    except OSError as exc:
        raise ConfigError(f"--token-file: cannot read {path}: {exc}") from exc
    first = text.splitlines()[0].strip() if text else ""
    token = first.split(",")[0].strip() if "," in first else first
    if not token:
        raise ConfigError(f"--token-file: {path} holds no token")
    return token


def client_config(server: str | None, token: str | None = None, token_file: Path | None = None,
                  namespace: str | None = None) -> ClientConfig:
    """The client configuration (options over environment over config file); it must name a server.
    Raises ConfigError saying what to fix."""
    if token_file is not None:
        token = read_token(token_file)
    return ClientConfig.load(server=server, token=token, namespace=namespace).require_server()
