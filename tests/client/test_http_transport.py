"""The sync client's transport (http.client connections, :mod:`ironpool.client.http_transport`)
against small servers that answer in the ways HTTP/1.1 allows: Content-Length, chunked, close after
the answer, close while idle, TLS; watch streams; and its failures as the exceptions failover reads."""

from __future__ import annotations

import socket
import ssl
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from ironpool.client import transport_errors as te
from ironpool.client.http_transport import ServerConnections

from tests.helpers.wait import wait_for

Answer = Callable[[bytes], bytes]


class Server:
    """A loopback server answering each request with ``answer(request head)`` on threads of its own;
    ``seen`` holds the heads with their bodies, and one ``b"CONNECT"`` per accepted connection."""

    def __init__(self, answer: Answer, tls: ssl.SSLContext | None = None,
                 close_after: Callable[[bytes], bool] = lambda head: False) -> None:
        self.answer = answer
        self.tls = tls
        self.close_after = close_after
        self.seen: list[bytes] = []
        self.open = 0
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    def url(self, scheme: str = "http") -> str:
        return f"{scheme}://127.0.0.1:{self.port}"

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, raw: socket.socket) -> None:
        self.seen.append(b"CONNECT")
        self.open += 1
        try:
            conn = self.tls.wrap_socket(raw, server_side=True) if self.tls else raw
            reader = conn.makefile("rb")
            while True:
                head = b""
                while not head.endswith(b"\r\n\r\n"):
                    line = reader.readline()
                    if not line:
                        return
                    head += line
                length = next((int(line.split(b":")[1]) for line in head.split(b"\r\n")
                               if line.lower().startswith(b"content-length:")), 0)
                self.seen.append(head + reader.read(length))
                conn.sendall(self.answer(head))
                if self.close_after(head):
                    return
        except (OSError, ssl.SSLError):
            return
        finally:
            self.open -= 1
            raw.close()

    def close(self) -> None:
        self.sock.shutdown(socket.SHUT_RDWR)  # wakes the accepting thread; close alone may not
        self.sock.close()


@pytest.fixture
def servers() -> Iterator[list[Server]]:
    made: list[Server] = []
    yield made
    for server in made:
        server.close()


def ok(body: bytes, extra: bytes = b"") -> Answer:
    return lambda head: b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n%s\r\n%s" % (len(body), extra, body)


def test_keep_alive_chunked_and_headers(servers: list[Server]) -> None:
    chunked = (b"HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n"
               b"3\r\n{\"a\r\n3\r\n\":1\r\n1\r\n}\r\n0\r\n\r\n")
    answers = iter([ok(b"{}")(b""), chunked])
    server = Server(lambda head: next(answers))
    servers.append(server)
    pool = ServerConnections(server.url() + "/prefix/", {"Authorization": "Bearer t"}, True, 5)
    assert pool.request("GET", "/a", {"labelSelector": "x=y z"}, None, {}) == (200, b"{}")
    json = {"Content-Type": "application/json"}
    assert pool.request("POST", "/b", {}, b'{"x":1}', json) == (201, b'{"a":1}')
    assert server.seen[0] == b"CONNECT" and len(server.seen) == 3  # one connection for both
    get, post = server.seen[1], server.seen[2]
    assert get.startswith(b"GET /prefix/a?labelSelector=x%3Dy+z HTTP/1.1\r\n")
    assert b"Authorization: Bearer t\r\n" in get
    assert post.startswith(b"POST /prefix/b HTTP/1.1\r\n") and post.endswith(b'\r\n\r\n{"x":1}')
    assert b"Content-Type: application/json\r\n" in post
    pool.close()


def test_a_connection_the_server_closed_is_not_reused(servers: list[Server]) -> None:
    server = Server(ok(b"{}", b"Connection: close\r\n"))
    servers.append(server)
    pool = ServerConnections(server.url(), {}, True, 5)
    assert pool.request("GET", "/a", {}, None, {}) == (200, b"{}")
    assert pool.request("GET", "/b", {}, None, {}) == (200, b"{}")
    assert server.seen.count(b"CONNECT") == 2

    # /b's answer is the last on its connection, as when uvicorn's idle timeout strikes after it
    idle = Server(ok(b"{}"), close_after=lambda head: head.startswith(b"GET /b "))
    servers.append(idle)
    pool = ServerConnections(idle.url(), {}, True, 5)
    assert pool.request("GET", "/a", {}, None, {}) == (200, b"{}")
    assert pool.request("GET", "/b", {}, None, {}) == (200, b"{}")
    wait_for(lambda: idle.open == 0, 5, "the server's close")
    assert pool.request("POST", "/c", {}, b"{}", {}) == (200, b"{}")  # a fresh one, no error
    assert idle.seen.count(b"CONNECT") == 2 and len(idle.seen) == 5
    pool.close()


