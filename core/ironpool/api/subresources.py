"""The subresources a kind serves, as its strategy declares them.

Kubernetes serves ``pods/status``, ``pods/binding`` and ``pods/eviction`` beside ``pods``: a path
segment after the object's name, with verbs of its own and, for ``create``, a body of another kind.
A kind lists its subresources on its strategy (:attr:`ironpool.api.strategy.Strategy.subresources`;
``status`` comes with :attr:`ResourceInfo.has_status`). The apiserver serves each with the handler
of the same name (``ironpool.apiserver.registry.subresources``), lists it in discovery and OpenAPI,
and authorizes it as ``<plural>/<name>``; a path with another segment is a 404.

A Machine's::

    # api/strategies/machine.py
    subresources = (PoolBinding(pool_kind="MachinePool", pool_ref="machinePoolRef"),
                    PoolEviction(pool_ref="machinePoolRef"))
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Subresource:
    """One subresource: its path segment, the Kubernetes verbs it answers (``get``, ``create``,
    ``update``, ``patch``), and for ``create`` the ``(apiVersion, kind)`` of the body it takes."""

    name: str
    verbs: tuple[str, ...]
    body: tuple[str, str] | None = None

    @property
    def body_hint(self) -> str:
        """What to send instead of another verb (``POST a Binding``), or ''."""
        if self.verbs != ("create",) or self.body is None:
            return ""
        kind = self.body[1]
        return f"POST {'an' if kind[0] in 'AEIOU' else 'a'} {kind}"


#: The status subresource: the object's ``status``, written apart from the rest.
STATUS = Subresource("status", ("get", "update", "patch"))


@dataclass(frozen=True, kw_only=True)
class PoolBinding(Subresource):
    """``<plural>/binding``, after ``pods/binding``: a ``v1`` Binding naming a pool of ``pool_kind``
    sets ``spec.<pool_ref>``; with ``class_ref``, only of an object that has ``spec.<class_ref>``
    (a Volume without a class has no pool)."""

    name: str = "binding"
    verbs: tuple[str, ...] = ("create",)
    body: tuple[str, str] | None = ("v1", "Binding")
    pool_kind: str
    pool_ref: str
    class_ref: str | None = None


@dataclass(frozen=True, kw_only=True)
class PoolEviction(Subresource):
    """``<plural>/eviction``, after ``pods/eviction``: a ``policy/v1`` Eviction clears
    ``spec.<pool_ref>``, the pool the object is bound to."""

    name: str = "eviction"
    verbs: tuple[str, ...] = ("create",)
    body: tuple[str, str] | None = ("policy/v1", "Eviction")
    pool_ref: str


@dataclass(frozen=True, kw_only=True)
class PoolExec(Subresource):
    """``<plural>/exec``, after ``pods/exec``: the object's console, streamed over a websocket from the
    daemon of the pool ``spec.<pool_ref>`` names (a pool of ``pool_kind``, whose
    ``status.daemonEndpoints`` says where that daemon listens). Authorized as ``create``, as
    Kubernetes authorizes ``pods/exec``; a POST without a websocket upgrade is a 400 naming it."""

    name: str = "exec"
    verbs: tuple[str, ...] = ("create",)
    pool_kind: str
    pool_ref: str
