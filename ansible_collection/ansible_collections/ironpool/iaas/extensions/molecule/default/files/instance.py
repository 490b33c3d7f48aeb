# Copyright: ironpool contributors
# SPDX-License-Identifier: Apache-2.0
"""A private ``ironpool up`` for the Molecule scenario: its own data dir, port, pool and libvirt
storage pool, so a run never touches another installation.

    instance.py start DIR     start it, wait until it is up, write DIR/instance.json
    instance.py stop DIR      stop it; remove every domain and volume it left, and its storage pool
"""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

START_TIMEOUT = 120.0
STOP_TIMEOUT = 60.0


def start(workdir: Path) -> None:
    workdir.mkdir(parents=True, exist_ok=True)
    tag = secrets.token_hex(3)
    # Not in Molecule's ephemeral directory: that is under the home directory, which QEMU's user
    # (libvirt-qemu) may not pass through to reach the machines' disks.
    data_parent = Path(tempfile.mkdtemp(prefix="ironpool-molecule-"))
    data_parent.chmod(0o711)
    state: dict[str, str | int] = {
        "pool": f"molecule-{tag}",
        "storage_pool": f"ironpool-molecule-{tag}",
        "data_dir": str(data_parent / "data"),
        "log": str(workdir / "up.log"),
        "config": os.environ["IRONPOOL_CONFIG"],
    }
    images = os.environ.get("IRONPOOL_TEST_IMAGES", "/var/cache/ironpool/test-images")
    cmd = [sys.executable, "-m", "ironpool.cli.main", "up", "--data-dir", str(state["data_dir"]),
           "--listen", "127.0.0.1:0", "--pool", str(state["pool"]),
           "--storage-pool", str(state["storage_pool"]), "--images", images, "--no-tiny-image",
           "--heartbeat-interval", "2"]
    log_path = Path(str(state["log"]))
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    state["pid"] = proc.pid
    (workdir / "instance.json").write_text(json.dumps(state))
    deadline = time.monotonic() + START_TIMEOUT
    while "ironpool is up" not in log_path.read_text(errors="replace"):
        if proc.poll() is not None:
            sys.exit(f"ironpool up exited with {proc.returncode}:\n{log_path.read_text()}")
        if time.monotonic() > deadline:
            sys.exit(f"ironpool up was not up after {START_TIMEOUT:g}s:\n{log_path.read_text()}")
        time.sleep(0.1)
    print(json.dumps(state))


def _machine_ids(config: str) -> list[str]:
    """The IRI ids of the Machines the apiserver still knows (their domains are ironpool-<id>)."""
    from ironpool.api.resources import resolve
    from ironpool.client import Client, ClientConfig

    try:
        with Client(ClientConfig.load(Path(config))) as client:
            machines = client.list_raw(resolve("machines"), None).items
    except Exception:  # the apiserver may be gone already; then there is nothing to ask
        return []
    ids = [((m.get("status") or {}).get("machineID") or "").split("://")[-1] for m in machines]
    return [i for i in ids if i]


def stop(workdir: Path) -> None:
    path = workdir / "instance.json"
    if not path.exists():
        return
    state = json.loads(path.read_text())
    leftovers = _machine_ids(state["config"])
    pid = int(state["pid"])
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGINT)
        deadline = time.monotonic() + STOP_TIMEOUT
        while _alive(pid) and time.monotonic() < deadline:
            time.sleep(0.1)
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)
    _remove_libvirt_objects([f"ironpool-{i}" for i in leftovers], state["storage_pool"])
    shutil.rmtree(Path(state["data_dir"]).parent, ignore_errors=True)
    path.unlink()


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    with contextlib.suppress(OSError), open(f"/proc/{pid}/stat") as fh:  # a zombie counts as gone
        return fh.read().split()[2] != "Z"
    return True


def _remove_libvirt_objects(domains: list[str], storage_pool: str) -> None:
    import libvirt

    libvirt.registerErrorHandler(lambda _ctx, _err: None, None)
    conn = libvirt.open(os.environ.get("IRONPOOL_LIBVIRT_URI", "qemu:///system"))
    try:
        for name in domains:
            with contextlib.suppress(libvirt.libvirtError):
                dom = conn.lookupByName(name)
                with contextlib.suppress(libvirt.libvirtError):
                    dom.destroy()
                dom.undefine()
        with contextlib.suppress(libvirt.libvirtError):
            pool = conn.storagePoolLookupByName(storage_pool)
            if pool.isActive():
                pool.refresh(0)
                for vol in pool.listAllVolumes(0):
                    with contextlib.suppress(libvirt.libvirtError):
                        vol.delete(0)
                pool.destroy()
            pool.undefine()
    finally:
        conn.close()


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] not in ("start", "stop"):
        sys.exit(__doc__)
    (start if sys.argv[1] == "start" else stop)(Path(sys.argv[2]))
