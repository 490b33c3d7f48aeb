"""Errors raised by the volume runtime's logic, each carrying the gRPC status code to answer with."""

from __future__ import annotations

import grpc


class VolumeFault(Exception):
    """A request failed for a reason the caller can act on; ``code`` is the gRPC status code."""

    code: grpc.StatusCode = grpc.StatusCode.INTERNAL

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidArgument(VolumeFault):
    """The request is malformed or names something that cannot be used (unknown class, bad size)."""

    code = grpc.StatusCode.INVALID_ARGUMENT


class NotFound(VolumeFault):
    """The volume, snapshot or image the request names does not exist."""

    code = grpc.StatusCode.NOT_FOUND


class ResourceExhausted(VolumeFault):
    """The storage pool has not enough free space for the request."""

    code = grpc.StatusCode.RESOURCE_EXHAUSTED


class FailedPrecondition(VolumeFault):
    """The object is in a state that forbids the operation (a volume still attached to a domain)."""

    code = grpc.StatusCode.FAILED_PRECONDITION


class Unimplemented(VolumeFault):
    """A feature this runtime does not offer (volume encryption)."""

    code = grpc.StatusCode.UNIMPLEMENTED


class Unavailable(VolumeFault):
    """libvirt cannot be reached right now; the caller should retry."""

    code = grpc.StatusCode.UNAVAILABLE


class Internal(VolumeFault):
    """Something failed on the host (libvirt or qemu-img error)."""

    code = grpc.StatusCode.INTERNAL
