"""JSON bodies and Kubernetes ``Status`` errors as Starlette responses."""

from __future__ import annotations

from typing import Any

import orjson
from starlette.responses import Response

from ironpool.api import errors
from ironpool.apiserver.endpoints.bodies import JSON


def json_response(data: Any, status: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(orjson.dumps(data), status_code=status, media_type=JSON, headers=headers)


def error_response(exc: errors.ApiError) -> Response:
    headers = None if exc.retry_after_seconds is None else {"Retry-After": str(exc.retry_after_seconds)}
    return json_response(exc.to_status(), exc.code, headers)
