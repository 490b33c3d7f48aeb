"""The web console's server side on an in-process apiserver: the files under ``/ui/`` (shipped in the
package, nothing fetched from elsewhere, a strict Content-Security-Policy, no data without a token)
and ``POST /ui/manifests``, the preview's YAML reader (authenticated, errors naming the document and
field). The pages in a real browser: tests/e2e/test_up_web_console.py."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from ironpool.api import errors
from ironpool.apiserver.app import serve
from ironpool.apiserver.auth.authentication import Authenticator, parse_token_file
from ironpool.apiserver.auth.websocket_token import websocket_bearer
from ironpool.apiserver.ui import parse_manifests
from ironpool.apiserver.ui.assets import CSP, load_assets
from ironpool.apiserver.ui.manifests import MAX_BYTES
from ironpool.store.sqlite import SQLiteStore

TOKENS = 'admin,admin,1,"system:masters"\nviewer,viewer,2\n'


@pytest.fixture
async def api(tmp_path: Path) -> AsyncIterator[httpx.AsyncClient]:
    store = SQLiteStore(str(tmp_path / "ui.db"))
    stop, started, port = asyncio.Event(), asyncio.Event(), []

    def ready(p: int) -> None:
        port.append(p)
        started.set()

    task = asyncio.create_task(serve(store, Authenticator(parse_token_file(TOKENS)), "127.0.0.1", 0,
                                     stop=stop, ready=ready))
    await asyncio.wait_for(started.wait(), 30)
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port[0]}") as client:
            yield client
    finally:
        stop.set()
        await task
        await store.close()


async def test_the_pages_come_from_the_package_with_a_strict_policy(api: httpx.AsyncClient) -> None:
    moved = await api.get("/ui")
    assert moved.status_code == 307 and moved.headers["location"] == "/ui/"
    index = await api.get("/ui/")  # no token needed: the page holds no data
    assert index.status_code == 200 and index.headers["content-type"].startswith("text/html")
    assert index.headers["content-security-policy"] == CSP
    assert "script-src 'self';" in CSP and "connect-src 'self';" in CSP and "frame-ancestors 'none'" in CSP
    assert index.headers["x-content-type-options"] == "nosniff"
    # Every script and style the page names is served from /ui/, none from elsewhere (offline).
    refs = re.findall(r'(?:src|href)="([^"#]+)"', index.text)
    assert refs and all(r.startswith("/ui/") for r in refs), refs
    for ref in refs:
        got = await api.get(ref)
        assert got.status_code == 200, ref
    assert (await api.get("/ui/app.js")).headers["content-type"].startswith("text/javascript")
    # The console's terminal is shipped with its licence; it is loaded only where a console is shown.
    assert (await api.get("/ui/xterm.js")).status_code == 200
    assert "Permission is hereby granted" in (await api.get("/ui/xterm-LICENSE.txt")).text
    # Our own scripts reach nothing but this origin's paths.
    for name, asset in load_assets().items():
        if name.endswith(".js") and not name.startswith("xterm"):
            assert not re.search(rb"https?://", asset.body), name


async def test_unknown_files_are_404_and_unchanged_ones_304(api: httpx.AsyncClient) -> None:
    for path in ("/ui/nope.js", "/ui/..%2fapp.py", "/ui/%2e%2e/assets.py", "/ui/static"):
        missing = await api.get(path)
        assert missing.status_code == 404, path
        assert missing.json()["reason"] == "NotFound", missing.text
    first = await api.get("/ui/fleet.js")
    again = await api.get("/ui/fleet.js", headers={"If-None-Match": first.headers["etag"]})
    assert again.status_code == 304 and again.content == b""


async def test_manifests_are_read_for_an_authenticated_user_only(api: httpx.AsyncClient) -> None:
    text = ("apiVersion: compute.ironcore.dev/v1alpha1\nkind: Machine\nmetadata: {name: a}\n---\n"
            "apiVersion: v1\nkind: List\nitems:\n- {apiVersion: storage.ironcore.dev/v1alpha1, kind: Volume,"
            " metadata: {name: b}}\n")
    anonymous = await api.post("/ui/manifests", content=text)
    assert anonymous.status_code == 401 and anonymous.json()["reason"] == "Unauthorized"
    wrong = await api.post("/ui/manifests", content=text, headers={"Authorization": "Bearer wrong"})
    assert wrong.status_code == 401
    viewer = {"Authorization": "Bearer viewer"}
    read = await api.post("/ui/manifests", content=text, headers=viewer)
    assert read.status_code == 200, read.text
    kinds = [(o["kind"], o["metadata"]["name"]) for o in read.json()["items"]]
    assert kinds == [("Machine", "a"), ("Volume", "b")]
    bad = await api.post("/ui/manifests", content="kind: Machine\nmetadata: {name: a}\n", headers=viewer)
    assert bad.status_code == 400 and bad.json()["message"] == "document 1: apiVersion is required"
    big = await api.post("/ui/manifests", content=b"#" * (MAX_BYTES + 1), headers=viewer)
    assert big.status_code == 400 and "at most" in big.json()["message"]


def test_parse_manifests_names_the_document_and_field() -> None:
    assert parse_manifests("---\n# nothing\n") == []
    cases = {
        "a: [1\n": "invalid YAML",
        "apiVersion: v1\nkind: X\nmetadata: {name: a}\n---\n- 1\n":
            "document 2: a manifest must be a mapping",
        "apiVersion: v1\nkind: X\n": "document 1 (X): metadata.name is required",
        "apiVersion: v1\nkind: ''\nmetadata: {name: a}\n": "document 1: kind is required",
        "apiVersion: v1\nkind: List\nitems: [{apiVersion: v1, kind: X, metadata: {}}]\n":
            "document 1 (X): metadata.name is required",
    }
    for text, says in cases.items():
        with pytest.raises(errors.BadRequest) as exc:
            parse_manifests(text)
        assert says in str(exc.value), (text, str(exc.value))


def test_the_websocket_token_is_read_from_websockets_only() -> None:
    protocols = ["v5.channel.k8s.io", "base64url.bearer.authorization.k8s.io.dG9rLTE"]
    assert websocket_bearer({"type": "websocket", "subprotocols": protocols}) == "Bearer tok-1"
    assert websocket_bearer({"type": "http", "subprotocols": protocols}) is None
    assert websocket_bearer({"type": "websocket", "subprotocols": ["v5.channel.k8s.io"]}) is None
