"""Make a small data-dir fixture with the ironpool of this checkout: ``ironpool.db``, ``tokens.csv``
and ``objects.json`` (what was created, as the apiserver answered).

The committed fixture under ``tests/store/datadirs/<name>/`` was made by the release before store
schema versions existed; :mod:`tests.store.test_schema_upgrade` checks that the current code opens
it and serves every object listed. To capture the data dir of another release, run this script from
a checkout of that release (``git worktree add /tmp/old <tag>``)::

    python -m tests.store.make_datadir_fixture tests/store/datadirs/<name>   (from the repository's root)

It starts ``ironpool apiserver`` on the new file, creates a handful of objects of different kinds
over HTTP, and stops the server cleanly (SIGTERM), so the database is checkpointed into one file.
"""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx

from tests.helpers.net import free_port
from tests.helpers.wait import wait_for

ADMIN_TOKEN = "fixture-admin-token"  # a fixture's token, nothing to keep secret

OBJECTS: list[tuple[str, dict[str, Any]]] = [
    ("/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}}),
    ("/apis/compute.ironcore.dev/v1alpha1/machineclasses", {
        "apiVersion": "compute.ironcore.dev/v1alpha1", "kind": "MachineClass",
        "metadata": {"name": "x-small"}, "capabilities": {"cpu": "1", "memory": "256Mi"}}),
    ("/apis/storage.ironcore.dev/v1alpha1/volumeclasses", {
        "apiVersion": "storage.ironcore.dev/v1alpha1", "kind": "VolumeClass",
        "metadata": {"name": "fast"}, "capabilities": {"tps": "100Mi", "iops": "1000"}}),
    ("/api/v1/namespaces/team-a/secrets", {
        "apiVersion": "v1", "kind": "Secret", "metadata": {"name": "web-ignition", "namespace": "team-a"},
        "stringData": {"ignition.yaml": "{}"}}),
    ("/apis/storage.ironcore.dev/v1alpha1/namespaces/team-a/volumes", {
        "apiVersion": "storage.ironcore.dev/v1alpha1", "kind": "Volume",
        "metadata": {"name": "web-data", "namespace": "team-a"},
        "spec": {"volumeClassRef": {"name": "fast"}, "resources": {"storage": "1Gi"}}}),
    ("/apis/compute.ironcore.dev/v1alpha1/namespaces/team-a/machines", {
        "apiVersion": "compute.ironcore.dev/v1alpha1", "kind": "Machine",
        "metadata": {"name": "web", "namespace": "team-a", "labels": {"app": "web"}},
        "spec": {"machineClassRef": {"name": "x-small"}, "power": "On",
                 "ignitionRef": {"name": "web-ignition"},
                 "volumes": [{"name": "root", "localDisk": {"image": "tiny", "sizeLimit": "1Gi"}},
                             {"name": "data", "volumeRef": {"name": "web-data"}}]}}),
]


def _fold_wal(db: Path) -> None:
    """Checkpoint the WAL into the database and leave one self-contained file (journal mode DELETE;
    the store turns WAL on again when it opens it)."""
    conn = sqlite3.connect(db)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        conn.execute("PRAGMA journal_mode=DELETE")
    finally:
        conn.close()
    Path(f"{db}.lock").unlink(missing_ok=True)


def make(out: Path) -> list[dict[str, Any]]:
    """Create the fixture in ``out`` (which must not hold a database yet); the objects as created."""
    out.mkdir(parents=True, exist_ok=True)
    out = out.absolute()
    db = out / "ironpool.db"
    if db.exists():
        raise SystemExit(f"{db} exists; remove it first")
    tokens = out / "tokens.csv"
    tokens.write_text(f'{ADMIN_TOKEN},admin,admin,"system:masters"\n')
    port = free_port()
    log = out.parent / f"{out.name}-apiserver.log"
    with open(log, "wb") as log_fh:
        argv = [sys.executable, "-m", "ironpool.cli.main", "apiserver", "--store", f"sqlite:///{db}",
                "--listen", f"127.0.0.1:{port}", "--token-file", str(tokens)]
        proc = subprocess.Popen(argv, stdout=log_fh, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        def ready() -> bool:
            if proc.poll() is not None:
                raise SystemExit(f"the apiserver exited; see {log}")
            return httpx.get(f"{url}/readyz", timeout=0.5).status_code == 200

        wait_for(ready, 30, f"the apiserver to be ready (its log: {log})", retry_on=(httpx.HTTPError,))
        made = []
        with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {ADMIN_TOKEN}"}) as client:
            for path, body in OBJECTS:
                answer = client.post(path, json=body)
                answer.raise_for_status()
                made.append({"path": f"{path}/{body['metadata']['name']}", "object": answer.json()})
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=30)
    log.unlink()
    _fold_wal(db)
    (out / "objects.json").write_text(json.dumps(made, indent=1, sort_keys=True) + "\n")
    return made


if __name__ == "__main__":
    if len(sys.argv) != 2:
        raise SystemExit(f"usage: {sys.argv[0]} OUT_DIR")
    made = make(Path(sys.argv[1]))
    print(f"{len(made)} objects in {sys.argv[1]}")
