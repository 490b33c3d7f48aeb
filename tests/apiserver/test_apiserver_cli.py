"""``ironpool apiserver`` command line: clear errors for bad flags, and HTTPS with a certificate."""

from __future__ import annotations

import os
import ssl
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner
from ironpool.cli.main import cli
from ironpool.ports import free_port


@pytest.fixture
def token_file(tmp_path: Path) -> Path:
    path = tmp_path / "tokens.csv"
    path.write_text('admintok,admin,1,"system:masters"\n')
    return path


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--listen", "nope"], "'nope' is not HOST:PORT"),
        (["--listen", "127.0.0.1:99999"], "is not HOST:PORT"),
        (["--store", "mysql://x"], "unsupported store URL"),
        (["--store", "sqlite:///{tmp}/x.db?bogus=1"], "unknown sqlite option"),
        (["--tls-cert-file", "{tokens}"], "--tls-cert-file and --tls-private-key-file go together"),
    ],
)
def test_bad_flags_are_named(tmp_path: Path, token_file: Path, args: list[str], message: str) -> None:
    base = {
        "--store": f"sqlite:///{tmp_path}/a.db",
        "--listen": "127.0.0.1:1",
        "--token-file": str(token_file),
    }
    given = dict(zip(args[::2], args[1::2], strict=True))
    argv = ["apiserver"]
    for flag, value in {**base, **given}.items():
        argv += [flag, value.format(tmp=tmp_path, tokens=token_file)]
    result = CliRunner().invoke(cli, argv)
    assert result.exit_code == 2, result.output
    assert message in result.output


def test_malformed_token_file_names_the_line(tmp_path: Path) -> None:
    bad = tmp_path / "tokens.csv"
    bad.write_text('ok,admin,1,"system:masters"\nbroken\n')
    result = CliRunner().invoke(
        cli, ["apiserver", "--store", f"sqlite:///{tmp_path}/a.db", "--token-file", str(bad)]
    )
    assert result.exit_code == 2 and "tokens.csv:2" in result.output


def test_https_with_certificate(tmp_path: Path, token_file: Path) -> None:
    cert, key = tmp_path / "tls.crt", tmp_path / "tls.key"
    subprocess.run(
        [
            "openssl",
            "req",
            "-x509",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-days",
            "1",
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
            "-keyout",
            str(key),
            "-out",
            str(cert),
        ],
        check=True,
        capture_output=True,
    )
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ironpool.cli.main",
            "apiserver",
            "--store",
            f"sqlite:///{tmp_path}/a.db",
            "--listen",
            f"127.0.0.1:{port}",
            "--token-file",
            str(token_file),
            "--tls-cert-file",
            str(cert),
            "--tls-private-key-file",
            str(key),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ},
    )
    try:
        url = f"https://127.0.0.1:{port}"
        deadline = time.monotonic() + 30
        while True:
            assert proc.poll() is None, "apiserver exited"
            try:
                if (
                    httpx.get(
                        f"{url}/readyz", verify=ssl.create_default_context(cafile=str(cert)), timeout=0.5
                    ).status_code
                    == 200
                ):
                    break
            except httpx.HTTPError:
                pass
            assert time.monotonic() < deadline, "apiserver did not become ready over HTTPS"
            time.sleep(0.05)
        r = httpx.get(
            f"{url}/api/v1/namespaces",
            verify=ssl.create_default_context(cafile=str(cert)),
            headers={"Authorization": "Bearer admintok"},
        )
        assert r.status_code == 200 and r.json()["kind"] == "NamespaceList"
    finally:
        proc.terminate()
        proc.wait(timeout=10)
