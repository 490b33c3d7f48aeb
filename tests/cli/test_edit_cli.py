"""``ironpool create namespace | label | annotate | patch``, kinds as a comma list, and ``get`` printing
the server's Table, as a user runs them against the real apiserver."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest

from tests.cli.conftest import Run, cli_env
from tests.cli.test_resources_cli import SAMPLES, get_json


def test_create_namespace_and_use_it(ironpool: Run) -> None:
    created = ironpool("create", "namespace", "team-a")
    assert created.returncode == 0 and created.stdout.strip() == "namespace/team-a created", created.stderr
    again = ironpool("create", "namespace", "team-a")
    assert again.returncode == 1 and again.stderr.startswith("Error from server (AlreadyExists)")
    assert ironpool("create", "namespace", "Bad_Name").stderr.startswith("Error from server (Invalid)")
    dry = ironpool("create", "namespace", "team-b", "--dry-run")
    assert dry.stdout.strip() == "namespace/team-b created (server dry run)"
    assert ironpool("get", "namespace", "team-b").returncode == 1
    assert get_json(ironpool, "ns", "team-a")["status"]["phase"] == "Active"


def test_label_and_annotate_set_refuse_to_overwrite_and_remove(ironpool: Run) -> None:
    assert ironpool("apply", "-f", str(SAMPLES)).returncode == 0
    labeled = ironpool("label", "mc", "machineclass-sample", "tier=gold", "team=a")
    assert labeled.stdout.strip() == "machineclass.compute.ironcore.dev/machineclass-sample labeled"
    labeled_class = get_json(ironpool, "mc", "machineclass-sample")
    assert labeled_class["metadata"]["labels"] == {"tier": "gold", "team": "a"}
    assert "ironpool" in {e["manager"] for e in labeled_class["metadata"]["managedFields"]}
    refused = ironpool("label", "mc/machineclass-sample", "tier=silver")
    assert refused.returncode == 1 and refused.stderr.strip() == (
        "error: machineclass.compute.ironcore.dev/machineclass-sample: 'tier' already has a value (gold), "
        "and --overwrite is false")
    assert ironpool("label", "mc/machineclass-sample", "tier=silver", "team-", "--overwrite").returncode == 0
    assert get_json(ironpool, "mc", "machineclass-sample")["metadata"]["labels"] == {"tier": "silver"}
    unchanged = ironpool("label", "mc/machineclass-sample", "tier=silver")
    assert unchanged.stdout.strip() == "machineclass.compute.ironcore.dev/machineclass-sample not labeled"
    annotated = ironpool("annotate", "machinepool", "machinepool-sample", "note=hello world")
    assert annotated.stdout.strip() == "machinepool.compute.ironcore.dev/machinepool-sample annotated"
    pool = get_json(ironpool, "mp", "machinepool-sample")
    assert pool["metadata"]["annotations"] == {"note": "hello world"}
    assert pool["metadata"]["labels"] == {"ironcore.dev/az": "az1"}  # labels untouched
    bad = ironpool("label", "mc", "machineclass-sample", "UPPER CASE=x")
    assert bad.returncode == 1 and "expected KEY=VALUE or KEY-" in bad.stderr


def test_patch_merge_and_strategic(ironpool: Run) -> None:
    assert ironpool("apply", "-f", str(SAMPLES)).returncode == 0
    patched = ironpool("patch", "machinepool", "machinepool-sample", "--type", "merge",
                       "-p", '{"spec": {"taints": [{"key": "maintenance", "effect": "NoSchedule"}]}}')
    assert patched.stdout.strip() == "machinepool.compute.ironcore.dev/machinepool-sample patched", \
        patched.stderr
    taints = get_json(ironpool, "mp", "machinepool-sample")["spec"]["taints"]
    assert taints == [{"key": "maintenance", "effect": "NoSchedule"}]
    same = ironpool("patch", "mp/machinepool-sample", "-p", "spec: {providerID: ironcore://shared}")
    assert same.stdout.strip() == "machinepool.compute.ironcore.dev/machinepool-sample patched (no change)"
    invalid = ironpool("patch", "mc", "machineclass-sample", "-p", '{"capabilities": {"cpu": "8"}}')
    assert invalid.returncode == 1 and invalid.stderr.startswith("Error from server (Invalid)")
    assert ironpool("patch", "mc", "machineclass-sample", "-p", "[1]").stderr.strip() == \
        "error: --patch: must be an object, got list"


def test_get_several_kinds_at_once(ironpool: Run) -> None:
    assert ironpool("apply", "-f", str(SAMPLES)).returncode == 0
    out = ironpool("get", "machinepools,machineclasses")
    assert out.returncode == 0, out.stderr
    first, second = out.stdout.split("\n\n")
    assert first.splitlines()[1].split()[0] == "machinepool.compute.ironcore.dev/machinepool-sample"
    assert second.splitlines()[1].split()[0] == "machineclass.compute.ironcore.dev/machineclass-sample"
    names = ironpool("get", "mp,mc", "-o", "name").stdout.split()
    assert names == ["machinepool.compute.ironcore.dev/machinepool-sample",
                     "machineclass.compute.ironcore.dev/machineclass-sample"]
    refused = ironpool("get", "mp,mc", "machinepool-sample")
    assert refused.returncode == 1 and "one kind at a time" in refused.stderr


class _TableServer(BaseHTTPRequestHandler):
    """A server whose Machines print a column no ironpool release has: the CLI must show it."""

    accepts: list[str] = []

    def do_GET(self) -> None:
        self.accepts.append(self.headers.get("Accept", ""))
        body: dict[str, Any] = {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": {},
                                "columnDefinitions": [{"name": "Name", "format": "name", "priority": 0},
                                                      {"name": "Flavour", "priority": 0},
                                                      {"name": "Secret", "priority": 1}],
                                "rows": [{"cells": ["m1", "vanilla", "x"],
                                          "object": {"metadata": {"name": "m1"}}}]}
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def table_server() -> Iterator[str]:
    server = HTTPServer(("127.0.0.1", 0), _TableServer)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_get_prints_the_columns_the_server_serves(table_server: str, tmp_path: Path) -> None:
    import subprocess
    import sys

    env = {**cli_env(None, tmp_path), "IRONPOOL_SERVER": table_server}
    out = subprocess.run([sys.executable, "-m", "ironpool.cli.main", "get", "machines"], env=env,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert [line.split() for line in out.stdout.splitlines()] == [["NAME", "FLAVOUR"], ["m1", "vanilla"]]
    assert _TableServer.accepts[-1].startswith("application/json;as=Table;v=v1;g=meta.k8s.io")
