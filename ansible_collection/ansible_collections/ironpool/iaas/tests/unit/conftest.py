# Copyright: ironpool contributors
# SPDX-License-Identifier: Apache-2.0
"""Running a module's main() in-process against an in-memory apiserver (units only; the real
apiserver is exercised by the playbook runs, Molecule and tests/ansible/)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from ansible.module_utils import basic

from ansible_collections.ironpool.iaas.plugins.module_utils import base
from ansible_collections.ironpool.iaas.tests.unit.fake_api import FakeClient

try:
    from ansible.module_utils.testing import patch_module_args
except ImportError:  # ansible-core before 2.19
    patch_module_args = None


class ModuleExit(Exception):
    """exit_json or fail_json was called; ``result`` is what the module returned."""

    def __init__(self, result: dict[str, Any], failed: bool) -> None:
        super().__init__(result.get("msg", ""))
        self.result = result
        self.failed = failed


@pytest.fixture
def client() -> FakeClient:
    return FakeClient.with_defaults()


@pytest.fixture
def run_module(monkeypatch: pytest.MonkeyPatch, client: FakeClient) -> Callable[..., ModuleExit]:
    def exit_json(self: Any, **result: Any) -> None:
        raise ModuleExit(result, failed=False)

    def fail_json(self: Any, **result: Any) -> None:
        raise ModuleExit(result, failed=True)

    monkeypatch.setattr(basic.AnsibleModule, "exit_json", exit_json)
    monkeypatch.setattr(basic.AnsibleModule, "fail_json", fail_json)
    monkeypatch.setattr(base, "connect", lambda params: client)

    def run(main: Callable[[], None], args: dict[str, Any], check_mode: bool = False,
            diff: bool = False) -> ModuleExit:
        full = {**args, "_ansible_check_mode": check_mode, "_ansible_diff": diff}
        if patch_module_args is not None:
            with patch_module_args(full), pytest.raises(ModuleExit) as info:
                main()
        else:  # pragma: no cover - older cores
            import json

            monkeypatch.setattr(basic, "_ANSIBLE_ARGS", json.dumps({"ANSIBLE_MODULE_ARGS": full}).encode())
            with pytest.raises(ModuleExit) as info:
                main()
        return info.value

    return run
