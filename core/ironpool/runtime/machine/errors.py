"""Errors the machine runtime raises; the gRPC layer turns each into its status code."""

from __future__ import annotations

import grpc


class IriError(Exception):
    """An error with the gRPC status code the client should see."""

    code: grpc.StatusCode = grpc.StatusCode.INTERNAL

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class InvalidArgument(IriError):
    """The request is malformed; names the offending field."""

    code = grpc.StatusCode.INVALID_ARGUMENT


class NotFound(IriError):
    """The named machine, class, image, network, volume or interface does not exist."""

    code = grpc.StatusCode.NOT_FOUND


class AlreadyExists(IriError):
    """A volume or interface of that name is already attached."""

    code = grpc.StatusCode.ALREADY_EXISTS


class FailedPrecondition(IriError):
    """The machine is in a state that forbids the call (being deleted, console in use)."""

    code = grpc.StatusCode.FAILED_PRECONDITION


class Internal(IriError):
    """libvirt or the host failed underneath."""

    code = grpc.StatusCode.INTERNAL


class Unavailable(IriError):
    """libvirtd cannot be reached right now; the caller retries."""

    code = grpc.StatusCode.UNAVAILABLE
