# Copyright: ironpool contributors
# SPDX-License-Identifier: Apache-2.0
"""The action plugin of ``ironpool.iaas.machine``: in check mode, the Machines a run would create are
predicted together.

An Ansible module runs alone: a check-mode task cannot know the Machines that earlier tasks of the
run (or earlier items of its own loop, or other hosts' tasks) would have created. This plugin keeps
them, on the controller, in a small file of the run (named after the ``ansible-playbook`` process,
which every task's worker process is a child of), hands them to the module (``predict_with``), which
asks the scheduler about all of them and this one together, and adds the one the module answered
for (``placement_request``). The file lives in the controller's temporary directory; files of runs
that ended over a day ago are removed.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ansible.plugins.action import ActionBase

_DIR = Path(tempfile.gettempdir()) / "ironpool-ansible-check"
_STALE = 24 * 3600.0


def _run_id() -> str:
    """The ``ansible-playbook`` process this task runs under: its pid and start time (pids recur)."""
    ppid = os.getppid()
    try:
        started = Path(f"/proc/{ppid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        started = "0"
    return f"{ppid}-{started}"


@contextlib.contextmanager
def _run_set() -> Iterator[list[dict[str, Any]]]:
    """The Machines this run would create so far, locked for the task; what the body leaves in the
    list is written back."""
    _DIR.mkdir(mode=0o700, exist_ok=True)
    for old in _DIR.glob("*.json"):
        with contextlib.suppress(OSError):
            if time.time() - old.stat().st_mtime > _STALE:
                old.unlink()
    path = _DIR / f"{_run_id()}.json"
    with open(os.open(path, os.O_RDWR | os.O_CREAT, 0o600), "r+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        text = fh.read()
        members: list[dict[str, Any]] = json.loads(text) if text else []
        yield members
        fh.seek(0)
        fh.truncate()
        fh.write(json.dumps(members))


def _key(machine: dict[str, Any]) -> tuple[Any, Any]:
    meta = machine.get("metadata") or {}
    return meta.get("namespace"), meta.get("name")


class ActionModule(ActionBase):
    """Runs the module; in check mode with the Machines of the run, recording this one."""

    def run(self, tmp: Any = None, task_vars: dict[str, Any] | None = None) -> dict[str, Any]:
        result = super().run(tmp, task_vars)
        args = dict(self._task.args)
        if not self._task.check_mode or args.get("state", "present") != "present":
            result.update(self._execute_module(module_args=args, task_vars=task_vars))
            return result
        with _run_set() as members:
            args["predict_with"] = list(members)
            answer = self._execute_module(module_args=args, task_vars=task_vars)
            request = answer.get("placement_request")
            if request and not answer.get("failed"):
                members[:] = [m for m in members if _key(m) != _key(request)] + [request]
        result.update(answer)
        return result
