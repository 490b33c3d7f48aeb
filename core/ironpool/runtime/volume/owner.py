"""Which installation a storage pool belongs to: a marker file in the pool's metadata folder.

libvirt storage pools are host-wide and found by name, so two installations on one libvirtd that
pick the same name would share volumes and sidecars, and each would take the other's volumes for
its own. The first runtime to serve a pool writes its owner into ``<pool>/.ironpool-meta/OWNER``;
a runtime of another owner refuses the pool unless told to share it.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
import time
from pathlib import Path

from .pool import PoolConfigError

log = logging.getLogger(__name__)

OWNER_FILE = "OWNER"


def read_owner(meta_dir: Path) -> str | None:
    """The recorded owner of the pool whose metadata folder is ``meta_dir`` (None: unclaimed)."""
    try:
        data = json.loads((meta_dir / OWNER_FILE).read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise PoolConfigError(f"{meta_dir / OWNER_FILE}: unreadable owner record: {exc}") from exc
    owner = data.get("owner") if isinstance(data, dict) else None
    return owner if isinstance(owner, str) and owner else None


def claim_pool(meta_dir: Path, pool_name: str, owner: str, share: bool) -> None:
    """Record ``owner`` on an unclaimed pool; refuse a pool owned by someone else unless ``share``."""
    current = read_owner(meta_dir)
    if current == owner:
        return
    if current is not None:
        if not share:
            raise PoolConfigError(
                f"storage pool {pool_name!r} belongs to another installation ({current}); using it would "
                f"mix its volumes with ours. Choose another --storage-pool, or pass --share-storage-pool "
                "to use it anyway"
            )
        log.warning("storage pool %s belongs to %s; sharing it as asked (--share-storage-pool)",
                    pool_name, current)
        return
    payload = json.dumps({"owner": owner, "claimedAt": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())})
    fd, tmp = tempfile.mkstemp(dir=meta_dir, prefix=".tmp-owner-")
    with os.fdopen(fd, "w") as fh:
        fh.write(payload + "\n")
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, meta_dir / OWNER_FILE)
    log.info("storage pool %s now belongs to %s", pool_name, owner)
