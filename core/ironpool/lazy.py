"""A package's public names imported on first use (PEP 562 ``__getattr__``), so that importing one
light name from ``ironpool.api`` or ``ironpool.client`` does not load every module behind the others
(pydantic models, aiohttp): short-lived front ends (an Ansible task, a CLI command) start faster."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any


def lazy_exports(package: str, modules: Mapping[str, str]) -> Callable[[str], Any]:
    """The module ``__getattr__`` of ``package``: ``modules`` maps each public name to the submodule
    that defines it; a name is imported once, then kept as a plain attribute of the package."""

    def __getattr__(name: str) -> Any:
        module = modules.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(f"{package}.{module}"), name)
        setattr(sys.modules[package], name, value)
        return value

    return __getattr__
