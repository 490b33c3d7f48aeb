"""The data directory of ``ironpool up``: where the database, tokens, sockets, images and logs live.

A restart with the same directory resumes with the same state: the SQLite file, the admin token and
the storage-pool folder stay, and the runtimes rebuild their machines and volumes from libvirt.
An exclusive lock on ``up.lock`` keeps two ``ironpool up`` processes off one directory.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import secrets
import socket
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import IO

# sun_path is 108 bytes on Linux, including the terminating NUL.
_MAX_SOCKET_PATH = 107


class DataDirError(Exception):
    """The data directory cannot be used; the message says why and what to do."""


def default_data_dir() -> Path:
    """``/var/lib/ironpool`` for root, else ``$XDG_DATA_HOME/ironpool`` (``~/.local/share/ironpool``)."""
    if os.geteuid() == 0:
        return Path("/var/lib/ironpool")
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "ironpool"


def dns_label(value: str) -> str:
    """``value`` turned into an RFC 1123 label (lower case, ``[a-z0-9-]``, at most 63 characters)."""
    label = re.sub(r"[^a-z0-9-]+", "-", value.lower()).strip("-")[:63].strip("-")
    return label or "localhost"


def default_pool_name() -> str:
    """This host's short name as a DNS label: the pool name ``ironpool up`` announces."""
    return dns_label(socket.gethostname().split(".")[0])


def default_storage_pool(data_dir: Path) -> str:
    """The libvirt storage pool of the installation in ``data_dir``: one per data dir, never shared by
    accident (libvirt pool names are host-wide)."""
    digest = hashlib.sha256(str(data_dir.absolute()).encode()).hexdigest()[:10]
    return f"ironpool-{digest}"


@dataclass(frozen=True)
class DataDir:
    """Paths inside one data directory."""

    root: Path

    @property
    def owner(self) -> str:
        """How the installation here names itself on shared host resources (storage pools)."""
        return f"ironpool up at {socket.gethostname()}:{self.root.absolute()}"

    @property
    def db(self) -> Path:
        return self.root / "ironpool.db"

    @property
    def tokens(self) -> Path:
        return self.root / "tokens.csv"

    @property
    def pki(self) -> Path:
        """The local CA and the apiserver's serving certificate."""
        return self.root / "pki"

    @property
    def kubeconfig(self) -> Path:
        return self.root / "kubeconfig"

    @property
    def sockets(self) -> Path:
        return self.root / "sockets"

    @property
    def machine_socket(self) -> Path:
        return self.sockets / "iri-machine.sock"

    @property
    def volume_socket(self) -> Path:
        return self.sockets / "iri-volume.sock"

    @property
    def images(self) -> Path:
        return self.root / "images"

    @property
    def image_cache(self) -> Path:
        """Pulled and downloaded images (``ironpool image ls --image-cache`` shows them)."""
        return self.root / "image-cache"

    @property
    def volumes(self) -> Path:
        return self.root / "volumes"

    @property
    def machine_state(self) -> Path:
        return self.root / "machine-runtime"

    @property
    def classes(self) -> Path:
        return self.root / "classes"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def log_file(self) -> Path:
        return self.logs / "ironpool.log"

    @property
    def lock_file(self) -> Path:
        return self.root / "up.lock"

    @property
    def installation_file(self) -> Path:
        """What ``ironpool up`` made on the host (libvirt URI, storage pool), for ``ironpool down``."""
        return self.root / "installation.json"

    def write_installation(self, record: dict[str, str]) -> None:
        tmp = self.installation_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
        os.replace(tmp, self.installation_file)

    def read_installation(self) -> dict[str, str]:
        try:
            data = json.loads(self.installation_file.read_text())
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as exc:
            raise DataDirError(f"{self.installation_file}: unreadable: {exc}") from exc
        return data if isinstance(data, dict) else {}

    def prepare(self) -> None:
        """Create the folders and check that socket paths fit.

        QEMU runs as its own user and must pass through the root to the images, volumes and machine
        files below it, so the root lets others search it but not list it (0711); what is private
        sits in folders of mode 0700 (the CA, the runtimes' sockets, the logs) or in files of mode
        0600 (tokens, database, kubeconfig)."""
        try:
            self.root.mkdir(parents=True, exist_ok=True, mode=0o711)
            os.chmod(self.root, stat.S_IMODE(self.root.stat().st_mode) | stat.S_IXOTH)
            for private in (self.pki, self.sockets, self.logs):
                private.mkdir(mode=0o700, exist_ok=True)
                os.chmod(private, 0o700)
            for shared in (self.images, self.volumes, self.machine_state, self.classes):
                shared.mkdir(exist_ok=True)
            # A database made before the root was searchable, when its mode did not matter.
            for db_file in (self.db, Path(f"{self.db}-wal"), Path(f"{self.db}-shm")):
                if db_file.exists():
                    os.chmod(db_file, 0o600)
        except OSError as exc:
            raise DataDirError(f"--data-dir {self.root}: cannot create it: {exc.strerror}") from exc
        for sock in (self.machine_socket, self.volume_socket):
            if len(str(sock).encode()) > _MAX_SOCKET_PATH:
                raise DataDirError(
                    f"--data-dir {self.root}: the socket path {sock} is longer than the {_MAX_SOCKET_PATH} "
                    "bytes a unix socket allows; choose a shorter data directory"
                )


class InstanceLock:
    """An exclusive ``flock`` on the data directory, held for the life of the process.

    The kernel drops it when the process dies (also on kill -9), so a crash never leaves it stale.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._fh: IO[str] | None = None

    def acquire(self) -> None:
        fh = open(self.path, "a+")  # noqa: SIM115 - held open until release()
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.seek(0)
            holder = fh.read().strip() or "unknown"
            fh.close()
            raise DataDirError(
                f"--data-dir {self.path.parent}: another `ironpool up` (pid {holder}) is using it; "
                "stop it first or choose another --data-dir"
            ) from None
        fh.seek(0)
        fh.truncate()
        fh.write(f"{os.getpid()}\n")
        fh.flush()
        self._fh = fh

    def release(self) -> None:
        if self._fh is not None:
            fcntl.flock(self._fh, fcntl.LOCK_UN)
            self._fh.close()
            self._fh = None


ADMIN_USER = "admin"


def ensure_admin_token(path: Path) -> str:
    """The admin token of ``path``, generating the file (mode 0600) on first start.

    An existing file is kept as it is (the user may have added identities); its first
    ``system:masters`` line is the admin.
    """
    if path.exists():
        for line in path.read_text().splitlines():
            fields = [f.strip() for f in line.split(",")]
            if len(fields) >= 4 and not fields[0].startswith("#") and "system:masters" in line:
                return fields[0]
        raise DataDirError(f"{path}: no line of group \"system:masters\" found; add one or remove the file")
    token = secrets.token_urlsafe(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write("# token,user,uid,groups - generated by `ironpool up`; Kubernetes static-token format\n")
        fh.write(f'{token},{ADMIN_USER},{ADMIN_USER},"system:masters"\n')
    return token
