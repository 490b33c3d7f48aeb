"""A real HTTPS server on loopback serving one folder, with a CA of its own that clients are told
to trust (``SSL_CERT_FILE``): where tests download ``https://`` images from."""

from __future__ import annotations

import functools
import http.server
import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class HttpsServer:
    """A running server: its base URL (``https://127.0.0.1:PORT``) and the CA file that verifies it."""

    url: str
    ca_file: Path


@contextmanager
def serve_https(folder: Path, pki: Path) -> Iterator[HttpsServer]:
    """Serve ``folder`` over HTTPS on a free loopback port until the block ends; certificates in ``pki``."""
    from ironpool.apiserver import CertificateAuthority, ensure_serving_cert

    ca = CertificateAuthority.ensure(pki)
    paths = ensure_serving_cert(ca, pki, ["127.0.0.1"])
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(paths.cert, paths.key)

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

    handler = functools.partial(Quiet, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.socket = ctx.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield HttpsServer(f"https://127.0.0.1:{server.server_address[1]}", ca.paths.cert)
    finally:
        server.shutdown()
        server.server_close()
