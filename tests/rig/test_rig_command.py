"""``ironpool rig``: the rig is a command of the product; without a rig it says where it looked and
how to start one, and it refuses to start a second rig in the same folder."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path


def ironpool(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "ironpool.cli.main", *args], capture_output=True, text=True,
                          timeout=60, check=False)


def test_status_and_down_without_a_rig_name_the_folder(tmp_path: Path) -> None:
    for command in ("status", "down"):
        result = ironpool("rig", command, "--dir", str(tmp_path / "none"))
        assert result.returncode == 1
        assert f"no rig at {tmp_path / 'none'}" in result.stderr and "ironpool rig up" in result.stderr


def test_a_second_rig_in_the_same_folder_is_refused(tmp_path: Path) -> None:
    (tmp_path / "rig.json").write_text(json.dumps({}))
    result = ironpool("rig", "up", "--dir", str(tmp_path), "--hosts", "1")
    assert result.returncode == 1
    assert f"a rig is already at {tmp_path}" in result.stderr and "ironpool rig down" in result.stderr
