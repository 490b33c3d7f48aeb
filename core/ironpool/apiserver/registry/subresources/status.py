"""The ``status`` subresource, as Kubernetes' status strategy: GET answers the whole object; PUT and
PATCH (merge, strategic, apply) change only its ``status``, validated by the kind's status rules
(:func:`ironpool.api.validation.validate_status_update`). Everything else of the object stays as
stored, so the controller that reports a status cannot change what the user asked for, and the
generation does not move. Field ownership tracks status writes apart (``subresource: status``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ironpool.api.resource_info import ResourceInfo
from ironpool.api.subresources import Subresource
from ironpool.api.validation import validate_status_update
from ironpool.apiserver.registry.subresources.handler import SubresourceHandler
from ironpool.store.interface import Document

if TYPE_CHECKING:
    from ironpool.apiserver.registry.generic import Registry


class StatusHandler(SubresourceHandler[Subresource]):
    """``<plural>/status`` of every kind with a status."""

    name = "status"

    async def get(self, registry: Registry, info: ResourceInfo, namespace: str | None, name: str) -> bytes:
        return await registry.get_raw(info, namespace, name)

    def prepare(self, info: ResourceInfo, old: Document, new: Document) -> Document:
        """``old`` with ``new``'s status (validated), and nothing else of ``new``."""
        validated = validate_status_update(info, old, new)
        result = dict(old)
        if "status" in validated:
            result["status"] = validated["status"]
        else:
            result.pop("status", None)
        return result
