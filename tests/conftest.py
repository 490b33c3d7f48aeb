"""Fixtures shared by every test package: a real apiserver process on a SQLite file."""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest


@dataclass(frozen=True)
class ApiServer:
    """A running ``ironpool apiserver``: its URL, tokens, files and process."""

    url: str
    admin_token: str
    user_token: str
    db_path: Path
    token_file: Path
    process: subprocess.Popen[bytes]
    log_path: Path

    def headers(self, token: str | None = None) -> dict[str, str]:
        return {"Authorization": f"Bearer {token or self.admin_token}"}


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_until(predicate, timeout: float, interval: float = 0.02, message: str = "condition") -> None:  # type: ignore[no-untyped-def]
    """Poll ``predicate`` until it is truthy or ``timeout`` seconds pass (then fail the test)."""
    deadline = time.monotonic() + timeout
    while True:
        if predicate():
            return
        if time.monotonic() > deadline:
            pytest.fail(f"timed out after {timeout}s waiting for {message}")
        time.sleep(interval)


def start_apiserver(tmp: Path, db_path: Path | None = None, port: int | None = None) -> ApiServer:
    """Start ``ironpool apiserver`` as a subprocess and wait for ``/readyz``."""
    admin, user = secrets.token_hex(16), secrets.token_hex(16)
    token_file = tmp / "tokens.csv"
    if not token_file.exists():
        token_file.write_text(f'{admin},admin,1,"system:masters"\n{user},alice,2,"developers"\n')
    else:
        first, second = token_file.read_text().splitlines()[:2]
        admin, user = first.split(",")[0], second.split(",")[0]
    db = db_path or tmp / "ironpool.db"
    port = port or free_port()
    log_path = tmp / f"apiserver-{port}.log"
    log = open(log_path, "ab")  # noqa: SIM115 - handed to the child process
    proc = subprocess.Popen(
        [sys.executable, "-m", "ironpool.cli.main", "apiserver", "--store", f"sqlite:///{db}",
         "--listen", f"127.0.0.1:{port}", "--token-file", str(token_file)],
        stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    url = f"http://127.0.0.1:{port}"

    def ready() -> bool:
        if proc.poll() is not None:
            pytest.fail(f"apiserver exited with {proc.returncode}: {log_path.read_text()[-2000:]}")
        try:
            return httpx.get(f"{url}/readyz", timeout=0.5).status_code == 200
        except httpx.HTTPError:
            return False

    wait_until(ready, timeout=30, message="apiserver /readyz")
    return ApiServer(url, admin, user, db, token_file, proc, log_path)


def stop_apiserver(server: ApiServer) -> None:
    if server.process.poll() is None:
        server.process.terminate()
        try:
            server.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            server.process.kill()
            server.process.wait()


@pytest.fixture
def apiserver(tmp_path: Path) -> Iterator[ApiServer]:
    """A fresh apiserver on its own SQLite file, stopped after the test."""
    server = start_apiserver(tmp_path)
    try:
        yield server
    finally:
        stop_apiserver(server)
