"""Why an image could not be had, each with the IRI error a runtime answers and a reason word.

The reason (``ImageNotFound``, ``ImagePulling``, ...) travels beside the message (see
:mod:`ironpool.runtime.service`), so a poollet can name the cause in a Machine's condition without
parsing the message.
"""

from __future__ import annotations

from ironpool.runtime import errors


class ImageError(Exception):
    """Base of image errors: ``iri`` is the runtime error class, ``reason`` one CamelCase word."""

    iri: type[errors.IriError] = errors.Internal
    reason = "ImagePullFailed"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message

    def as_iri(self, field: str) -> errors.IriError:
        """The runtime error for this failure, its message starting with ``field``."""
        err = self.iri(f"{field}: {self.message}")
        err.reason = self.reason
        return err


class InvalidImageName(ImageError):
    """The reference is neither a catalog name, an OCI reference nor an https/file URL."""

    iri = errors.InvalidArgument
    reason = "InvalidImageReference"


class ImageNotFound(ImageError):
    """No such image: not in the catalog, a 404 from the registry or server, no such file."""

    iri = errors.NotFound
    reason = "ImageNotFound"


class ImageUnauthorized(ImageError):
    """The registry or server refused the credentials given (or their absence)."""

    iri = errors.FailedPrecondition
    reason = "ImageUnauthorized"


class ImageUnreachable(ImageError):
    """The registry or server could not be reached (refused, unknown host, TLS failure)."""

    iri = errors.Unavailable
    reason = "RegistryUnreachable"


class NotAnImage(ImageError):
    """The artifact is not an IronCore image, or its disk is not a usable qcow2/raw file."""

    iri = errors.FailedPrecondition
    reason = "NotAnImage"


class DigestMismatch(ImageError):
    """What arrived does not have the digest the reference or checksum demands."""

    iri = errors.FailedPrecondition
    reason = "ImageDigestMismatch"


class NoSpace(ImageError):
    """The host's image cache ran out of disk space."""

    iri = errors.ResourceExhausted
    reason = "ImageCacheFull"


class ImagePulling(ImageError):
    """The image is being pulled; asking again later finds it (or its failure)."""

    iri = errors.Unavailable
    reason = "ImagePulling"
