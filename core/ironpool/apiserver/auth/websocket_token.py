"""A bearer token carried in a websocket's subprotocols, as the kube-apiserver accepts it.

Browsers cannot set an ``Authorization`` header on a websocket; Kubernetes lets them offer the token
as a subprotocol instead, ``base64url.bearer.authorization.k8s.io.<token, base64url without
padding>``, beside the protocol they speak. The web console opens ``machines/exec`` that way. Only
websocket upgrades are read so: an HTTP request carries its token in its header.
"""

from __future__ import annotations

import base64
import binascii

from starlette.types import Scope

from ironpool.api import errors

PREFIX = "base64url.bearer.authorization.k8s.io."


def websocket_bearer(scope: Scope) -> str | None:
    """``Bearer <token>`` from a websocket's subprotocols, or None when none carries one (or this is
    no websocket). A malformed one is refused as Kubernetes refuses it: 401."""
    if scope.get("type") != "websocket":
        return None
    for protocol in scope.get("subprotocols") or ():
        if protocol.startswith(PREFIX):
            encoded = protocol[len(PREFIX):]
            try:
                token = base64.urlsafe_b64decode(encoded + "=" * (-len(encoded) % 4)).decode()
            except (binascii.Error, UnicodeDecodeError):
                raise errors.Unauthorized(f"the subprotocol {PREFIX}<token> must carry the token "
                                          "base64url-encoded") from None
            if not token:
                raise errors.Unauthorized(f"the subprotocol {PREFIX}<token> carries an empty token")
            return f"Bearer {token}"
    return None
