"""User impersonation, as Kubernetes does it (``kubectl --as``, ``--as-group``, ``--as-uid``).

A request may act as another user by sending ``Impersonate-User`` and optionally ``Impersonate-Group``
(repeated), ``Impersonate-Uid`` and ``Impersonate-Extra-<key>`` headers. The requester must be allowed
the ``impersonate`` verb on each thing it asks for: ``users`` (or ``serviceaccounts`` in the account's
namespace, for ``system:serviceaccount:<namespace>:<name>``) and ``groups`` in the core group,
``uids`` and ``userextras/<key>`` in ``authentication.k8s.io``, each by name. Anything refused is a
403 naming it, and nothing of the request is served; groups, a uid or extras without a user are a
400. The request then runs as the impersonated user, who is in ``system:authenticated`` (and a
service account in ``system:serviceaccounts`` and ``system:serviceaccounts:<namespace>``), with the
groups asked for and no others: impersonation never adds the requester's own rights.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from urllib.parse import unquote

from ironpool.api import errors
from ironpool.apiserver.auth.authentication import User

_USER = b"impersonate-user"
_GROUP = b"impersonate-group"
_UID = b"impersonate-uid"
_EXTRA = b"impersonate-extra-"
_PREFIX = b"impersonate-"
SERVICE_ACCOUNT_PREFIX = "system:serviceaccount:"
AUTHENTICATED = "system:authenticated"
AUTHENTICATION_GROUP = "authentication.k8s.io"

MayImpersonate = Callable[[User, str, str, str | None, str], bool]
"""``may(requester, group, resource, namespace, name)``: whether ``requester`` may impersonate it."""


@dataclass(frozen=True)
class Requested:
    """What a request's impersonation headers ask for."""

    user: str
    groups: tuple[str, ...] = ()
    uid: str | None = None
    extra: dict[str, tuple[str, ...]] = field(default_factory=dict)


def requested(headers: Iterable[tuple[bytes, bytes]]) -> Requested | None:
    """The impersonation a request's raw headers ask for (None: none); 400 for groups, a uid or
    extras without a user."""
    user: str | None = None
    groups: list[str] = []
    uid: str | None = None
    extra: dict[str, list[str]] = {}
    seen = False
    for name, value in headers:
        if not name.startswith(_PREFIX):  # the common case: a few bytes compared per header
            continue
        name = name.lower()
        text = value.decode("latin-1").strip()
        if name == _USER:
            user, seen = text, True
        elif name == _GROUP:
            groups.append(text)
            seen = True
        elif name == _UID:
            uid, seen = text, True
        elif name.startswith(_EXTRA):
            # Header names cannot carry every key: Kubernetes percent-encodes them.
            key = unquote(name[len(_EXTRA):].decode("latin-1")).lower()
            extra.setdefault(key, []).append(text)
            seen = True
    if not seen:
        return None
    if not user:
        raise errors.BadRequest("impersonation: Impersonate-Group, Impersonate-Uid and Impersonate-Extra-* "
                                "need Impersonate-User")
    return Requested(user, tuple(groups), uid, {k: tuple(v) for k, v in extra.items()})


def impersonate(requester: User, asked: Requested, may: MayImpersonate) -> User:
    """The user ``requester`` acts as, once ``may`` allows each part of ``asked``; 403 naming the
    first part refused."""

    def check(group: str, resource: str, namespace: str | None, name: str) -> None:
        if not may(requester, group, resource, namespace, name):
            scope = f'in the namespace "{namespace}"' if namespace else "at the cluster scope"
            plural = resource.partition("/")[0]
            raise errors.Forbidden(
                f'{plural} "{name}" is forbidden: User "{requester.name}" cannot impersonate resource '
                f'"{resource}" in API group "{group}" {scope}', kind=plural, name=name, group=group)

    groups = list(asked.groups)
    if asked.user.startswith(SERVICE_ACCOUNT_PREFIX):
        namespace, _, account = asked.user[len(SERVICE_ACCOUNT_PREFIX):].partition(":")
        if not namespace or not account:
            raise errors.BadRequest(f"impersonation: {asked.user!r} is not a service account name "
                                    "(system:serviceaccount:<namespace>:<name>)")
        check("", "serviceaccounts", namespace, account)
        groups += ["system:serviceaccounts", f"system:serviceaccounts:{namespace}"]
    else:
        check("", "users", None, asked.user)
    for group in asked.groups:
        check("", "groups", None, group)
    if asked.uid is not None:
        check(AUTHENTICATION_GROUP, "uids", None, asked.uid)
    for key, values in asked.extra.items():
        for value in values:
            check(AUTHENTICATION_GROUP, f"userextras/{key}", None, value)
    groups.append(AUTHENTICATED)
    return User(name=asked.user, uid=asked.uid or "", groups=frozenset(groups),
                extra=tuple(sorted(asked.extra.items())))
