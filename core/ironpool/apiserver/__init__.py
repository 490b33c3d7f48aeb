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
    from ironpool.apiserver.auth import Authenticator, parse_token_file
    from ironpool.apiserver.authz import (
        MACHINE_POOL_USER_PREFIX,
        MACHINE_POOLS_GROUP,
        VOLUME_POOL_USER_PREFIX,
        VOLUME_POOLS_GROUP,
    )
    from ironpool.apiserver.certs import CertificateAuthority, ensure_serving_cert, write_private
    from ironpool.apiserver.connections import ConnectionLimits, uvicorn_options
    from ironpool.apiserver.options import ServerOptions
    from ironpool.apiserver.tls import TlsFiles, is_loopback
    from ironpool.apiserver.tokenfile import append_lines, token_line

_MODULES = {
    "build_app": "app", "serve": "app", "ServerOptions": "options",
    "Authenticator": "auth", "parse_token_file": "auth",
    "append_lines": "tokenfile", "token_line": "tokenfile",
    "MACHINE_POOL_USER_PREFIX": "authz", "MACHINE_POOLS_GROUP": "authz",
    "VOLUME_POOL_USER_PREFIX": "authz", "VOLUME_POOLS_GROUP": "authz",
    "CertificateAuthority": "certs", "ensure_serving_cert": "certs", "write_private": "certs",
    "ConnectionLimits": "connections", "uvicorn_options": "connections",
    "TlsFiles": "tls", "is_loopback": "tls",
}

__all__ = [
    "MACHINE_POOLS_GROUP",
    "MACHINE_POOL_USER_PREFIX",
    "VOLUME_POOLS_GROUP",
    "VOLUME_POOL_USER_PREFIX",
    "Authenticator",
    "CertificateAuthority",
    "ConnectionLimits",
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
