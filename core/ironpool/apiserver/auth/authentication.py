"""Authentication from client certificates and a Kubernetes static-token file.

A verified client certificate names the user by its CN and the groups by its O attributes, as in
Kubernetes; it is tried first. The token file has one ``token,user,uid[,"group1,group2"]`` line per
identity (Kubernetes' ``--token-auth-file`` format); blank lines and lines starting with ``#`` are
skipped. Members of ``system:masters`` are administrators. A token file is read again when its
modification time changes (looked at once a second at most), so identities issued on a running
control plane (``ironpool join-token create``) work without a restart; a file that no longer parses
keeps the tokens read before, with a warning.
"""

from __future__ import annotations

import csv
import logging
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from ironpool.api import errors

ADMIN_GROUP = "system:masters"
_RELOAD_CHECK_SECONDS = 1.0

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class User:
    """An authenticated identity."""

    name: str
    uid: str
    groups: frozenset[str] = field(default_factory=frozenset)
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (key, values), sorted: an impersonated user's

    @property
    def is_admin(self) -> bool:
        return ADMIN_GROUP in self.groups


class Authenticator:
    """Maps a request's ``Authorization`` header to a :class:`User` or raises Unauthorized."""

    def __init__(self, tokens: dict[str, User], path: Path | None = None, mtime_ns: int = 0) -> None:
        self._tokens = dict(tokens)
        self._path = path
        self._mtime_ns = mtime_ns
        self._checked = time.monotonic()

    @classmethod
    def from_file(cls, path: str | Path) -> Authenticator:
        """Read a static-token file; errors name the file and line."""
        path = Path(path)
        try:
            mtime_ns = os.stat(path).st_mtime_ns
            text = path.read_text()
        except OSError as exc:
            raise ValueError(f"--token-file {path}: cannot read: {exc.strerror}") from None
        return cls(parse_token_file(text, str(path)), path, mtime_ns)

    def _reload_if_changed(self) -> None:
        now = time.monotonic()
        if self._path is None or now - self._checked < _RELOAD_CHECK_SECONDS:
            return
        self._checked = now
        try:
            mtime_ns = os.stat(self._path).st_mtime_ns
        except OSError as exc:
            log.warning("token file %s not reloaded, the tokens read before stay: %s", self._path, exc)
            return
        if mtime_ns == self._mtime_ns:
            return
        self._mtime_ns = mtime_ns  # a broken version is reported once, not every second
        try:
            tokens = parse_token_file(self._path.read_text(), str(self._path))
        except (OSError, ValueError) as exc:
            log.warning("token file %s not reloaded, the tokens read before stay: %s", self._path, exc)
            return
        self._tokens = tokens
        log.info("token file %s reloaded: %d identities", self._path, len(tokens))

    def authenticate(
        self, header: str | None, client_subject: tuple[str, tuple[str, ...]] | None = None
    ) -> User:
        """The identity of a request: its verified client certificate's ``(CN, (O, ...))``, else
        its ``Authorization`` header."""
        if client_subject is not None and client_subject[0]:
            name, groups = client_subject
            return User(name=name, uid="", groups=frozenset(groups))
        if not header:
            raise errors.Unauthorized("missing bearer token (Authorization: Bearer <token>)")
        scheme, _, token = header.partition(" ")
        token = token.strip()
        if scheme.lower() != "bearer" or not token:
            raise errors.Unauthorized("the Authorization header must be 'Bearer <token>'")
        self._reload_if_changed()
        user = self._tokens.get(token)
        if user is None:
            raise errors.Unauthorized("invalid bearer token")
        return user


def parse_token_file(text: str, source: str = "token file") -> dict[str, User]:
    """Parse static-token lines into ``{token: User}``."""
    tokens: dict[str, User] = {}
    for lineno, row in enumerate(csv.reader(text.splitlines(), skipinitialspace=True), start=1):
        if not row or not "".join(row).strip() or row[0].lstrip().startswith("#"):
            continue
        if len(row) < 3:
            raise ValueError(f"{source}:{lineno}: expected 'token,user,uid[,\"group1,group2\"]'")
        token, name, uid = (part.strip() for part in row[:3])
        if not token or not name:
            raise ValueError(f"{source}:{lineno}: token and user must not be empty")
        groups = frozenset(g.strip() for g in row[3].split(",") if g.strip()) if len(row) > 3 else frozenset()
        if token in tokens:
            raise ValueError(f"{source}:{lineno}: duplicate token")
        tokens[token] = User(name=name, uid=uid, groups=groups)
    return tokens
