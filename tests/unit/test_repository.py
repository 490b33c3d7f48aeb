"""The repository stands on its own: nothing it tracks points at files outside it."""

from __future__ import annotations

import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
# The team workspace beside the checkout, spelled in parts so this file does not name it either.
OUTSIDE = ("../" + "shared", "/work/" + "shared")


def test_no_tracked_file_refers_outside_the_repository() -> None:
    patterns = [arg for path in OUTSIDE for arg in ("-e", path)]
    found = subprocess.run(["git", "grep", "-n", "-I", "-F", *patterns, "--", "."],
                           cwd=REPO, capture_output=True, text=True, check=False)
    assert found.returncode == 1, f"references to files outside the repository:\n{found.stdout}"
