"""HTTPS with a local CA: serving certificates kept or renewed, client certificates as identities
(CN user, O groups), certificates of another CA refused, plain HTTP only on loopback."""

from __future__ import annotations

import json
import os
import ssl
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner
from cryptography import x509
from ironpool.allinone.access import prepare_tls, serving_hosts, write_kubeconfig
from ironpool.apiserver.serving.certs import CertificateAuthority, CertPaths, ensure_serving_cert
from ironpool.cli.main import cli

from tests.helpers.net import free_port
from tests.helpers.runtimes import stop_process
from tests.helpers.wait import wait_until


def _sans(path: Path) -> list[str]:
    cert = x509.load_pem_x509_certificate(path.read_bytes())
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    ips = [str(i) for i in san.get_values_for_type(x509.IPAddress)]
    return [*san.get_values_for_type(x509.DNSName), *ips]


def test_serving_certificate_is_reused_and_renewed_for_new_addresses(tmp_path: Path) -> None:
    ca = CertificateAuthority.ensure(tmp_path)
    assert oct((tmp_path / "ca.key").stat().st_mode & 0o777) == "0o600"
    first = ensure_serving_cert(ca, tmp_path, ["127.0.0.1", "localhost"])
    before = first.cert.read_bytes()
    assert ensure_serving_cert(ca, tmp_path, ["localhost"]).cert.read_bytes() == before  # covered: kept
    ensure_serving_cert(ca, tmp_path, ["127.0.0.1", "10.1.2.3"])
    assert first.cert.read_bytes() != before and "10.1.2.3" in _sans(first.cert)
    # Another CA in the same folder (the CA files were replaced): the certificate is made anew.
    (tmp_path / "ca.crt").unlink()
    other = CertificateAuthority.ensure(tmp_path)
    renewed = ensure_serving_cert(other, tmp_path, ["127.0.0.1"])
    assert other.signed(x509.load_pem_x509_certificate(renewed.cert.read_bytes()))
    assert not ca.signed(x509.load_pem_x509_certificate(renewed.cert.read_bytes()))


def test_serving_hosts_cover_loopback_and_the_listen_address() -> None:
    assert serving_hosts("127.0.0.1")[:3] == ["localhost", "127.0.0.1", "::1"]
    assert serving_hosts("192.0.2.7")[0] == "192.0.2.7"
    assert len(serving_hosts("0.0.0.0")) > 3  # the host's own names too


def test_kubeconfig_is_private_and_names_the_ca(tmp_path: Path) -> None:
    import yaml

    path = write_kubeconfig(tmp_path / "kubeconfig", "https://127.0.0.1:1", "tok", "/ca.crt")
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    config = yaml.safe_load(path.read_text())
    cluster = config["clusters"][0]["cluster"]
    assert cluster == {"server": "https://127.0.0.1:1", "certificate-authority": "/ca.crt"}
    assert config["users"][0]["user"] == {"token": "tok"} and config["current-context"] == "ironpool"


