"""Fixtures for the Ansible tests: one ``ironpool up`` per module and a way to run the real
``ansible-playbook`` / ``ansible-inventory`` against it with the collection from this repository."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.e2e.up_harness import UpInstance
from tests.helpers.net import free_port
from tests.helpers.runtimes import REPO, build_debian_image, build_tiny_image, require_libvirt

BIN = Path(sys.executable).parent
COLLECTIONS = REPO / "ansible_collection"


@dataclass(frozen=True)
class Run:
    """One finished ``ansible-*`` command."""

    returncode: int
    stdout: str
    stderr: str

    def ok(self) -> Run:
        assert self.returncode == 0, f"exit {self.returncode}\n{self.stdout[-6000:]}\n{self.stderr[-3000:]}"
        return self

    def recap(self) -> dict[str, int]:
        """``ok``, ``changed``, ``failed``, ... of the play recap for localhost."""
        for line in self.stdout.splitlines():
            if line.startswith("localhost") and "ok=" in line:
                return {k: int(v) for k, v in (part.split("=") for part in line.split()[2:])}
        raise AssertionError(f"no play recap in:\n{self.stdout[-3000:]}")


@dataclass
class Ansible:
    """Runs the Ansible commands of the venv the way a user does, configured by the client
    configuration file ``ironpool up`` wrote."""

    up: UpInstance

    @property
    def env(self) -> dict[str, str]:
        env = {k: v for k, v in self.up.env.items() if k not in ("IRONPOOL_SERVER", "IRONPOOL_TOKEN")}
        env.update(ANSIBLE_COLLECTIONS_PATH=str(COLLECTIONS), ANSIBLE_LOCALHOST_WARNING="false",
                   ANSIBLE_INVENTORY_UNPARSED_WARNING="false", ANSIBLE_NOCOLOR="1",
                   ANSIBLE_STDOUT_CALLBACK="default", ANSIBLE_CALLBACK_RESULT_FORMAT="json")
        return env

    def playbook(self, path: Path | str, *args: str, env: dict[str, str] | None = None,
                 timeout: float = 400) -> Run:
        proc = subprocess.run([str(BIN / "ansible-playbook"), str(path), *args],
                              env={**self.env, **(env or {})}, capture_output=True, text=True,
                              timeout=timeout, check=False)
        return Run(proc.returncode, proc.stdout, proc.stderr)

    def inventory(self, path: Path | str) -> dict[str, Any]:
        proc = subprocess.run([str(BIN / "ansible-inventory"), "-i", str(path), "--list", "--export"],
                              env=self.env, capture_output=True, text=True, timeout=120, check=False)
        Run(proc.returncode, proc.stdout, proc.stderr).ok()
        return dict(json.loads(proc.stdout, object_hook=_untag))


def _untag(obj: dict[str, Any]) -> Any:
    """ansible-inventory marks values from an inventory source as unsafe (not templated):
    ``{"__ansible_unsafe": value}`` in its JSON; the tests want the values."""
    return obj["__ansible_unsafe"] if obj.keys() == {"__ansible_unsafe"} else obj


@pytest.fixture(scope="module")
def up() -> Iterator[UpInstance]:
    require_libvirt()
    # The example boots debian-12; the tests publish it to the registry of `ironpool up --registry`.
    inst = UpInstance(images=build_debian_image(build_tiny_image()),
                      extra_args=["--registry", str(free_port())])
    try:
        inst.start()
        yield inst
    finally:
        inst.cleanup()


@pytest.fixture(scope="module")
def ansible(up: UpInstance) -> Ansible:
    return Ansible(up)


def write_playbook(tmp: Path, tasks: str) -> Path:
    """A one-play playbook on localhost with these (indented) tasks."""
    path = tmp / "play.yml"
    path.write_text("- hosts: localhost\n  connection: local\n  gather_facts: false\n  tasks:\n" + tasks)
    return path


__all__ = ["REPO", "Ansible", "Run", "write_playbook"]
