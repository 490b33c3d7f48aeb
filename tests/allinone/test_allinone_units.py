"""Fast tests of ``ironpool up``'s parts: data dir, lock, token, classes, seeding, CLI."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from ironpool.allinone.classes import ClassesError, load_class_manifests, seed_classes, write_runtime_files
from ironpool.allinone.datadir import DataDir, DataDirError, InstanceLock, dns_label, ensure_admin_token
from ironpool.apiserver.auth.authentication import Authenticator
from ironpool.client import AsyncClient, ClientConfig
from ironpool.runtime.machine.classes import load_classes as load_machine_classes
from ironpool.runtime.volume.classes import load_classes as load_volume_classes

from tests.helpers.qemu_dirs import qemu_tmpdir

REPO = Path(__file__).resolve().parents[2]
EXAMPLE_CLASSES = REPO / "examples" / "classes"


def test_dns_label_sanitises_hostnames() -> None:
    assert dns_label("My_Host.example") == "my-host-example"
    assert dns_label("--") == "localhost"
    assert len(dns_label("a" * 80)) == 63


def test_admin_token_is_generated_once_with_mode_0600(tmp_path: Path) -> None:
    path = tmp_path / "tokens.csv"
    token = ensure_admin_token(path)
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    assert ensure_admin_token(path) == token
    user = Authenticator.from_file(path).authenticate(f"Bearer {token}")
    assert user.is_admin and user.name == "admin"


def test_token_file_without_admin_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "tokens.csv"
    path.write_text('t1,alice,2,"developers"\n')
    with pytest.raises(DataDirError, match="system:masters"):
        ensure_admin_token(path)


def test_second_instance_on_the_same_data_dir_is_refused(tmp_path: Path) -> None:
    first = InstanceLock(tmp_path / "up.lock")
    first.acquire()
    try:
        # Another process, as a second `ironpool up` would be (flock is per open file description).
        code = (
            "import sys; from pathlib import Path\n"
            "from ironpool.allinone.datadir import InstanceLock, DataDirError\n"
            f"try:\n    InstanceLock(Path({str(tmp_path / 'up.lock')!r})).acquire()\n"
            "except DataDirError as e:\n    print(e); sys.exit(3)\n"
        )
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
        assert proc.returncode == 3, proc.stderr
        assert f"pid {os.getpid()}" in proc.stdout
    finally:
        first.release()
    again = InstanceLock(tmp_path / "up.lock")
    again.acquire()
    again.release()


def test_socket_paths_too_long_for_unix_sockets_are_refused(tmp_path: Path) -> None:
    deep = tmp_path / ("x" * 100)
    with pytest.raises(DataDirError, match="longer than"):
        DataDir(deep).prepare()
    short = qemu_tmpdir("ipu-")
    try:
        DataDir(short / "d").prepare()
        assert (short / "d" / "sockets").is_dir()
        # QEMU's user passes through the root to the disks; what is private stays private.
        modes = {p: oct((short / "d" / p).stat().st_mode & 0o777) for p in ("", "pki", "sockets", "logs")}
        assert modes == {"": "0o711", "pki": "0o700", "sockets": "0o700", "logs": "0o700"}
    finally:
        shutil.rmtree(short)


def test_example_classes_feed_both_runtimes(tmp_path: Path) -> None:
    classes = load_class_manifests([EXAMPLE_CLASSES])
    assert classes.names("MachineClass") == ["x-small", "small"]
    assert classes.names("VolumeClass") == ["fast"]
    machine_file, volume_file = write_runtime_files(classes, tmp_path)
    assert set(load_machine_classes(machine_file)) == {"x-small", "small"}
    assert set(load_volume_classes(volume_file)) == {"fast"}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("apiVersion: v1\nkind: Secret\nmetadata: {name: s}\n", "kind 'Secret' is not a MachineClass"),
        ("apiVersion: compute.ironcore.dev/v1alpha1\nkind: MachineClass\nmetadata: {}\n", "metadata.name"),
        ("apiVersion: compute.ironcore.dev/v9\nkind: MachineClass\nmetadata: {name: a}\n", "apiVersion"),
        ("apiVersion: storage.ironcore.dev/v1alpha1\nkind: VolumeClass\nmetadata: {name: a}\n",
         "no MachineClass"),
        (": : :\n", "classes.yaml"),
    ],
)
def test_bad_class_manifests_name_the_file_and_problem(tmp_path: Path, text: str, message: str) -> None:
    f = tmp_path / "classes.yaml"
    f.write_text(text)
    with pytest.raises(ClassesError, match=message):
        load_class_manifests([f])


def test_duplicate_class_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ClassesError, match="defined twice"):
        load_class_manifests([EXAMPLE_CLASSES, EXAMPLE_CLASSES / "machineclasses.yaml"])


async def test_seeding_creates_missing_classes_and_keeps_existing_ones(apiserver: Any) -> None:
    classes = load_class_manifests([EXAMPLE_CLASSES])
    async with AsyncClient(ClientConfig(server=apiserver.url, token=apiserver.admin_token)) as client:
        assert sorted(await seed_classes(client, classes)) == [
            "MachineClass/small", "MachineClass/x-small", "VolumeClass/fast"]
        from ironpool.api.resources import resolve

        info = resolve("machineclasses")
        await client.patch_raw(info, "small", {"metadata": {"labels": {"edited": "yes"}}})
        assert await seed_classes(client, classes) == []
        small = await client.get_raw(info, "small")
        assert small["metadata"]["labels"] == {"edited": "yes"}


def test_up_rejects_bad_arguments_before_starting() -> None:
    from ironpool.cli.main import cli

    runner = CliRunner()
    result = runner.invoke(cli, ["up", "--listen", "nowhere"])
    assert result.exit_code == 2 and "--listen" in result.output
    result = runner.invoke(cli, ["up", "--pool", "Bad_Name"])
    assert result.exit_code == 2 and "--pool" in result.output and "bad-name" in result.output
    result = runner.invoke(cli, ["up", "--capacity-cpu", "lots"])
    assert result.exit_code == 2 and "--capacity-cpu" in result.output


def test_up_reports_an_unusable_data_dir(tmp_path: Path) -> None:
    from ironpool.cli.main import cli

    blocker = tmp_path / "file"
    blocker.write_text("")
    result = CliRunner().invoke(cli, ["up", "--data-dir", str(blocker / "d"), "--no-write-client-config"])
    assert result.exit_code == 1
    assert "--data-dir" in result.output and "cannot create" in result.output


def test_up_reports_a_busy_port_and_releases_the_data_dir() -> None:
    import socket

    from ironpool.cli.main import cli

    work = qemu_tmpdir("ipu-")
    data = work / "d"
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        result = CliRunner().invoke(cli, ["up", "--data-dir", str(data), "--listen", f"127.0.0.1:{port}",
                                          "--no-tiny-image", "--no-write-client-config"])
    assert result.exit_code == 1, result.output
    assert f"cannot listen on 127.0.0.1:{port}" in result.output and "--listen" in result.output
    # Nothing half-made is left holding the directory: the lock is free again.
    lock = InstanceLock(data / "up.lock")
    lock.acquire()
    lock.release()
    shutil.rmtree(work)


async def test_stop_while_starting_abandons_the_start_and_kills_the_image_build(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import asyncio
    import io
    import time

    from ironpool.allinone import image
    from ironpool.allinone.progress import Progress
    from ironpool.allinone.up import AllInOne, UpOptions

    work = qemu_tmpdir("ipu-")
    marker = work / "build.pid"
    script = work / "slow-build.sh"
    script.write_text(f"echo $$ > {marker}\nexec sleep 60\n")
    monkeypatch.setattr(image, "build_script", lambda: script)
    out = io.StringIO()
    system = AllInOne(UpOptions(data_dir=work / "d", write_client_config=False), Progress(out))
    stop = asyncio.Event()
    run = asyncio.create_task(system.run(stop))
    deadline = time.monotonic() + 10
    while not (marker.exists() and marker.read_text().strip()):
        assert time.monotonic() < deadline, "the image build did not start"
        await asyncio.sleep(0.01)
    pid = int(marker.read_text())
    stop.set()
    await asyncio.wait_for(run, 10)
    assert "apiserver" not in out.getvalue()  # nothing after the image step was started
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)
    lock = InstanceLock(work / "d" / "up.lock")
    lock.acquire()
    lock.release()
    shutil.rmtree(work)
