"""A Machine's ``guestConfig.hostname`` for an Ignition guest: an ``/etc/hostname`` file in its config.

Ignition has no hostname field; a hostname is the file ``/etc/hostname`` (what Fedora CoreOS and
Flatcar document). When the Machine names a hostname and its config is Ignition 3 JSON that writes
no ``/etc/hostname`` itself, the runtime adds that file to ``storage.files``; anything else (a config
that sets it, an Ignition 2 config, data that is not JSON) reaches the guest unchanged.
"""

from __future__ import annotations

import json
import urllib.parse
from typing import Any

HOSTNAME_PATH = "/etc/hostname"


def with_hostname(data: bytes, hostname: str) -> bytes:
    """``data`` with ``/etc/hostname`` set to ``hostname`` where that is safe (see the module)."""
    if not hostname:
        return data
    try:
        config: Any = json.loads(data)
    except ValueError:
        return data
    meta = config.get("ignition") if isinstance(config, dict) else None
    if not isinstance(meta, dict) or not str(meta.get("version", "")).startswith("3."):
        return data
    storage = config.setdefault("storage", {})
    if not isinstance(storage, dict):
        return data
    files = storage.setdefault("files", [])
    if not isinstance(files, list) or any(isinstance(f, dict) and f.get("path") == HOSTNAME_PATH
                                          for f in files):
        return data
    files.append({"path": HOSTNAME_PATH, "mode": 0o644, "overwrite": True,
                  "contents": {"source": "data:," + urllib.parse.quote(hostname + "\n")}})
    return json.dumps(config).encode()
