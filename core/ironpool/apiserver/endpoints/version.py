"""``/version``: what this apiserver reports itself as, in Kubernetes' ``version.Info`` form."""

from __future__ import annotations

import functools
import importlib.metadata
import os
import sys


@functools.cache
def server_version() -> dict[str, str]:
    """``/version`` in Kubernetes' ``version.Info`` form, naming ironpool's own version (clients such
    as the Python client's DynamicClient read it before anything else)."""
    try:
        version = importlib.metadata.version("ironpool")
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover - a source tree without metadata
        version = "0.0.0"
    major, _, rest = version.partition(".")
    return {
        "major": major, "minor": rest.partition(".")[0], "gitVersion": f"v{version}", "gitCommit": "",
        "gitTreeState": "", "buildDate": "", "goVersion": "python{}.{}".format(*sys.version_info[:2]),
        "compiler": "cpython", "platform": f"{sys.platform}/{os.uname().machine}",
    }
