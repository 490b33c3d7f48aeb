"""``/version``: what this apiserver reports itself as, in Kubernetes' ``version.Info`` form.

Clients compare the server's Kubernetes version with their own: ``kubectl version`` warns past one
minor version of skew, and clients pick API behaviour by it. So ``gitVersion`` names the Kubernetes
API level ironpool serves (:data:`KUBERNETES_VERSION`, with ironpool's release as semver build
metadata, as distributions such as k3s report ``v1.30.2+k3s1``), and ``ironpoolVersion`` names
ironpool's own release.
"""

from __future__ import annotations

import functools
import importlib.metadata
import os
import re
import sys

#: The Kubernetes API level served: the conventions of this release (streaming lists, server-side
#: apply, the authorization reviews). kubectl 1.35 to 1.37 (the release the project pins) see no skew.
KUBERNETES_VERSION = (1, 36, 0)


def ironpool_version() -> str:
    try:
        return importlib.metadata.version("ironpool")
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover - a source tree without metadata
        return "0.0.0"


@functools.cache
def server_version() -> dict[str, str]:
    """``/version`` in Kubernetes' ``version.Info`` form (see the module doc)."""
    major, minor, patch = KUBERNETES_VERSION
    own = ironpool_version()
    build = re.sub(r"[^0-9A-Za-z.-]", "-", own)  # semver build metadata (a PEP 440 "+local" has a "+")
    return {
        "major": str(major), "minor": str(minor), "gitVersion": f"v{major}.{minor}.{patch}+ironpool.{build}",
        "gitCommit": "", "gitTreeState": "", "buildDate": "",
        "goVersion": "python{}.{}".format(*sys.version_info[:2]), "compiler": "cpython",
        "platform": f"{sys.platform}/{os.uname().machine}", "ironpoolVersion": own,
    }
