"""Lists that stream, on a real apiserver over SQLite and over etcd: a list larger than a page of the
store is written as it is read (chunked), complete and at one revision while writes go on, and the
server's memory does not grow with the list.

The client reads through a small receive buffer, so the server is held up by the socket after a few
megabytes and reads the rest of the list from the store after the test's writes.
"""

from __future__ import annotations

import base64
import http.client
import socket
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import httpx
import orjson
import pytest

from tests.conftest import ApiServer, start_apiserver, stop_apiserver
from tests.helpers.etcd import etcd_cluster

NS = "streams"
SECRETS = f"/api/v1/namespaces/{NS}/secrets"
KIB = 1024


@pytest.fixture(params=["sqlite", "etcd"])
def server(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ApiServer]:
    if request.param == "sqlite":
        srv = start_apiserver(tmp_path)
        try:
            yield srv
        finally:
            stop_apiserver(srv)
        return
    with etcd_cluster(1) as cluster:
        srv = start_apiserver(tmp_path, store_url=cluster.url("/streams"))
        try:
            yield srv
        finally:
            stop_apiserver(srv)


def secret(name: str, size: int, **labels: str) -> dict[str, Any]:
    pad = base64.b64encode(name.encode().ljust(size * 3 // 4, b"x")).decode()
    return {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "labels": labels},
            "data": {"pad": pad}}


def seed(server: ApiServer, count: int, size: int, writers: int = 6) -> None:
    """The namespace and ``count`` Secrets of about ``size`` bytes, named s00000, s00001, ..."""
    with httpx.Client(base_url=server.url, headers=server.headers(), timeout=60) as client:
        r = client.post("/api/v1/namespaces", json={"apiVersion": "v1", "kind": "Namespace",
                                                    "metadata": {"name": NS}})
        assert r.status_code == 201, r.text

        def create(i: int) -> None:
            r = client.post(SECRETS, json=secret(f"s{i:05d}", size, half="even" if i % 2 == 0 else "odd"))
            assert r.status_code == 201, r.text

        with ThreadPoolExecutor(writers) as pool:
            list(pool.map(create, range(count)))


class SlowList:
    """A GET read through a small socket receive buffer: the server writes what the socket takes."""

    def __init__(self, server: ApiServer, path: str, accept: str = "application/json") -> None:
        url = urlsplit(server.url)
        self.conn = http.client.HTTPConnection(url.hostname or "127.0.0.1", url.port, timeout=60)
        self.conn.connect()
        assert self.conn.sock is not None
        self.conn.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 64 * KIB)
        self.conn.request("GET", path, headers={**server.headers(), "Accept": accept})
        self.response = self.conn.getresponse()
        self.head = self.response.read(64 * KIB)

    def rest(self) -> Any:
        try:
            return orjson.loads(self.head + self.response.read())
        finally:
            self.conn.close()


def names_and_versions(listed: dict[str, Any]) -> list[tuple[str, str]]:
    return [(o["metadata"]["name"], o["metadata"]["resourceVersion"]) for o in listed["items"]]


@pytest.mark.slow
def test_a_large_list_streams_one_snapshot_while_writes_go_on(server: ApiServer) -> None:
    seed(server, 300, 100 * KIB)  # about 40 MB of JSON: many pages of the store
    with httpx.Client(base_url=server.url, headers=server.headers(), timeout=60) as client:
        before = client.get(SECRETS).json()
        assert len(before["items"]) == 300
        expected = names_and_versions(before)

        slow = SlowList(server, SECRETS)
        assert slow.response.status == 200
        assert slow.response.getheader("Transfer-Encoding") == "chunked"
        assert slow.response.getheader("Content-Length") is None
        # While the list is being written: the last objects change, one goes, one comes.
        r = client.patch(f"{SECRETS}/s00290", json={"metadata": {"labels": {"changed": "yes"}}},
                         headers={"Content-Type": "application/merge-patch+json"})
        assert r.status_code == 200, r.text
        assert client.delete(f"{SECRETS}/s00295").status_code == 200
        assert client.post(SECRETS, json=secret("s00299a", 1 * KIB)).status_code == 201
        listed = slow.rest()

        assert listed["metadata"]["resourceVersion"] == before["metadata"]["resourceVersion"]
        assert names_and_versions(listed) == expected  # as it was when the list began
        assert "changed" not in listed["items"][290]["metadata"]["labels"]
        now = [o["metadata"]["name"] for o in client.get(SECRETS).json()["items"]]
        assert "s00295" not in now and "s00299a" in now


