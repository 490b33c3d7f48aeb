"""Fixtures shared by every test package: a real apiserver process on a SQLite file."""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.helpers.net import free_port
from tests.helpers.registry import auth_registry, registry, token_registry  # noqa: F401 - fixtures for every package
from tests.helpers.runtimes import stop_process
from tests.helpers.wait import wait_until

# Re-exported: test packages import these from here.
pytest_plugins = ["tests.helpers.worker_groups", "tests.helpers.host_turns"]

__all__ = ["ApiServer", "free_port", "start_apiserver", "stop_apiserver", "wait_until"]


def pytest_configure(config: pytest.Config) -> None:
    # Tests never read the developer's own client configuration (~/.config/ironpool/config.yaml, as
    # `make demo` leaves it, or $IRONPOOL_*): each names its server and token, or writes its own file.
    os.environ["IRONPOOL_CONFIG"] = str(Path(tempfile.mkdtemp(prefix="ironpool-tests-")) / "config.yaml")
    for name in ("IRONPOOL_SERVER", "IRONPOOL_TOKEN", "IRONPOOL_NAMESPACE"):
        os.environ.pop(name, None)


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


def start_apiserver(tmp: Path, db_path: Path | None = None, port: int | None = None,
                    store_url: str | None = None) -> ApiServer:
    """Start ``ironpool apiserver`` as a subprocess and wait for ``/readyz``; on ``db_path`` (SQLite)
    unless ``store_url`` names another store (``etcd://...``)."""
    admin, user = secrets.token_hex(16), secrets.token_hex(16)
    token_file = tmp / "tokens.csv"
    if not token_file.exists():
        token_file.write_text(f'{admin},admin,1,"system:masters"\n{user},alice,2,"developers"\n')
    else:
        first, second = token_file.read_text().splitlines()[:2]
        admin, user = first.split(",")[0], second.split(",")[0]
    db = db_path or tmp / "ironpool.db"
    # A free port can be taken by another worker's process before ours binds it: then that process
    # answers /readyz, so ready means our admin token is accepted, and a port lost that way is
    # replaced by another (unless the caller asked for this one).
    for _ in range(1 if port else 5):
        chosen = port or free_port()
        log_path = tmp / f"apiserver-{chosen}.log"
        log = open(log_path, "ab")  # noqa: SIM115 - handed to the child process
        proc = subprocess.Popen(
            [sys.executable, "-m", "ironpool.cli.main", "apiserver", "--store", store_url or f"sqlite:///{db}",
             "--listen", f"127.0.0.1:{chosen}", "--token-file", str(token_file)],
            stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        url = f"http://127.0.0.1:{chosen}"

        def ready(proc: subprocess.Popen[bytes] = proc, url: str = url) -> bool:
            if proc.poll() is not None:
                return True
            try:
                return httpx.get(f"{url}/api", headers={"Authorization": f"Bearer {admin}"},
                                 timeout=0.5).status_code == 200
            except httpx.HTTPError:
                return False

        wait_until(ready, timeout=30, message="apiserver answering with its admin token")
        if proc.poll() is None:
            return ApiServer(url, admin, user, db, token_file, proc, log_path)
        if "Address already in use" not in log_path.read_text():
            break
    pytest.fail(f"apiserver exited with {proc.returncode}: {log_path.read_text()[-2000:]}")


def stop_apiserver(server: ApiServer) -> None:
    stop_process(server.process, timeout=10)


@pytest.fixture
def apiserver(tmp_path: Path) -> Iterator[ApiServer]:
    """A fresh apiserver on its own SQLite file, stopped after the test."""
    server = start_apiserver(tmp_path)
    try:
        yield server
    finally:
        stop_apiserver(server)
