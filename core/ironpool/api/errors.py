"""API errors as Kubernetes ``Status`` objects.

The apiserver raises these and renders them with :meth:`ApiError.to_status`; the client turns a
``Status`` response back into the same class with :func:`from_status`, so callers on both sides of
the wire catch the same exceptions.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar


@dataclass(frozen=True)
class Cause:
    """One reason an object is invalid, naming the field path (``spec.machineClassRef``)."""

    field: str
    message: str
    reason: str = "FieldValueInvalid"

    def to_dict(self) -> dict[str, str]:
        return {"field": self.field, "message": self.message, "reason": self.reason}


@dataclass
class ApiError(Exception):
    """Base of every API error; ``code`` and ``reason`` follow Kubernetes' ``StatusReason``."""

    message: str
    kind: str = ""
    name: str = ""
    group: str = ""
    causes: list[Cause] = field(default_factory=list)
    retry_after_seconds: int | None = None

    code: ClassVar[int] = 500
    reason: ClassVar[str] = "InternalError"

    def __post_init__(self) -> None:
        Exception.__init__(self, self.message)

    def __str__(self) -> str:
        return self.message

    def to_status(self) -> dict[str, Any]:
        status: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        details: dict[str, Any] = {}
        if self.name:
            details["name"] = self.name
        if self.group:
            details["group"] = self.group
        if self.kind:
            details["kind"] = self.kind
        if self.causes:
            details["causes"] = [c.to_dict() for c in self.causes]
        if self.retry_after_seconds is not None:
            details["retryAfterSeconds"] = self.retry_after_seconds
        if details:
            status["details"] = details
        return status


class BadRequest(ApiError):
    code = 400
    reason = "BadRequest"


class Unauthorized(ApiError):
    code = 401
    reason = "Unauthorized"


class Forbidden(ApiError):
    code = 403
    reason = "Forbidden"


class NotFound(ApiError):
    code = 404
    reason = "NotFound"


class MethodNotAllowed(ApiError):
    code = 405
    reason = "MethodNotAllowed"


class AlreadyExists(ApiError):
    code = 409
    reason = "AlreadyExists"


class Conflict(ApiError):
    code = 409
    reason = "Conflict"


class Expired(ApiError):
    """A watch or continue token names a revision that has been compacted away: relist."""

    code = 410
    reason = "Expired"


class UnsupportedMediaType(ApiError):
    code = 415
    reason = "UnsupportedMediaType"


class Invalid(ApiError):
    code = 422
    reason = "Invalid"


class TooManyRequests(ApiError):
    code = 429
    reason = "TooManyRequests"


class InternalError(ApiError):
    code = 500
    reason = "InternalError"


class ServiceUnavailable(ApiError):
    code = 503
    reason = "ServiceUnavailable"


_BY_REASON: dict[str, type[ApiError]] = {
    cls.reason: cls
    for cls in (
        BadRequest, Unauthorized, Forbidden, NotFound, MethodNotAllowed, AlreadyExists, Conflict,
        Expired, UnsupportedMediaType, Invalid, TooManyRequests, InternalError, ServiceUnavailable,
    )
}
_BY_CODE: dict[int, type[ApiError]] = {
    400: BadRequest, 401: Unauthorized, 403: Forbidden, 404: NotFound, 405: MethodNotAllowed,
    409: Conflict, 410: Expired, 415: UnsupportedMediaType, 422: Invalid, 429: TooManyRequests,
    503: ServiceUnavailable,
}


def from_status(status: dict[str, Any], http_code: int | None = None) -> ApiError:
    """Rebuild the error a ``Status`` body describes (the client side of :meth:`ApiError.to_status`)."""
    reason = str(status.get("reason") or "")
    code = int(status.get("code") or http_code or 500)
    cls = _BY_REASON.get(reason) or _BY_CODE.get(code, InternalError)
    details = status.get("details") or {}
    causes = [
        Cause(field=str(c.get("field", "")), message=str(c.get("message", "")),
              reason=str(c.get("reason", "FieldValueInvalid")))
        for c in details.get("causes") or []
    ]
    return cls(
        message=str(status.get("message") or reason or f"HTTP {code}"),
        kind=str(details.get("kind", "")),
        name=str(details.get("name", "")),
        group=str(details.get("group", "")),
        causes=causes,
        retry_after_seconds=details.get("retryAfterSeconds"),
    )
