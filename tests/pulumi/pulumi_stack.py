"""A Pulumi stack for tests: a program directory, its config and a state file, deployed through the
mini engine (:mod:`mini_engine`), each deployment in a fresh process as ``pulumi`` would run it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

HERE = Path(__file__).resolve().parent
EXAMPLE = HERE.parents[1] / "examples" / "pulumi"


@dataclass
class Deployment:
    """What one ``preview``/``up``/``refresh``/``destroy`` did."""

    mode: str
    log: list[tuple[str, str]]
    outputs: dict[str, Any]
    error: str | None
    seconds: float

    def ops(self) -> dict[str, str]:
        """Resource name -> the step taken (create, same, update, replace, delete, deleted, refreshed)."""
        return {name: op for op, name in self.log}


@dataclass
class Stack:
    """One stack of the program in ``program``; state and logs live in ``workdir``."""

    program: Path
    workdir: Path
    config: dict[str, Any]
    secret_keys: tuple[str, ...] = ("ironpool:token",)
    env: dict[str, str] = field(default_factory=dict)

    @property
    def project(self) -> str:
        return str(yaml.safe_load((self.program / "Pulumi.yaml").read_text())["name"])

    @property
    def state_file(self) -> Path:
        return self.workdir / "state.json"

    def run(self, mode: str, timeout: float = 300, **program_config: Any) -> Deployment:
        """Deploy; ``program_config`` sets the program's own config keys (``webPower="Off"``)."""
        # Stack config values are strings, as `pulumi config set` stores them.
        config = {**self.config, **{f"{self.project}:{k}": json.dumps(v) if isinstance(v, bool) else str(v)
                                    for k, v in program_config.items()}}
        cmd = [sys.executable, str(HERE / "pulumi_deploy.py"), mode, "--program", str(self.program),
               "--state", str(self.state_file), "--config", json.dumps(config), "--project", self.project]
        for key in self.secret_keys:
            cmd += ["--secret", key]
        started = time.monotonic()
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False,
                              env={**os.environ, **self.env})
        seconds = time.monotonic() - started
        (self.workdir / f"{mode}.stderr").write_text(proc.stderr)
        if proc.returncode != 0 or not proc.stdout.strip():
            raise AssertionError(f"{mode} crashed ({proc.returncode}):\n{proc.stdout[-3000:]}\n"
                                 f"{proc.stderr[-5000:]}")
        result = json.loads(proc.stdout.strip().splitlines()[-1])
        log = [(op, name) for op, name in result["log"]]
        return Deployment(mode, log, result["outputs"], result["error"], seconds)

    def preview(self, **program_config: Any) -> Deployment:
        return self.run("preview", **program_config)

    def up(self, **program_config: Any) -> Deployment:
        return self.run("up", **program_config)

    def refresh(self) -> Deployment:
        return self.run("refresh")

    def destroy(self) -> Deployment:
        return self.run("destroy")

    def state(self) -> dict[str, Any]:
        """The state file: ``{"resources": {urn: {id, inputs, outputs}}, "dependencies": {...}}``."""
        return json.loads(self.state_file.read_text()) if self.state_file.exists() else {"resources": {}}

    def resource(self, name: str) -> dict[str, Any] | None:
        """The state entry of the resource named ``name``, if any."""
        for urn, entry in self.state()["resources"].items():
            if urn.rsplit("::", 1)[1] == name:
                return dict(entry)
        return None


def stack_for(program: Path, up: Any, workdir: Path) -> Stack:
    """A stack of ``program`` configured for the ``ironpool up`` instance ``up`` by stack config alone."""
    return Stack(program=program, workdir=workdir,
                 config={"ironpool:server": up.url, "ironpool:token": up.token(),
                         "ironpool:caFile": str(up.ca_file)},
                 env={"IRONPOOL_CONFIG": str(workdir / "no-client-config.yaml")})
