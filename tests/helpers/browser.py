"""Headless Chromium (Debian's ``chromium`` and ``chromium-driver``) driven through selenium, for the
web console's tests and its benchmark.

A server certificate made by a test's own CA is trusted by its public key alone
(``--ignore-certificate-errors-spki-list``): the browser still speaks TLS and checks that it talks to
that very key, without trusting the CA for anything else.

A client certificate (:class:`ClientCert`) is given to Chromium as a person's browser has it: in the
NSS database of its home (``$HOME/.pki/nssdb``, imported with ``pk12util`` from Debian's
``libnss3-tools``), with the profile's ``auto_select_certificate`` setting for the server's origin
(what the ``AutoSelectCertificateForUrls`` policy sets) choosing it by its issuer. Without that
setting headless Chromium waits for a certificate choice no one can make, and the page never loads.
"""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest


def spki_hash(cert_pem: Path) -> str:
    """base64(sha256(SubjectPublicKeyInfo)) of a PEM certificate, as Chromium's SPKI list wants it."""
    from cryptography import x509
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    cert = x509.load_pem_x509_certificate(cert_pem.read_bytes())
    der = cert.public_key().public_bytes(Encoding.DER, PublicFormat.SubjectPublicKeyInfo)
    return base64.b64encode(hashlib.sha256(der).digest()).decode()


@dataclass(frozen=True)
class ClientCert:
    """A client certificate for the browser to present to ``origin`` (``https://host:port``)."""

    cert_pem: bytes
    key_pem: bytes
    issuer_cn: str
    origin: str


def _client_cert_home(cert: ClientCert, home: Path, profile: Path) -> None:
    """``cert`` in an NSS database under ``home``, chosen for its origin by ``profile``'s settings."""
    from cryptography import x509
    from cryptography.hazmat.primitives.serialization import BestAvailableEncryption, load_pem_private_key
    from cryptography.hazmat.primitives.serialization.pkcs12 import serialize_key_and_certificates

    if not shutil.which("pk12util") or not shutil.which("certutil"):
        pytest.fail("a client certificate in Chromium needs Debian's libnss3-tools "
                    "(bash scripts/setup-host.sh installs it)")
    nssdb = home / ".pki" / "nssdb"
    nssdb.mkdir(parents=True)
    key: Any = load_pem_private_key(cert.key_pem, None)
    p12 = home / "client.p12"
    leaf = x509.load_pem_x509_certificate(cert.cert_pem)
    p12.write_bytes(serialize_key_and_certificates(b"client", key, leaf, None,
                                                   BestAvailableEncryption(b"pass")))
    for cmd in (["certutil", "-N", "-d", f"sql:{nssdb}", "--empty-password"],
                ["pk12util", "-i", str(p12), "-d", f"sql:{nssdb}", "-W", "pass"]):
        subprocess.run(cmd, check=True, capture_output=True, timeout=60)
    p12.unlink()
    rule = {"setting": {"filters": [{"ISSUER": {"CN": cert.issuer_cn}}]}}
    prefs = {"profile": {"content_settings": {"exceptions": {"auto_select_certificate": {
        f"{cert.origin},*": rule}}}}}
    (profile / "Default").mkdir(parents=True)
    (profile / "Default" / "Preferences").write_text(json.dumps(prefs))


@contextlib.contextmanager
def headless_chromium(trust_cert: Path | None = None, width: int = 1400, height: int = 1000,
                      client_cert: ClientCert | None = None) -> Iterator[Any]:
    """A WebDriver on a fresh headless Chromium profile (presenting ``client_cert`` to its origin);
    quits it afterwards. Fails the test naming the packages when they are missing
    (scripts/setup-host.sh installs them)."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    chromium, driver_path = shutil.which("chromium"), shutil.which("chromedriver")
    if not chromium or not driver_path:
        pytest.fail("the web console's tests need Debian's chromium and chromium-driver "
                    "(bash scripts/setup-host.sh installs them)")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                f"--window-size={width},{height}", "--disable-extensions", "--no-first-run"):
        options.add_argument(arg)
    if trust_cert is not None:
        options.add_argument(f"--ignore-certificate-errors-spki-list={spki_hash(trust_cert)}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    with contextlib.ExitStack() as stack:
        env = None
        if client_cert is not None:
            tmp = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="ironpool-chromium-")))
            _client_cert_home(client_cert, tmp / "home", tmp / "profile")
            options.add_argument(f"--user-data-dir={tmp / 'profile'}")
            env = {**os.environ, "HOME": str(tmp / "home")}
        driver = webdriver.Chrome(options=options, service=Service(driver_path, env=env))
        try:
            yield driver
        finally:
            driver.quit()
