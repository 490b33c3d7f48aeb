"""Authentication from client certificates and a Kubernetes static-token file, and the
authorization hook.

A verified client certificate names the user by its CN and the groups by its O attributes, as in
Kubernetes; it is tried first. The token file has one ``token,user,uid[,"group1,group2"]`` line per
identity (Kubernetes' ``--token-auth-file`` format); blank lines and lines starting with ``#`` are
skipped. Members of ``system:masters`` are administrators.
"""

from __future__ import annotations

import csv
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path

from ironpool.api import errors
from ironpool.store.interface import Document, Store

ADMIN_GROUP = "system:masters"


@dataclass(frozen=True)
class User:
    """An authenticated identity."""

    name: str
    uid: str
    groups: frozenset[str] = field(default_factory=frozenset)

    @property
    def is_admin(self) -> bool:
        return ADMIN_GROUP in self.groups


class Authenticator:
    """Maps a request's ``Authorization`` header to a :class:`User` or raises Unauthorized."""

    def __init__(self, tokens: dict[str, User]) -> None:
        self._tokens = dict(tokens)

    @classmethod
    def from_file(cls, path: str | Path) -> Authenticator:
        """Read a static-token file; errors name the file and line."""
        path = Path(path)
        try:
            text = path.read_text()
        except OSError as exc:
            raise ValueError(f"--token-file {path}: cannot read: {exc.strerror}") from None
        return cls(parse_token_file(text, str(path)))

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
        user = self._tokens.get(token)
        if user is None:
            raise errors.Unauthorized("invalid bearer token")
        return user


ObjectCheck = Callable[[Document | None, Document | None, Store], Awaitable[None]]
"""``check(old, new, store)``: an authorizer's condition on the stored object (``None`` on create)
and the object about to be written (``None`` on delete); raises Forbidden to refuse. It runs inside
the write's read-modify-write loop, so it sees the object the write applies to without another read.
"""


@dataclass(frozen=True)
class Conditions:
    """What an authorizer still has to see before it allows a request it could not decide from the
    request line alone: ``selector(fieldSelector)`` for list and watch, ``objects`` (see
    :data:`ObjectCheck`) for create, update, patch and delete. Either raises Forbidden. A get is
    decided from the request line alone (conditions returned for it are not consulted)."""

    selector: Callable[[str], None] | None = None
    objects: ObjectCheck | None = None


Authorizer = Callable[[User, str, str, str | None, str | None], Conditions | None]
"""``authorize(user, verb, resource, namespace, name)``: return to allow, raise Forbidden to deny.

``verb`` is a Kubernetes verb (get, list, watch, create, update, patch, delete) and ``resource``
the plural, with ``/status`` for the status subresource. Returning :class:`Conditions` allows the
request only if they hold; ``None`` allows it outright (the common, free case).
"""


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
