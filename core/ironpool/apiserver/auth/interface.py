"""What an authorizer is: a function of the user and the request's attributes that allows, refuses
(Forbidden), or allows on conditions it still has to see (:class:`Conditions`). The apiserver's own
is the chain in :mod:`.authorizer`; ``build_app`` takes any other."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

from ironpool.apiserver.auth.authentication import User
from ironpool.store.interface import Document, Store

ObjectCheck = Callable[[Document | None, Document | None, Store], Awaitable[None]]
"""``check(old, new, store)``: an authorizer's condition on the stored object (``None`` on create)
and the object about to be written (``None`` on delete); raises Forbidden to refuse. It runs inside
the write's read-modify-write loop, so it sees the object the write applies to without another read.
On a get it runs before the read with ``old`` and ``new`` None: an index unsure of its answer asks
the store (the pool graph a moment behind another apiserver).
"""


@dataclass(frozen=True)
class Conditions:
    """What an authorizer still has to see before it allows a request it could not decide from the
    request line alone: ``selector(fieldSelector)`` for list and watch, ``objects`` (see
    :data:`ObjectCheck`) for create, update, patch, delete and get. Either raises Forbidden."""

    selector: Callable[[str], None] | None = None
    objects: ObjectCheck | None = None


class Authorizer(Protocol):
    """``authorize(user, verb, resource, namespace, name, group=...)``: return to allow, raise
    Forbidden to deny.

    ``verb`` is a Kubernetes verb (get, list, watch, create, update, patch, delete) and ``resource``
    the plural, with ``/<subresource>`` for a subresource (``machines/status``, ``machines/binding``).
    ``group`` is the API group the request named: the resource's own, or an alias group serving it
    (:mod:`ironpool.api.group_aliases`); None stands for the resource's own group. Returning
    :class:`Conditions` allows the request only if they hold; ``None`` allows it outright (the
    common, free case).
    """

    def __call__(self, user: User, verb: str, resource: str, namespace: str | None, name: str | None,
                 group: str | None = None) -> Conditions | None: ...
