"""The handlers of the subresources kinds declare on their strategies
(:mod:`ironpool.api.subresources`), one module each: ``status`` (:mod:`.status`), ``binding``
(:mod:`.binding`), ``approval`` of a CSR (:mod:`.approval`), ``eviction`` (:mod:`.eviction`),
``exec`` (:mod:`.exec_handler`: where a console
is served; the stream itself is :mod:`ironpool.apiserver.endpoints.exec_stream`); what a handler is:
:mod:`.handler`.

A new subresource is its declaration on the strategies of the kinds that serve it, and its handler:
a module here with a :class:`~.handler.SubresourceHandler` for the verbs it serves, and its line in
:data:`HANDLERS`. Routing, authorization (``<plural>/<name>``), discovery and OpenAPI follow from
the declaration.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ironpool.api.resources import RESOURCES, subresources_of
from ironpool.apiserver.registry.subresources.approval import ApprovalHandler
from ironpool.apiserver.registry.subresources.binding import BindingHandler
from ironpool.apiserver.registry.subresources.eviction import EvictionHandler
from ironpool.apiserver.registry.subresources.exec_handler import ExecHandler
from ironpool.apiserver.registry.subresources.handler import SubresourceHandler
from ironpool.apiserver.registry.subresources.status import StatusHandler

HANDLERS: dict[str, SubresourceHandler[Any]] = {
    h.name: h
    for h in (StatusHandler(), BindingHandler(), EvictionHandler(), ExecHandler(), ApprovalHandler())
}


def check_handlers(handlers: Mapping[str, SubresourceHandler[Any]]) -> None:
    """Refuse (at import) a subresource some kind declares that no handler serves, or not with the
    settings or verbs it declares, naming both."""
    for info in RESOURCES:
        for sub in subresources_of(info).values():
            handler = handlers.get(sub.name)
            if handler is None:
                raise RuntimeError(f"{info.kind} declares the subresource {sub.name!r}, which has no handler "
                                   f"(handlers: {', '.join(handlers)})")
            if not isinstance(sub, handler.declared_as):
                raise RuntimeError(f"{info.kind} declares {info.plural}/{sub.name} as a "
                                   f"{type(sub).__name__}, but {type(handler).__name__} serves a "
                                   f"{handler.declared_as.__name__}")
            missing = set(sub.verbs) - handler.serves()
            if missing:
                raise RuntimeError(f"{info.kind} declares {info.plural}/{sub.name} with the verbs "
                                   f"{', '.join(sorted(missing))}, which {type(handler).__name__} does not "
                                   "serve")


check_handlers(HANDLERS)

__all__ = ["HANDLERS", "SubresourceHandler", "check_handlers"]
