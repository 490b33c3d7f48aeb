"""Errors the runtimes raise, each carrying the gRPC status code their server answers with."""

from __future__ import annotations

import grpc


class IriError(Exception):
    """A request failed for a reason the caller can act on; ``code`` is the gRPC status code."""

    code: grpc.StatusCode = grpc.StatusCode.INTERNAL

    def __init__(self, message: str, reason: str = "") -> None:
        super().__init__(message)
        self.message = message
        # One CamelCase word a caller can put in a condition (``ImageNotFound``); sent beside the
        # status as the trailing metadata REASON_METADATA.
        self.reason = reason


REASON_METADATA = "ironpool-reason"


class InvalidArgument(IriError):
    """The request is malformed or names something unusable; the message names the field."""

    code = grpc.StatusCode.INVALID_ARGUMENT


class NotFound(IriError):
    """The machine, volume, snapshot, class, image or attachment the request names does not exist."""

    code = grpc.StatusCode.NOT_FOUND


class AlreadyExists(IriError):
    """A volume or interface of that name is already attached."""

    code = grpc.StatusCode.ALREADY_EXISTS


class ResourceExhausted(IriError):
    """The storage pool (or the image cache) has not enough free space for the request."""

    code = grpc.StatusCode.RESOURCE_EXHAUSTED


class FailedPrecondition(IriError):
    """The object is in a state that forbids the call (being deleted, attached, console in use)."""

    code = grpc.StatusCode.FAILED_PRECONDITION


class Unimplemented(IriError):
    """A feature this runtime does not offer (volume encryption)."""

    code = grpc.StatusCode.UNIMPLEMENTED


class Unavailable(IriError):
    """libvirtd or an image registry cannot be reached right now, or an image is still being
    pulled; the caller retries."""

    code = grpc.StatusCode.UNAVAILABLE


class Internal(IriError):
    """libvirt, qemu-img or the host failed underneath."""

    code = grpc.StatusCode.INTERNAL
