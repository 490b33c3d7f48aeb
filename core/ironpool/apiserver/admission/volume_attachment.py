"""``ExclusiveVolumeAttachment`` (an ironpool addition): a Volume is attached read-write to at most one
domain at a time, across hosts.

The attachment is the Volume's ``status.attachment`` (``machineRef``, ``pool``, ``since``), recorded by
the machinepoollet before it starts a domain with the Volume. A write that changes it from one holder
(Machine uid and pool) to another is refused with 409 Conflict naming the holder: it must be cleared
first, by the holder's poollet once its domain is gone, or by the pool lifecycle controller once the
holder's host fenced itself. Setting it needs no guard key: it is one field of one object, so the
registry's read-modify-write decides on the stored Volume and writes on that revision (two poollets
that both saw it free: one commits, the other is judged again on the new state and refused). A new
attachment must name its Machine (name and uid) and pool (422 Invalid naming the field).
"""

from __future__ import annotations

from typing import Any, ClassVar

from ironpool.api import errors
from ironpool.api.fieldpath import FieldErrors
from ironpool.api.validation import raise_if_invalid
from ironpool.apiserver.admission.plugin import AdmissionPlugin, Attributes
from ironpool.store.interface import Document

FIELD = "status.attachment"


def attachment_of(doc: Document | None) -> dict[str, Any] | None:
    held = ((doc or {}).get("status") or {}).get("attachment")
    return held if isinstance(held, dict) else None


def holder(held: dict[str, Any]) -> tuple[str, str]:
    """Who holds an attachment: the Machine's uid and the pool."""
    return str((held.get("machineRef") or {}).get("uid") or ""), str(held.get("pool") or "")


def describe(held: dict[str, Any]) -> str:
    ref = held.get("machineRef") or {}
    since = f" since {held['since']}" if held.get("since") else ""
    return f'machine "{ref.get("name")}" (uid {ref.get("uid")}) on pool "{held.get("pool")}"{since}'


def attachment_errors(old: Document | None, new: Document | None) -> tuple[FieldErrors, str | None]:
    """What is wrong with the attachment ``new`` sets (field errors), and a conflict's message if it
    takes the Volume from another holder. Pure, for the plugin and its tests."""
    errs = FieldErrors()
    before, after = attachment_of(old), attachment_of(new)
    if after is None or after == before:
        return errs, None
    ref = after.get("machineRef") or {}
    if not ref.get("name"):
        errs.required(f"{FIELD}.machineRef.name", "the Machine holding the volume")
    if not ref.get("uid"):
        errs.required(f"{FIELD}.machineRef.uid", "the uid of the Machine holding the volume")
    if not after.get("pool"):
        errs.required(f"{FIELD}.pool", "the MachinePool whose host runs the domain")
    if before is not None and holder(before) != holder(after):
        return errs, (f"the volume is attached to {describe(before)}; it is attached to one running "
                      "domain at a time: it must be released before another machine attaches it")
    return errs, None


class ExclusiveVolumeAttachment(AdmissionPlugin):
    """Refuses taking a Volume's attachment from its holder (see the module docstring)."""

    name: ClassVar[str] = "ExclusiveVolumeAttachment"
    kinds: ClassVar[frozenset[str] | None] = frozenset({"Volume"})

    def validate(self, attrs: Attributes) -> None:
        if attrs.operation != "UPDATE" or attrs.new is None:
            return
        errs, conflict = attachment_errors(attrs.old, attrs.new)
        raise_if_invalid(attrs.info, attrs.new, errs)
        if conflict:
            name = str((attrs.new.get("metadata") or {}).get("name") or attrs.name)
            raise errors.Conflict(conflict, kind=attrs.info.plural, name=name, group=attrs.info.group)
