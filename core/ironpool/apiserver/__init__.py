"""ironpool.apiserver: the REST apiserver, and the names other parts of ironpool start it with.

Code outside the apiserver (``ironpool up``, ``ironpool join``, the CLI) imports what it needs from
here, not from the module that defines it, so the apiserver's rooms can be rearranged without
touching its callers. The names are imported on first use: ``is_loopback`` does not load Starlette.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ironpool.lazy import lazy_exports

if TYPE_CHECKING:
    from ironpool.apiserver.app import build_app, serve
    from ironpool.apiserver.auth.authentication import Authenticator, parse_token_file
    from ironpool.apiserver.auth.pool_authorizer import (
        MACHINE_POOL_USER_PREFIX,
        MACHINE_POOLS_GROUP,
        VOLUME_POOL_USER_PREFIX,
        VOLUME_POOLS_GROUP,
    )
    from ironpool.apiserver.auth.tokenfile import append_lines, token_line
    from ironpool.apiserver.options import ServerOptions
    from ironpool.apiserver.serving.certs import CertificateAuthority, ensure_serving_cert, write_private
    from ironpool.apiserver.serving.connections import ConnectionLimits, uvicorn_options
    from ironpool.apiserver.serving.listening import ListenError
    from ironpool.apiserver.serving.tls import TlsFiles, is_loopback

_MODULES = {
    "build_app": "app", "serve": "app", "ServerOptions": "options",
    "Authenticator": "auth.authentication", "parse_token_file": "auth.authentication",
    "append_lines": "auth.tokenfile", "token_line": "auth.tokenfile",
    "MACHINE_POOL_USER_PREFIX": "auth.pool_authorizer", "MACHINE_POOLS_GROUP": "auth.pool_authorizer",
    "VOLUME_POOL_USER_PREFIX": "auth.pool_authorizer", "VOLUME_POOLS_GROUP": "auth.pool_authorizer",
    "CertificateAuthority": "serving.certs", "ensure_serving_cert": "serving.certs",
    "write_private": "serving.certs",
    "ConnectionLimits": "serving.connections", "uvicorn_options": "serving.connections",
    "ListenError": "serving.listening",
    "TlsFiles": "serving.tls", "is_loopback": "serving.tls",
}

__all__ = [
    "MACHINE_POOLS_GROUP",
    "MACHINE_POOL_USER_PREFIX",
    "VOLUME_POOLS_GROUP",
    "VOLUME_POOL_USER_PREFIX",
    "Authenticator",
    "CertificateAuthority",
    "ConnectionLimits",
    "ListenError",
    "ServerOptions",
    "TlsFiles",
    "append_lines",
    "build_app",
    "ensure_serving_cert",
    "is_loopback",
    "parse_token_file",
    "serve",
    "token_line",
    "uvicorn_options",
    "write_private",
]

__getattr__ = lazy_exports(__name__, _MODULES)
