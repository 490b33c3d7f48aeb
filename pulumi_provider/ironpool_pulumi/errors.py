"""What a failed provider call tells the user: one line for what the user can fix (a wrong token, an
unreachable apiserver, a Machine no pool can take), a traceback only for a bug.

The dynamic-provider plugin (``python -m pulumi.dynamic``) answers any exception with the whole
``traceback.format_exc()`` as the gRPC error the engine prints, and offers no way to say less. So
when this package is loaded into the plugin process, :func:`install` puts a stand-in for the
``traceback`` module the plugin's ``__main__`` uses: for the errors :func:`one_line` knows it
returns the line, for anything else the real traceback. Outside the plugin it changes nothing.
"""

from __future__ import annotations

import sys
import traceback
from types import ModuleType
from typing import Any

from ironpool.api.errors import ApiError
from ironpool.client import ConfigError, ServerUnreachable

_PLUGIN_MAIN = "pulumi.dynamic.__main__"
TOKEN_HINT = "set it with `pulumi config set --secret ironpool:token TOKEN` (or IRONPOOL_TOKEN)"
SERVER_HINT = "check `pulumi config get ironpool:server` (or IRONPOOL_SERVER), and that the apiserver runs"


class ProviderError(Exception):
    """An operation failed; the message says what happened and what is left behind."""


def one_line(exc: BaseException) -> str | None:
    """The message a user sees for ``exc``, or None when it is a bug (which keeps its traceback)."""
    if isinstance(exc, ProviderError | ConfigError):
        return f"ironpool: {exc}"
    if isinstance(exc, ServerUnreachable):
        return f"ironpool: {exc}; {SERVER_HINT}"
    if isinstance(exc, ApiError):
        if exc.reason == "Unauthorized":
            return f"ironpool: the apiserver refused the token (Unauthorized): {TOKEN_HINT}"
        if exc.reason == "Forbidden":
            return f"ironpool: the token's user may not do this (Forbidden): {exc.message}"
        return f"ironpool: the apiserver answered {exc.reason}: {exc.message}"
    return None


class _OneLineTraceback:
    """The plugin's ``traceback`` module, but for the errors :func:`one_line` knows."""

    def __init__(self, real: ModuleType) -> None:
        self._real = real

    def format_exc(self, *args: Any, **kwargs: Any) -> str:
        exc = sys.exc_info()[1]
        text = one_line(exc) if exc is not None else None
        return text if text is not None else str(self._real.format_exc(*args, **kwargs))

    def __getattr__(self, name: str) -> Any:
        return getattr(self._real, name)


def install() -> None:
    """Make the plugin process report known errors in one line (see the module); idempotent."""
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    if main is None or getattr(spec, "name", None) != _PLUGIN_MAIN:
        return
    if getattr(main, "traceback", None) is traceback:
        main.traceback = _OneLineTraceback(traceback)  # type: ignore[attr-defined]
