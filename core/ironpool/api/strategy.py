"""The strategy of a kind: everything about it that is not the same for every kind.

Kubernetes gives each resource a ``RESTCreateStrategy``/``RESTUpdateStrategy`` (PrepareForCreate,
Validate, Canonicalize, ValidateUpdate, ...) and a table convertor. ironpool's :class:`Strategy` is
the same idea in one object: the kind's identity (:class:`ResourceInfo`), its defaults, its
validation on the typed model, its canonical form, its update rules, what its deletion does, and
its printer columns. What every kind shares (decoding, metadata checks, field paths in errors,
the status subresource split, generation bumps) is written once, in :mod:`ironpool.api.validation`
and the apiserver's registry, and calls these hooks.

Hooks run in this order on a write (see :mod:`ironpool.api.validation`):

1. the object is decoded into :attr:`ResourceInfo.model` and its metadata checked;
2. :meth:`Strategy.default` fills in what the client left out (on the typed model);
3. :meth:`Strategy.validate` reports the kind's own rules;
4. the model is dumped to its JSON form and :meth:`Strategy.canonicalize` folds it into the one
   form the store keeps;
5. on create, :meth:`Strategy.prepare_for_create`; on update, :meth:`Strategy.validate_update`
   compares the canonical old and new objects.
"""

from __future__ import annotations

from typing import Any, ClassVar, Generic, TypeVar

from pydantic import BaseModel

from ironpool.api.columns import AGE, NAME, Column
from ironpool.api.fieldpath import FieldErrors
from ironpool.api.resource_info import ResourceInfo
from ironpool.api.subresources import Subresource

M = TypeVar("M", bound=BaseModel)
Obj = dict[str, Any]

# Top-level fields that are not the desired state (everything else is: ``spec``, a class's
# ``capabilities``, a Secret's ``data``).
_NOT_DESIRED_STATE = frozenset({"apiVersion", "kind", "metadata", "status"})


class Strategy(Generic[M]):
    """How the API treats one kind; subclasses set :attr:`info` and override the hooks they need.

    Every hook has a do-nothing default, so a kind with no rules of its own is just its
    :class:`ResourceInfo` (see :class:`ironpool.api.strategies.event.EventStrategy`).
    """

    info: ClassVar[ResourceInfo]
    #: ``metadata.name`` must be a DNS label (IronCore's ``NameIsDNSLabel``), not a DNS subdomain.
    name_is_dns_label: ClassVar[bool] = False
    #: ``metadata.name`` need only be a valid path segment (RBAC's ``system:discovery``), as Kubernetes
    #: allows for the RBAC kinds.
    name_is_path_segment: ClassVar[bool] = False
    #: The table columns of ``get`` (``wide`` ones only with ``-o wide``).
    columns: ClassVar[tuple[Column, ...]] = (NAME, AGE)
    #: A controller completes the deletion (Namespace): DELETE always marks the object with a
    #: deletionTimestamp, and its last finalizer going does not remove it.
    finalized_by_controller: ClassVar[bool] = False
    #: The subresources the kind serves besides ``status`` (which :attr:`ResourceInfo.has_status`
    #: declares): ``binding``, ``eviction`` (see :mod:`ironpool.api.subresources`).
    subresources: ClassVar[tuple[Subresource, ...]] = ()

    def default(self, obj: M, errs: FieldErrors) -> None:
        """Fill in fields the client left empty (IronCore's defaulting and mutating admission)."""

    def validate(self, obj: M, errs: FieldErrors) -> None:
        """Report what is wrong with ``obj`` beyond its types, naming full field paths."""

    def canonicalize(self, obj: Obj) -> None:
        """Fold the JSON form into the one form the store keeps (a Secret's ``stringData``)."""

    def record_requester(self, obj: Obj, name: str, uid: str, groups: list[str],
                         extra: dict[str, list[str]]) -> None:
        """Record who creates ``obj`` (a CertificateSigningRequest's ``spec.username``...), in the
        JSON body before it is decoded: the apiserver's word, not the client's."""

    def prepare_for_create(self, obj: Obj) -> None:
        """Set what every new object of the kind starts with (a Namespace's ``Active`` phase)."""

    def validate_update(self, old: Obj, new: Obj, errs: FieldErrors) -> None:
        """Report changes the kind does not allow (immutable and set-once fields), on canonical dicts."""

    def prepare_for_delete(self, obj: Obj) -> None:
        """Change an object as its deletion starts (a Namespace's ``Terminating`` phase)."""

    def spec_of(self, obj: Obj) -> Obj:
        """What counts as the desired state for ``metadata.generation``: every top-level field but
        apiVersion, kind, metadata and status."""
        return {k: v for k, v in obj.items() if k not in _NOT_DESIRED_STATE}