def test_plain_http_only_on_loopback(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.csv"
    tokens.write_text('t,admin,1,"system:masters"\n')
    result = CliRunner().invoke(cli, ["apiserver", "--store", f"sqlite:///{tmp_path}/a.db", "--token-file",
                                      str(tokens), "--listen", "0.0.0.0:6443"])
    assert result.exit_code == 2 and "plain HTTP is served only on a loopback address" in result.output
    result = CliRunner().invoke(cli, ["up", "--data-dir", str(tmp_path / "d"), "--listen", "0.0.0.0:6443",
                                      "--insecure-http"])
    assert result.exit_code == 2 and "--insecure-http serves plain HTTP only on a loopback" in result.output


class Server:
    """``ironpool apiserver`` over HTTPS with a client CA, as ``ironpool up`` sets it up."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.tls = prepare_tls(tmp / "pki", "127.0.0.1")
        self.ca = CertificateAuthority.ensure(tmp / "pki")
        (tmp / "tokens.csv").write_text('admintok,admin,1,"system:masters"\nalicetok,alice,2,"developers"\n')
        self.port = free_port()
        self.url = f"https://127.0.0.1:{self.port}"
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "ironpool.cli.main", "apiserver", "--store", f"sqlite:///{tmp}/a.db",
             "--listen", f"127.0.0.1:{self.port}", "--token-file", str(tmp / "tokens.csv"),
             "--tls-cert-file", self.tls.cert_file, "--tls-private-key-file", self.tls.key_file,
             "--client-ca-file", str(self.tls.client_ca_file)],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ},
        )

    def context(self, cert: CertPaths | None = None) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=self.tls.client_ca_file)
        if cert is not None:
            ctx.load_cert_chain(str(cert.cert), str(cert.key))
        return ctx

    def client_cert(self, ca: CertificateAuthority, cn: str, groups: list[str]) -> CertPaths:
        cert, key = ca.issue(cn, organizations=groups)
        return ca.write(CertPaths(self.tmp / f"{cn}.crt", self.tmp / f"{cn}.key"), cert, key)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    s = Server(tmp_path_factory.mktemp("tls"))

    def ready() -> bool:
        assert s.proc.poll() is None, "apiserver exited"
        try:
            return httpx.get(f"{s.url}/readyz", verify=s.context(), timeout=0.5).status_code == 200
        except httpx.HTTPError:
            return False

    try:
        wait_until(ready, timeout=30, message="HTTPS apiserver /readyz")
        yield s
    finally:
        stop_process(s.proc, timeout=10)


NAMESPACES = "/api/v1/namespaces"


def test_bearer_token_over_https_and_the_ca_is_required(server: Server) -> None:
    ok = httpx.get(server.url + NAMESPACES, verify=server.context(),
                   headers={"Authorization": "Bearer admintok"})
    assert ok.status_code == 200 and ok.json()["kind"] == "NamespaceList"
    wrong = httpx.get(server.url + NAMESPACES, verify=server.context(),
                      headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 401
    with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
        httpx.get(server.url + NAMESPACES, headers={"Authorization": "Bearer admintok"})  # system CAs only


def test_client_certificate_names_user_and_groups(server: Server) -> None:
    admin = server.client_cert(server.ca, "carol", ["system:masters"])
    r = httpx.get(server.url + NAMESPACES, verify=server.context(admin))
    assert r.status_code == 200, r.text
    # A pool's certificate makes the request that pool's poollet: it may list only its own Machines.
    pool = server.client_cert(server.ca, "compute.ironcore.dev:system:machinepool:p1",
                              ["compute.ironcore.dev:system:machinepools"])
    machines = "/apis/compute.ironcore.dev/v1alpha1/machines"
    r = httpx.get(server.url + machines, verify=server.context(pool))
    assert r.status_code == 403 and "machinepool:p1" in r.text, r.text
    r = httpx.get(server.url + machines, params={"fieldSelector": "spec.machinePoolRef.name=p1"},
                  verify=server.context(pool))
    assert r.status_code == 200, r.text


def test_client_certificate_of_another_ca_is_refused(server: Server, tmp_path: Path) -> None:
    stranger = CertificateAuthority.ensure(tmp_path / "other")
    mallory = server.client_cert(stranger, "mallory", ["system:masters"])
    with pytest.raises((httpx.ConnectError, httpx.ReadError, httpx.RemoteProtocolError)):
        httpx.get(server.url + NAMESPACES, verify=server.context(mallory))


def test_ironpool_client_verifies_with_ca_file(server: Server, tmp_path: Path) -> None:
    from ironpool.api.resources import resolve
    from ironpool.client import Client, ClientConfig, ConfigError

    config = ClientConfig(server=server.url, token="admintok", ca_file=server.tls.client_ca_file)
    with Client(config) as client:
        names = [n["metadata"]["name"] for n in client.list_raw(resolve("namespaces")).items]
    assert names == ["default", "kube-system"]
    with pytest.raises(ConfigError, match=r"ca_file .*missing\.pem: cannot load it"):
        Client(ClientConfig(server=server.url, token="admintok", ca_file=str(tmp_path / "missing.pem")))
    # A stale ca_file (another installation's) is not loaded for a plain-http server it cannot apply to.
    plain = ClientConfig(server="http://127.0.0.1:1", token="t", ca_file=str(tmp_path / "missing.pem"))
    Client(plain).close()


def test_client_certificate_names_the_user_of_a_console_websocket(server: Server) -> None:
    """A websocket upgrade (``machines/exec``) leaves the HTTP protocol that read the certificate:
    its user is the certificate's all the same."""
    from websockets.exceptions import InvalidStatus
    from websockets.sync.client import connect
    from websockets.typing import Subprotocol

    url = f"wss://127.0.0.1:{server.port}/apis/compute.ironcore.dev/v1alpha1/namespaces/default/machines/m/exec"

    def status(cert: CertPaths | None) -> tuple[int, str]:
        with pytest.raises(InvalidStatus) as exc, connect(url, ssl=server.context(cert), proxy=None,
                                                          subprotocols=[Subprotocol("v5.channel.k8s.io")]):
            pass
        return exc.value.response.status_code, (exc.value.response.body or b"").decode()

    assert status(None)[0] == 401
    pool = server.client_cert(server.ca, "compute.ironcore.dev:system:machinepool:p1",
                              ["compute.ironcore.dev:system:machinepools"])
    code, body = status(pool)
    assert code == 403 and "machinepool:p1" in body, body
    admin = server.client_cert(server.ca, "carol", ["system:masters"])
    code, body = status(admin)
    # Authorized: only the Machine is missing.
    assert code == 404 and json.loads(body)["message"] == 'machines.compute.ironcore.dev "m" not found', body


def test_no_session_tickets_so_a_threaded_client_never_loses_its_request(server: Server) -> None:
    """TLS 1.3 servers send session tickets after the handshake, unasked. The sync websockets client
    (``ironpool console``) reads in one thread and writes in another, and reading a ticket while the
    request is written lost the request now and then: the apiserver sends none."""
    import socket
    from concurrent.futures import ThreadPoolExecutor

    from websockets.exceptions import InvalidStatus
    from websockets.sync.client import connect
    from websockets.typing import Subprotocol

    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as raw, \
            server.context().wrap_socket(raw, server_hostname="127.0.0.1") as tls:
        tls.sendall(b"GET /readyz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        answer = b""
        while chunk := tls.recv(65536):
            answer += chunk
        assert answer.startswith(b"HTTP/1.1 200"), answer[:100]
        assert tls.version() == "TLSv1.3" and tls.session is not None and not tls.session.has_ticket

    # And a burst of consoles refused (no such user) is answered every time, never left silent.
    url = f"wss://127.0.0.1:{server.port}/apis/compute.ironcore.dev/v1alpha1/namespaces/default/machines/m/exec"

    def refused(_: int) -> int | str:
        try:
            with connect(url, ssl=server.context(), proxy=None, open_timeout=30,
                         subprotocols=[Subprotocol("v5.channel.k8s.io")],
                         additional_headers={"Authorization": "Bearer nobody"}):
                return "opened"
        except InvalidStatus as exc:
            return exc.response.status_code
        except Exception as exc:  # the lost request: the server gave up on a silent connection
            return repr(exc)

    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(refused, range(200)))
    assert set(answers) == {401}, {a for a in answers if a != 401}
