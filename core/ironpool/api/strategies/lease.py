"""Lease (``coordination.k8s.io/v1``): validated as Kubernetes validates it (positive duration,
non-negative transitions, MicroTime times); the scheduler's leader election lives in one."""

from __future__ import annotations

from ironpool.api.columns import AGE, NAME, Column, field
from ironpool.api.coordination import COORDINATION_GROUP, COORDINATION_VERSION, Lease, parse_micro
from ironpool.api.fieldpath import FieldErrors
from ironpool.api.resource_info import ResourceInfo
from ironpool.api.strategy import Strategy


class LeaseStrategy(Strategy[Lease]):
    """Field rules of a Lease; no status, no finalizing controller."""

    info = ResourceInfo(COORDINATION_GROUP, COORDINATION_VERSION, "Lease", "leases", "lease", (), True, Lease,
                        False)
    columns = (NAME, Column("HOLDER", field("spec.holderIdentity")), AGE)

    def validate(self, obj: Lease, errs: FieldErrors) -> None:
        spec = obj.spec
        if spec is None:
            return
        if spec.lease_duration_seconds is not None and spec.lease_duration_seconds <= 0:
            errs.invalid("spec.leaseDurationSeconds", spec.lease_duration_seconds, "must be greater than 0")
        if spec.lease_transitions is not None and spec.lease_transitions < 0:
            errs.invalid("spec.leaseTransitions", spec.lease_transitions,
                         "must be greater than or equal to 0")
        for path, value in (("spec.acquireTime", spec.acquire_time), ("spec.renewTime", spec.renew_time)):
            if value is None:
                continue
            try:
                parse_micro(value)
            except ValueError:
                errs.invalid(path, value, "must be an RFC 3339 time (2006-01-02T15:04:05.000000Z)")
