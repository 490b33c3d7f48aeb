"""Pool identities by certificate against real processes: an HTTPS ``ironpool apiserver`` with its
client CA and an ``ironpool controller-manager`` that approves and signs (a short signing duration).

A bootstrap token discovers the CA by its hash, buys exactly its pool's certificates and nothing else;
the certificate carries the pool's rights only; it is rotated before it expires while a client keeps
working on it; a revoked token gets 401 and ``ironpool join`` refuses with it, and with a wrong hash.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import ssl
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner
from cryptography import x509
from ironpool.allinone.access import prepare_tls
from ironpool.allinone.join_token import BootstrapToken, add_bootstrap_token, remove_identities
from ironpool.api import errors
from ironpool.api.certificates import CertificateSigningRequest
from ironpool.api.compute import MachinePool
from ironpool.api.resources import resolve
from ironpool.apiserver.serving.certs import CertificateAuthority
from ironpool.certificates.bootstrap import (
    CertificateRequestError,
    PoolIdentity,
    load_certificate,
    request_certificate,
    write_pair,
)
from ironpool.certificates.discovery import DiscoveryError, ca_cert_hash, discover_ca
from ironpool.certificates.rotation import CertificateRotator
from ironpool.cli.main import cli
from ironpool.client.config import ClientConfig
from ironpool.client.informer import RawInformer
from ironpool.client.rest import AsyncClient
from ironpool.client.wire import resource_for_model

from tests.helpers.net import free_port
from tests.helpers.runtimes import stop_process
from tests.helpers.wait import eventually, wait_until

pytestmark = pytest.mark.slow

SIGNING_SECONDS = 12  # short, so the test sees certificates rotate and expire
MACHINE = PoolIdentity("compute.ironcore.dev:system:machinepool:p1",
                       "compute.ironcore.dev:system:machinepools")
OTHER_POOL = PoolIdentity("compute.ironcore.dev:system:machinepool:p2",
                          "compute.ironcore.dev:system:machinepools")
CSRS = resource_for_model(CertificateSigningRequest)


@dataclass
class ControlPlane:
    tmp: Path
    url: str
    ca: CertificateAuthority
    tokens: Path
    token: BootstrapToken
    procs: list[subprocess.Popen[bytes]]

    def verify(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=str(self.ca.paths.cert))

    def admin(self) -> AsyncClient:
        return AsyncClient(ClientConfig(server=self.url, token="admintok", ca_file=str(self.ca.paths.cert)))

    def with_token(self, token: str) -> AsyncClient:
        return AsyncClient(ClientConfig(server=self.url, token=token, ca_file=str(self.ca.paths.cert)))

    def with_pair(self, path: Path) -> ClientConfig:
        return ClientConfig(server=self.url, ca_file=str(self.ca.paths.cert), cert_file=str(path),
                            key_file=str(path))


def _start(argv: list[str], log: Path, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    with log.open("ab") as out:
        return subprocess.Popen([sys.executable, "-m", "ironpool.cli.main", *argv], stdout=out,
                                stderr=subprocess.STDOUT, env={**os.environ, **(env or {})})


@pytest.fixture(scope="module")
def control(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ControlPlane]:
    tmp = tmp_path_factory.mktemp("tlsboot")
    tls = prepare_tls(tmp / "pki", "127.0.0.1")
    ca = CertificateAuthority.ensure(tmp / "pki")
    tokens = tmp / "tokens.csv"
    tokens.write_text('admintok,admin,1,"system:masters"\n')
    token = add_bootstrap_token(tokens, "p1")
    port = free_port()
    url = f"https://127.0.0.1:{port}"
    procs = [_start(["apiserver", "--store", f"sqlite:///{tmp}/a.db", "--listen", f"127.0.0.1:{port}",
                     "--token-file", str(tokens), "--tls-cert-file", tls.cert_file,
                     "--tls-private-key-file", tls.key_file, "--client-ca-file", str(ca.paths.cert)],
                    tmp / "apiserver.log")]
    plane = ControlPlane(tmp, url, ca, tokens, token, procs)
    try:
        def ready() -> bool:
            assert procs[0].poll() is None, (tmp / "apiserver.log").read_text()[-2000:]
            try:
                return httpx.get(f"{url}/readyz", verify=plane.verify(), timeout=0.5).status_code == 200
            except httpx.HTTPError:
                return False

        wait_until(ready, timeout=30, message="HTTPS apiserver /readyz")
        config = ClientConfig(server=url, token="admintok", ca_file=str(ca.paths.cert)).save(tmp / "cm.yaml")
        procs.append(_start(["controller-manager", "--no-leader-elect",
                             "--cluster-signing-cert-file", str(ca.paths.cert),
                             "--cluster-signing-key-file", str(ca.paths.key),
                             "--cluster-signing-duration", str(SIGNING_SECONDS)],
                            tmp / "controller-manager.log", {"IRONPOOL_CONFIG": str(config)}))
        yield plane
    finally:
        for proc in reversed(procs):
            stop_process(proc, timeout=10)


def _rejected_handshake(control: ControlPlane, path: Path) -> bool:
    """Whether the apiserver refuses a TLS connection presenting the pair at ``path``."""
    ctx = control.verify()
    ctx.load_cert_chain(str(path))
    try:
        httpx.get(f"{control.url}/version", timeout=2, verify=ctx)
    except httpx.TransportError:  # TLS 1.3: the refusal of the certificate arrives on the first read
        return True
    return False


async def test_a_bootstrap_token_buys_its_pools_certificate_with_the_pools_rights_only(
        control: ControlPlane) -> None:
    pem = await discover_ca([control.url], ca_cert_hash(control.ca.cert))
    assert pem == control.ca.paths.cert.read_bytes()
    other_ca = CertificateAuthority.ensure(control.tmp / "other-ca")
    with pytest.raises(DiscoveryError) as wrong:
        await discover_ca([control.url], ca_cert_hash(other_ca.cert))
    assert ca_cert_hash(control.ca.cert) in str(wrong.value)
    assert ca_cert_hash(other_ca.cert) in str(wrong.value)

    async with control.with_token(str(control.token)) as boot:
        pair = await request_certificate(boot, MACHINE, timeout=30)
        with pytest.raises(errors.Forbidden):  # the token buys certificates and nothing else
            await boot.list_raw(resolve("machines"))
        with pytest.raises(CertificateRequestError, match="Denied") as denied:
            await request_certificate(boot, OTHER_POOL, timeout=30)
    assert "PoolIdentityMismatch" in str(denied.value) and "spec.request" in str(denied.value)

    path = control.tmp / "machinepool-client.pem"
    write_pair(path, pair)
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    cert = x509.load_pem_x509_certificate(pair)
    assert control.ca.signed(cert)
    validity = (cert.not_valid_after_utc - cert.not_valid_before_utc).total_seconds()
    assert SIGNING_SECONDS <= validity <= SIGNING_SECONDS * 1.1  # the signing duration, a tenth backdated

    async with control.admin() as admin:
        csrs = (await admin.list_raw(CSRS)).items
    mine = [c for c in csrs if (c.get("status") or {}).get("certificate")
            and base64.b64decode(c["status"]["certificate"]) in pair]
    assert len(mine) == 1
    assert mine[0]["spec"]["username"] == f"system:bootstrap:{control.token.id}"  # the server's word
    assert [c["reason"] for c in mine[0]["status"]["conditions"]] == ["AutoApproved"]

    async with AsyncClient(control.with_pair(path)) as pool:
        created = await pool.create_raw(resolve("machinepools"), {
            "apiVersion": "compute.ironcore.dev/v1alpha1", "kind": "MachinePool",
            "metadata": {"name": "p1"}, "spec": {"providerID": "test://p1"}})
        assert created["metadata"]["name"] == "p1"
        assert (await pool.get_raw(resolve("machinepools"), "p1"))["metadata"]["name"] == "p1"
        with pytest.raises(errors.Forbidden):
            await pool.get_raw(resolve("machinepools"), "p2")
        with pytest.raises(errors.Forbidden):
            await pool.list_raw(resolve("secrets"), "default")


async def test_the_certificate_is_rotated_before_it_expires_and_the_client_keeps_working(
        control: ControlPlane) -> None:
    async with control.with_token(str(control.token)) as boot:
        first_pair = await request_certificate(boot, MACHINE, timeout=30)
    path = control.tmp / "rotating.pem"
    write_pair(path, first_pair)
    old = control.tmp / "first.pem"
    write_pair(old, first_pair)
    first = x509.load_pem_x509_certificate(first_pair)
    pools = resolve("machinepools")
    async with control.admin() as admin:
        with contextlib.suppress(errors.AlreadyExists):
            await admin.create_raw(pools, {"apiVersion": "compute.ironcore.dev/v1alpha1",
                                           "kind": "MachinePool", "metadata": {"name": "p1"},
                                           "spec": {"providerID": "test://p1"}})
    stop = asyncio.Event()
    async with AsyncClient(control.with_pair(path)) as client:
        rotator = CertificateRotator(path, MACHINE, control.with_pair(path), [client], request_timeout=30)
        rotating = asyncio.create_task(rotator.run(stop))
        # A watch on the rotating client, as a poollet's informer has: it must come back after the
        # rotation closes its connection, and see what changes afterwards.
        seen: list[str] = []
        informer = RawInformer(client, MachinePool, field_selector="metadata.name=p1")
        informer.add_event_handler(on_update=lambda old, new: seen.append(
            (new["metadata"].get("labels") or {}).get("step", "")))
        informer.start()
        answered = 0
        try:
            await informer.wait_for_sync(30)
            # The client keeps reading its pool through two rotations and past the first certificate's
            # expiry: each answer is a request the apiserver authenticated.
            async def rotated_twice() -> bool:
                nonlocal answered
                await client.get_raw(pools, "p1")
                answered += 1
                return rotator.rotations >= 2 and _rejected_handshake(control, old)

            await eventually(rotated_twice, 3 * SIGNING_SECONDS, "two rotations, the first cert refused")
            await client.get_raw(pools, "p1")
            async with control.admin() as admin:
                await admin.patch_raw(pools, "p1", {"metadata": {"labels": {"step": "after-rotation"}}})
            await eventually(lambda: "after-rotation" in seen, 10, "the informer's event after the rotation")
        finally:
            stop.set()
            await rotating
            await informer.stop()
    now = load_certificate(path)
    assert now is not None and now.serial_number != first.serial_number
    assert now.not_valid_after_utc > first.not_valid_after_utc
    assert answered > 10
    async with control.admin() as admin:
        renewals = [c for c in (await admin.list_raw(CSRS)).items if c["spec"]["username"] == MACHINE.user]
    assert len(renewals) >= 2 and all(c["status"].get("certificate") for c in renewals)  # renewed by itself


def test_a_revoked_token_gets_401_and_cannot_join(control: ControlPlane, tmp_path: Path) -> None:
    revoked = add_bootstrap_token(control.tokens, "p9")
    pin = ca_cert_hash(control.ca.cert)
    wrong_pin = ca_cert_hash(CertificateAuthority.ensure(tmp_path / "other").cert)
    base = ["join", control.url, "--pool", "p9", "--token", str(revoked), "--no-tiny-image"]

    wrong = CliRunner().invoke(cli, [*base, "--discovery-token-ca-cert-hash", wrong_pin,
                                     "--data-dir", str(tmp_path / "wrong")])
    assert wrong.exit_code == 1 and pin in wrong.output and wrong_pin in wrong.output, wrong.output

    remove_identities(control.tokens, "p9")

    def refused() -> bool:
        r = httpx.post(f"{control.url}/apis/certificates.k8s.io/v1/certificatesigningrequests",
                       headers={"Authorization": f"Bearer {revoked}"}, json={},
                       verify=control.verify(), timeout=5)
        return r.status_code == 401

    wait_until(refused, timeout=10, message="the revoked token refused")
    joined = CliRunner().invoke(cli, [*base, "--discovery-token-ca-cert-hash", pin,
                                      "--data-dir", str(tmp_path / "host")])
    assert joined.exit_code == 1 and "bootstrap token is not accepted" in joined.output, joined.output
    assert not list((tmp_path / "host" / "pki").glob("*-client.pem"))
