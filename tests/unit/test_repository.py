"""The repository stands on its own: nothing it tracks points at files outside it."""

from __future__ import annotations

import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_no_tracked_file_refers_outside_the_repository() -> None:
    found = subprocess.run(["git", "grep", "-n", "-I", "-F", "-e", "../shared", "-e", "/work/shared",
                            "--", ".", ":!tests/unit/test_repository.py"],
                           cwd=REPO, capture_output=True, text=True, check=False)
    assert found.returncode == 1, f"references to files outside the repository:\n{found.stdout}"
