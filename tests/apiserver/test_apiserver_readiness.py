"""``/readyz`` answers ready once the apiserver has started (system namespace, default policy,
indexes), so a client that waits for it never pays for the start-up with its first request."""

from __future__ import annotations

from pathlib import Path

import httpx
from ironpool.api.resources import resolve
from ironpool.apiserver.app import build_app
from ironpool.apiserver.auth.authentication import Authenticator, parse_token_file
from ironpool.store.sqlite import SQLiteStore

TOKENS = 'a,admin,1,"system:masters"\n'
KUBE_SYSTEM = resolve("namespaces").key(None, "kube-system")


async def test_ready_means_started(tmp_path: Path) -> None:
    store = SQLiteStore(str(tmp_path / "ready.db"))
    app = build_app(store, Authenticator(parse_token_file(TOKENS)))
    assert await store.get(KUBE_SYSTEM) is None and not app.state.apiserver.started
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as c:
        r = await c.get("/readyz")
        assert r.status_code == 200, r.text
        assert app.state.apiserver.started and await store.get(KUBE_SYSTEM) is not None
    await store.close()


async def test_not_ready_while_it_cannot_start(tmp_path: Path) -> None:
    store = SQLiteStore(str(tmp_path / "closed.db"))
    app = build_app(store, Authenticator(parse_token_file(TOKENS)))
    await store.close()  # the store does not answer
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as c:
        r = await c.get("/readyz")
        assert r.status_code == 503 and "store not ready" in r.text
    assert not app.state.apiserver.started
