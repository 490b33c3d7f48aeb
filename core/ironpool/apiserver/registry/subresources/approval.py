"""``certificatesigningrequests/approval``, as Kubernetes' approval strategy: a PUT or PATCH changes
only the request's ``status.conditions`` (Approved, Denied, Failed), validated by the kind's rules, so
whoever may approve cannot also issue a certificate or change what was asked; the certificate is
written through ``/status`` by the signer."""

from __future__ import annotations

from typing import TYPE_CHECKING

from ironpool.api import errors
from ironpool.api.fieldpath import FieldErrors
from ironpool.api.resource_info import ResourceInfo
from ironpool.api.resources import strategy_for
from ironpool.api.subresources import Subresource
from ironpool.api.validation import raise_if_invalid, validate_status_update
from ironpool.apiserver.registry.subresources.handler import SubresourceHandler
from ironpool.store.interface import Document

if TYPE_CHECKING:
    from ironpool.apiserver.registry.generic import Registry


class ApprovalHandler(SubresourceHandler[Subresource]):
    """``<plural>/approval`` of a CertificateSigningRequest."""

    name = "approval"

    async def get(self, registry: Registry, info: ResourceInfo, namespace: str | None, name: str) -> bytes:
        return await registry.get_raw(info, namespace, name)

    def prepare(self, info: ResourceInfo, old: Document, new: Document) -> Document:
        """``old`` with ``new``'s status conditions (validated), its certificate kept."""
        if not isinstance(new, dict):
            raise errors.BadRequest(message=f"{info.kind} must be a JSON object", kind=info.kind,
                                    group=info.group)
        status = dict(old.get("status") or {})
        conditions = (new.get("status") or {}).get("conditions")
        if conditions:
            status["conditions"] = conditions
        else:
            status.pop("conditions", None)
        result = validate_status_update(info, old, {**new, "status": status or None})
        errs = FieldErrors()
        strategy_for(info).validate_update(old, result, errs)  # a decision once made stays
        raise_if_invalid(info, result, errs)
        return result