@pytest.mark.slow
def test_pages_selectors_and_tables_stream_at_one_revision(server: ApiServer) -> None:
    seed(server, 200, 100 * KIB)
    with httpx.Client(base_url=server.url, headers=server.headers(), timeout=60) as client:
        expected = names_and_versions(client.get(SECRETS).json())

        # A page of 120 objects (12 MB, streamed), its continue token read after writes.
        first = SlowList(server, f"{SECRETS}?limit=120")
        r = client.patch(f"{SECRETS}/s00150", json={"metadata": {"labels": {"changed": "yes"}}},
                         headers={"Content-Type": "application/merge-patch+json"})
        assert r.status_code == 200, r.text
        page = first.rest()
        assert names_and_versions(page) == expected[:120]
        token = page["metadata"]["continue"]
        rest = client.get(SECRETS, params={"limit": "120", "continue": token}).json()
        assert names_and_versions(rest) == expected[120:] and "continue" not in rest["metadata"]
        assert rest["metadata"]["resourceVersion"] == page["metadata"]["resourceVersion"]

        # A label selector, streamed: every other object, as stored.
        odd = SlowList(server, f"{SECRETS}?labelSelector=half%3Dodd")
        assert odd.response.getheader("Transfer-Encoding") == "chunked"
        assert [n for n, _ in names_and_versions(odd.rest())] == [n for n, _ in expected[1::2]]

        # Selected pages: 30 objects (3 MB) are kept from the read that finds the page's end, 60 are
        # read again as they are written; either way the continue token goes on after the last.
        odd_names = [n for n, _ in expected[1::2]]
        for limit in (30, 60):
            selected = client.get(SECRETS, params={"labelSelector": "half=odd", "limit": str(limit)}).json()
            assert [n for n, _ in names_and_versions(selected)] == odd_names[:limit]
            following = client.get(SECRETS, params={"labelSelector": "half=odd", "limit": "100",
                                                    "continue": selected["metadata"]["continue"]}).json()
            assert [n for n, _ in names_and_versions(following)] == odd_names[limit:]

        # A kubectl Table embedding the objects: one row per object, in order.
        table = SlowList(server, SECRETS + "?includeObject=Object",
                         accept="application/json;as=Table;v=v1;g=meta.k8s.io")
        rows = table.rest()["rows"]
        assert [row["object"]["metadata"]["name"] for row in rows] == [n for n, _ in expected]
        assert [row["cells"][0] for row in rows] == [n for n, _ in expected]

        # A small list is answered whole, with its length, as before.
        small = client.get(SECRETS, params={"limit": "3"})
        assert small.headers.get("content-length") == str(len(small.content))


def test_a_list_cut_off_by_compaction_is_never_a_complete_body(tmp_path: Path) -> None:
    """When the store's history passes the list's revision while it is written, the body ends
    without its last chunk: the client sees a broken response, never a shorter list."""
    db = tmp_path / "ironpool.db"
    srv = start_apiserver(tmp_path, store_url=f"sqlite:///{db}?history=20")
    try:
        seed(srv, 200, 100 * KIB)
        slow = SlowList(srv, SECRETS)
        with httpx.Client(base_url=srv.url, headers=srv.headers(), timeout=60) as client:
            # The store compacts every 1,000 writes down to its last 20 revisions: past the list's.
            for i in range(1100):
                r = client.post(SECRETS, json=secret(f"t{i:05d}", 100))
                assert r.status_code == 201, r.text
        with pytest.raises((http.client.IncompleteRead, http.client.RemoteDisconnected, ConnectionError)):
            slow.rest()
        assert "list cut off after its first bytes" in srv.log_path.read_text()
    finally:
        stop_apiserver(srv)


def _proc_kib(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise AssertionError(f"no {field} in /proc/{pid}/status")


@pytest.mark.slow
def test_the_servers_memory_does_not_grow_with_the_list(server: ApiServer) -> None:
    """3,000 objects of 100 KiB (a list of about 300 MB): the server's peak resident size while it
    writes the list grows by less than 128 MiB, whatever the list's size: SQLite's page cache (at
    most 64 MiB), a page of the store and the socket's buffers (a list read whole grew it by more
    than the list's size: 169 MiB for 200 MB). The kernel's own peak (VmHWM, reset through
    clear_refs just before) is read, so no sample can miss it."""
    seed(server, 3000, 100 * KIB)
    pid = server.process.pid
    before = _proc_kib(pid, "VmRSS")
    Path(f"/proc/{pid}/clear_refs").write_text("5")
    url = urlsplit(server.url)
    conn = http.client.HTTPConnection(url.hostname or "127.0.0.1", url.port, timeout=120)
    conn.request("GET", SECRETS, headers=server.headers())
    response = conn.getresponse()
    size, tail, names = 0, b"", 0
    marker = b'"name":"s0'
    while chunk := response.read(1 << 20):
        size += len(chunk)
        window = tail + chunk
        names += window.count(marker)
        tail = window[-(len(marker) - 1):]  # a marker cut by a chunk boundary is counted once
    conn.close()
    growth = (_proc_kib(pid, "VmHWM") - before) * KIB
    assert names == 3000 and tail.endswith(b"]}") and size > 3000 * 100 * KIB
    assert growth < 128 * KIB * KIB, f"the server grew by {growth >> 20} MiB writing a {size >> 20} MiB list"
