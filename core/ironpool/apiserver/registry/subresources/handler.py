"""What a subresource's handler is: the verbs of one subresource, for every kind that declares it.

Kubernetes serves a subresource with a REST storage of its own beside the resource's
(``pods/status`` a status strategy over the same store, ``pods/binding`` a ``Create`` that binds);
the HTTP handlers in front are the same for every resource. Here too: the endpoints read the
request, authorize it as ``<plural>/<name>`` and call the handler's method for the verb, which works
through the :class:`~ironpool.apiserver.registry.generic.Registry` (its read-modify-write, admission,
the store's compare-and-swap):

- ``get``: :meth:`SubresourceHandler.get`;
- ``create`` (POST to the subresource): :meth:`SubresourceHandler.create`, answered with 201;
- ``update`` and ``patch`` (PUT, and PATCH of every patch type): the registry's update, patch and
  apply of the subresource, which make the object to store with the handler's
  :meth:`SubresourceHandler.prepare` in place of the main resource's rules.

The verbs a subresource answers are those its declaration lists; a handler implements those of
every declaration of its name (checked when the handlers are registered).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, Generic, TypeVar, cast

from ironpool.api.resource_info import ResourceInfo
from ironpool.api.resources import subresources_of
from ironpool.api.subresources import Subresource
from ironpool.store.interface import Document

if TYPE_CHECKING:
    from ironpool.apiserver.auth import ObjectCheck
    from ironpool.apiserver.registry.generic import Registry


S = TypeVar("S", bound=Subresource)
#: the handler's method that serves each verb
_METHOD_OF_VERB = {"get": "get", "create": "create", "update": "prepare", "patch": "prepare"}


class SubresourceHandler(Generic[S]):
    """Serves the subresource :attr:`name` of every kind whose strategy declares it (as a
    :attr:`declared_as`, whose settings it reads); subclasses override the methods of the verbs they
    serve."""

    name: ClassVar[str]
    declared_as: type[Subresource] = Subresource

    def declaration(self, info: ResourceInfo) -> S:
        """What ``info``'s strategy declares for this subresource, with its settings (the pool field
        of a :class:`~ironpool.api.subresources.PoolBinding`...)."""
        return cast(S, subresources_of(info)[self.name])

    def serves(self) -> frozenset[str]:
        """The verbs this handler implements (the methods it overrides)."""
        cls = type(self)
        return frozenset(verb for verb, method in _METHOD_OF_VERB.items()
                         if getattr(cls, method) is not getattr(SubresourceHandler, method))

    async def get(self, registry: Registry, info: ResourceInfo, namespace: str | None, name: str) -> bytes:
        """GET: the stored object as JSON."""
        raise NotImplementedError

    async def create(self, registry: Registry, info: ResourceInfo, namespace: str | None, name: str,
                     body: Any, *, dry_run: bool = False, check: ObjectCheck | None = None) -> Document:
        """POST: act on the object; the answer (a ``Status``)."""
        raise NotImplementedError

    def prepare(self, info: ResourceInfo, old: Document, new: Document) -> Document:
        """PUT and PATCH: the object to store when a write of this subresource turned ``old`` into
        ``new`` (in place of the main resource's
        :func:`~ironpool.apiserver.registry.objectmeta.prepare_update`)."""
        raise NotImplementedError


def created(info: ResourceInfo, obj: Document) -> Document:
    """The ``Status`` a ``create`` on a subresource answers with: Success (201), and the object's
    new resourceVersion (Kubernetes answers a binding and an eviction so)."""
    m = obj["metadata"]
    return {"kind": "Status", "apiVersion": "v1", "status": "Success", "code": 201,
            "metadata": {"resourceVersion": m.get("resourceVersion", "")},
            "details": {"name": m.get("name"), "group": info.group, "kind": info.plural}}
