"""Secrets read one at a time, by name, as a kubelet reads them: a pool identity may get only the
Secrets its Machines or Volumes reference (the apiserver's pool graph) and may not list or watch
Secrets at all, so the poollets cannot keep an informer of them.

A reconcile :meth:`SecretReader.refresh` es the Secrets of the object it handles before resolving it;
:meth:`SecretReader.get` then answers from what was read. A Secret created after its Machine is found
by the next reconcile (the reconcilers requeue while they wait for one).
"""

from __future__ import annotations

import base64
import logging

from ironpool.api import errors
from ironpool.api.core import Secret
from ironpool.client.rest import AsyncClient
from ironpool.poollet.waiting import Dependency, Waiting

log = logging.getLogger("ironpool.poollet")

SECRET_RETRY = 2.0
"""Seconds before a reconcile waiting for a Secret looks again (there is no watch to wake it)."""


def secret_value(secret: Secret, key: str) -> bytes | None:
    """The bytes under ``key`` (``data`` decoded, else ``stringData`` as UTF-8), None if it has none."""
    if secret.data and key in secret.data:
        return base64.b64decode(secret.data[key])
    if secret.string_data and key in secret.string_data:
        return secret.string_data[key].encode()
    return None


class SecretReader:
    """The last answer of a get per ``namespace/name`` (None: missing or not ours to read)."""

    def __init__(self, client: AsyncClient) -> None:
        self.client = client
        self._read: dict[str, Secret | None] = {}

    async def refresh(self, namespace: str, name: str) -> Secret | None:
        key = f"{namespace}/{name}"
        try:
            secret: Secret | None = await self.client.get(Secret, name, namespace=namespace)
        except errors.NotFound:
            secret = None
        except errors.Forbidden as exc:  # not (yet) referenced by an object of ours, as the apiserver sees it
            log.info("secret %s: %s", key, exc.message)
            secret = None
        self._read[key] = secret
        return secret

    def get(self, key: str) -> Secret | None:
        return self._read.get(key)

    def forget(self, key: str) -> None:
        self._read.pop(key, None)

    def image_pull_secret(self, namespace: str, name: str, waiting: list[Waiting]) -> dict[str, bytes]:
        """Every key of the image pull Secret ``namespace/name`` as last read (what a runtime hands its
        registry); when it is missing, an entry in ``waiting`` says so."""
        secret = self.get(f"{namespace}/{name}")
        if secret is None:
            waiting.append(Waiting(Dependency.SECRET, f"{namespace}/{name}",
                                   "not found; the image pull secret"))
            return {}
        keys = (secret.data or {}) | (secret.string_data or {})
        return {key: value for key in keys if (value := secret_value(secret, key)) is not None}
