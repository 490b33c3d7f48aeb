"""``ironpool token create USER [--group G ...]``: a new bearer token for a user, appended to the
static-token file of the control plane (Kubernetes' ``--token-auth-file`` format).

The apiserver reads that file again within a second of a change (Kubernetes needs a restart; users
expect otherwise), so the token works at once. What the user may do is RBAC's business: bind a role,
e.g. ``edit`` in a namespace with a RoleBinding.
"""

from __future__ import annotations

import secrets
import uuid
from pathlib import Path

import click

_FORBIDDEN_CHARS = (",", '"', "\n", "\r")


def _field(value: str, what: str) -> str:
    value = value.strip()
    if not value or any(c in value for c in _FORBIDDEN_CHARS):
        raise click.BadParameter(f"{value!r}: must be non-empty, without commas, quotes or line breaks",
                                 param_hint=what)
    return value


def append_identity(token_file: Path, user: str, groups: list[str]) -> str:
    """Append a new user line to ``token_file`` (:func:`ironpool.apiserver.append_lines`; created if
    missing) and return the new token."""
    from ironpool.apiserver import append_lines, token_line

    token = secrets.token_urlsafe(32)
    try:
        append_lines(token_file, [token_line(token, user, str(uuid.uuid4()), groups)], create=True)
    except OSError as exc:
        raise click.ClickException(f"{token_file}: cannot update the token file: {exc.strerror}") from None
    return token


@click.group("token")
def token() -> None:
    """Manage users of the static-token file."""


@token.command("create")
@click.argument("user")
@click.option("--group", "groups", multiple=True, metavar="GROUP",
              help="A group of the user (repeatable); system:masters makes an administrator.")
@click.option("--token-file", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="The apiserver's --token-file [default: tokens.csv of the `ironpool up` data dir].")
@click.option("--data-dir", type=click.Path(path_type=Path, file_okay=False), default=None,
              envvar="IRONPOOL_DATA_DIR", help="Data dir of `ironpool up` whose tokens.csv to use.")
def create(user: str, groups: tuple[str, ...], token_file: Path | None, data_dir: Path | None) -> None:
    """Create a bearer token for USER and print it (only once: keep it).

    A running apiserver picks it up within a second. Grant rights with RBAC, e.g.
    ``ironpool apply`` a RoleBinding of the ClusterRole ``edit`` in a namespace."""
    from ironpool.allinone.datadir import DataDir, default_data_dir

    name = _field(user, "USER")
    group_names = [_field(g, "--group") for g in groups]
    if token_file is None:
        token_file = DataDir((data_dir or default_data_dir()).absolute()).tokens
        if not token_file.is_file():
            raise click.UsageError(f"no token file at {token_file}: give --token-file (the apiserver's) "
                                   "or --data-dir (of `ironpool up`)")
    click.echo(append_identity(token_file, name, group_names))
