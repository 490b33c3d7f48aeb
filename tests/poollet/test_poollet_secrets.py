"""Secrets as the poollets read them, by name from a real apiserver: an image pull Secret hands every
key it has to the runtime; one that is missing is something the object waits for, and looked for again."""

from __future__ import annotations

import base64

from ironpool.api.core import Secret
from ironpool.client.rest import AsyncClient
from ironpool.poollet.secret_reader import SecretReader, secret_value
from ironpool.poollet.waiting import Dependency, Waiting


async def test_an_image_pull_secret_hands_over_every_key(client: AsyncClient) -> None:
    auth = b'{"auths": {"127.0.0.1:5000": {"auth": "dTpw"}}}'
    await client.create(Secret.model_validate({
        "metadata": {"name": "pull", "namespace": "default"},
        "data": {".dockerconfigjson": base64.b64encode(auth).decode()},
        "stringData": {"note": "plain"},
    }))
    reader = SecretReader(client)
    secret = await reader.refresh("default", "pull")
    assert secret is not None and secret_value(secret, "absent") is None
    waiting: list[Waiting] = []
    assert reader.image_pull_secret("default", "pull", waiting) == {".dockerconfigjson": auth,
                                                                     "note": b"plain"}
    assert waiting == []


async def test_a_missing_pull_secret_is_waited_for_and_looked_for_again(client: AsyncClient) -> None:
    reader = SecretReader(client)
    assert await reader.refresh("default", "nowhere") is None
    waiting: list[Waiting] = []
    assert reader.image_pull_secret("default", "nowhere", waiting) == {}
    assert waiting == [Waiting(Dependency.SECRET, "default/nowhere", "not found; the image pull secret")]
    assert waiting[0].polled
    assert str(waiting[0]) == "Secret default/nowhere (not found; the image pull secret)"