def test_failures_are_the_exceptions_failover_reads(servers: list[Server]) -> None:
    gone = Server(ok(b"{}"))
    gone.close()
    with pytest.raises(te.ConnectError):
        ServerConnections(gone.url(), {}, True, 5).request("GET", "/", {}, None, {})
    silent = Server(lambda head: b"")  # reads the request, never answers
    servers.append(silent)
    with pytest.raises(te.ReadTimeout):
        ServerConnections(silent.url(), {}, True, 0.2).request("POST", "/", {}, b"", {})
    with pytest.raises(ValueError, match="must be http:// or https://"):
        ServerConnections("ftp://127.0.0.1", {}, True, 5)


def test_a_write_whose_connection_broke_is_not_sent_again(servers: list[Server]) -> None:
    server = Server(lambda head: b"", close_after=lambda head: True)  # reads it, answers nothing, hangs up
    servers.append(server)
    pool = ServerConnections(server.url(), {}, True, 5)
    for method in ("PUT", "DELETE"):
        with pytest.raises(te.RemoteProtocolError):
            pool.request(method, "/x", {}, b"{}", {})
    # once each: failover, not the transport, decides whether a write whose answer was lost goes again
    assert [h.split(b" ", 1)[0] for h in server.seen if h != b"CONNECT"] == [b"PUT", b"DELETE"]


def test_tls_with_the_clients_context_the_systems_or_none(servers: list[Server], tmp_path: Path) -> None:
    from ironpool.apiserver.serving.certs import CertificateAuthority, CertPaths

    ca = CertificateAuthority.ensure(tmp_path)
    cert, key = ca.issue("server", ip_addresses=["127.0.0.1"], server=True)
    paths = ca.write(CertPaths(tmp_path / "s.crt", tmp_path / "s.key"), cert, key)
    serving = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    serving.load_cert_chain(paths.cert, paths.key)
    server = Server(ok(b'{"tls":true}'), tls=serving)
    servers.append(server)
    trusting = ssl.create_default_context(cafile=str(ca.paths.cert))
    pool = ServerConnections(server.url("https"), {}, trusting, 5)
    assert pool.request("GET", "/", {}, None, {}) == (200, b'{"tls":true}')
    assert pool.request("GET", "/", {}, None, {}) == (200, b'{"tls":true}')
    assert server.seen.count(b"CONNECT") == 1
    pool.close()
    with pytest.raises(te.ConnectError):  # the system's CAs do not know this one
        ServerConnections(server.url("https"), {}, True, 5).request("GET", "/", {}, None, {})
    insecure = ServerConnections(server.url("https"), {}, False, 5)  # validate_certs: false
    assert insecure.request("GET", "/", {}, None, {}) == (200, b'{"tls":true}')
    insecure.close()


def test_a_stream_yields_lines_as_they_come_and_a_cut_just_ends_it(servers: list[Server]) -> None:
    big = b'{"type":"ADDED","object":{"x":"' + b"y" * 300_000 + b'"}}\n'
    cut = (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
           + b"%x\r\n%s\r\n" % (len(big), big) + b"6\r\n{\"a\":\r\n")  # the second line never ends
    server = Server(lambda head: cut, close_after=lambda head: True)
    servers.append(server)
    pool = ServerConnections(server.url(), {}, True, 5)
    with pool.stream("GET", "/w", {"watch": "true"}, 5) as stream:
        assert stream.status == 200
        lines = list(stream.lines())
    assert lines in ([big], [big, b'{"a":'])  # what arrived; no error for the cut
    assert server.seen[1].startswith(b"GET /w?watch=true HTTP/1.1\r\n")


def test_a_stream_that_stalls_past_its_read_timeout_fails_as_read_timeout(servers: list[Server]) -> None:
    server = Server(lambda head: b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\n{}\n\r\n")
    servers.append(server)
    pool = ServerConnections(server.url(), {}, True, 5)
    with pytest.raises(te.ReadTimeout), pool.stream("GET", "/w", {}, 0.3) as stream:
        assert [next(stream.lines())] == [b"{}\n"]
        list(stream.lines())
