"""ironpool installed from the repository into a fresh venv outside the checkout: ``ironpool up``
finds everything it ships (the default classes, the tiny image's build script) without the source
tree."""

from __future__ import annotations

import json
import subprocess
import venv
from pathlib import Path

import pytest
import yaml

from tests.e2e.up_harness import UpInstance
from tests.helpers.runtimes import REPO, build_tiny_image, require_libvirt

DEFAULT_MACHINE_CLASSES = REPO / "core" / "ironpool" / "allinone" / "default_classes" / "machineclasses.yaml"


@pytest.mark.slow
def test_pip_install_then_up_outside_the_checkout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    require_libvirt()
    monkeypatch.delenv("PYTHONPATH", raising=False)  # nothing may lead the new venv to a source tree
    images = build_tiny_image()
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    python = str(env_dir / "bin" / "python")
    # pip builds a wheel of the repository (not an editable install) and installs it with its
    # dependencies (from pip's cache where this machine installed them before).
    subprocess.run([python, "-m", "pip", "install", "-q", "--disable-pip-version-check", str(REPO)],
                   check=True, capture_output=True, timeout=600)
    where = subprocess.run([python, "-c", "import ironpool; print(ironpool.__file__)"], cwd=tmp_path,
                           check=True, capture_output=True, text=True).stdout.strip()
    assert where.startswith(str(env_dir)) and not where.startswith(str(REPO)), where

    up = UpInstance(images=images, classes=[], python=python, build_tiny=True)
    try:
        up.start(timeout=120)
        out = up.output()
        shipped = [d["metadata"]["name"] for d in yaml.safe_load_all(DEFAULT_MACHINE_CLASSES.read_text())]
        classes_line = next(line for line in out.splitlines() if "✓ classes" in line)
        assert "image tiny" in out and all(name in classes_line for name in shipped), out
        listed = json.loads(up.cli("get", "machineclasses", "-o", "json").stdout)["items"]
        assert sorted(c["metadata"]["name"] for c in listed) == sorted(shipped)
    finally:
        up.cleanup()
