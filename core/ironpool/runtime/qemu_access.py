"""Whether QEMU can reach the folders a runtime hands it files from.

On a distribution's defaults libvirt runs QEMU as an unprivileged user (Debian: ``libvirt-qemu``)
and, with dynamic ownership, gives that user each disk, kernel, initrd and fw_cfg file when a domain
starts (and takes it back when it stops), but never the folders above them. A runtime whose state
sits below a folder that user cannot search would fail only when a Machine starts, with QEMU's
"Permission denied"; :func:`check_reachable` at start-up turns that into one error naming the folder
and the fix. Nothing here changes a folder the runtime did not make.
"""

from __future__ import annotations

import grp
import logging
import os
import pwd
import stat
import subprocess
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

import libvirt

log = logging.getLogger(__name__)


class QemuAccessError(Exception):
    """QEMU's user cannot reach a folder the runtime needs it to; the message says which and how to fix it."""


@dataclass(frozen=True)
class QemuUser:
    """The user and group libvirt starts QEMU processes as, with the user's other groups."""

    uid: int
    gid: int
    groups: frozenset[int]
    name: str

    def __str__(self) -> str:
        return f"{self.name} (uid {self.uid}, gid {self.gid})"


def qemu_user(caps_xml: str, domain_type: str) -> QemuUser | None:
    """The user of libvirt's DAC security model for ``domain_type`` domains (its base label in the
    host capabilities), or None when QEMU runs as root or libvirt does not say."""
    try:
        caps = ET.fromstring(caps_xml)
    except ET.ParseError:
        return None
    for model in caps.iter("secmodel"):
        if model.findtext("model") != "dac":
            continue
        for label in model.iter("baselabel"):
            if label.get("type") == domain_type and label.text:
                return _parse_label(label.text)
    return None


def _parse_label(text: str) -> QemuUser | None:
    """``+995:+995`` (numeric) or ``libvirt-qemu:kvm`` (names) as a user; None for root."""
    user_part, _, group_part = text.strip().partition(":")
    try:
        uid = int(user_part[1:]) if user_part.startswith("+") else pwd.getpwnam(user_part).pw_uid
        gid = int(group_part[1:]) if group_part.startswith("+") else grp.getgrnam(group_part).gr_gid
    except (KeyError, ValueError):
        return None
    if uid == 0:
        return None
    try:
        name = pwd.getpwuid(uid).pw_name
        groups = frozenset(os.getgrouplist(name, gid))
    except KeyError:
        name, groups = str(uid), frozenset({gid})
    return QemuUser(uid, gid, groups, name)


def _searchable(st: os.stat_result, user: QemuUser) -> bool:
    mode = st.st_mode
    if st.st_uid == user.uid:
        return bool(mode & stat.S_IXUSR)
    if st.st_gid in user.groups:
        return bool(mode & stat.S_IXGRP)
    return bool(mode & stat.S_IXOTH)


def _blocking_by_mode(path: Path, user: QemuUser) -> Path | None:
    """The first folder from / down to ``path`` whose mode bits deny ``user`` search permission."""
    for directory in (*reversed(path.parents), path):
        try:
            if not _searchable(directory.stat(), user):
                return directory
        except FileNotFoundError:
            return None  # made later by the runtime, with a mode that lets QEMU through
    return None


def _refused_as(path: Path, user: QemuUser) -> str:
    """Ask the kernel (ACLs included): enter ``path`` as ``user`` in a child process (needs root);
    "" when it could, else what the child said.

    The child takes the user's identity through ``setpriv`` rather than subprocess's ``user=``:
    Python forks for ``user=`` and so runs gRPC's fork handlers in a process whose gRPC threads are
    busy, and the child then died on gRPC's poller ("epoll_wait error: Bad file descriptor") before
    it could try the folder. Without ``user=`` Python starts the child by vfork, which runs no fork
    handlers."""
    groups = ",".join(str(g) for g in sorted(user.groups))
    argv = ["setpriv", f"--reuid={user.uid}", f"--regid={user.gid}",
            f"--groups={groups}" if groups else "--clear-groups",
            "--", "/bin/sh", "-c", 'cd -- "$1"', "sh", str(path)]  # fmt: skip
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=30, check=False)
    return "" if proc.returncode == 0 else (proc.stderr.strip() or f"exit status {proc.returncode}")


def _existing(path: Path) -> Path:
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def unreachable(path: Path, user: QemuUser) -> tuple[Path, str] | None:
    """The folder on the way to ``path`` (or its nearest existing parent) that ``user`` cannot
    search, with what the kernel said where the mode bits would let it through ("" where they do
    not); None when it can reach it."""
    path = _existing(path.resolve())
    blocked = _blocking_by_mode(path, user)
    if os.geteuid() != 0:
        return None if blocked is None else (blocked, "")
    refused = _refused_as(path, user)
    if not refused:
        return None  # an ACL may let it through where the mode bits do not
    return (blocked, "") if blocked is not None else (path, refused)


def check_reachable(conn: libvirt.virConnect, domain_type: str, what: dict[str, Path]) -> QemuUser | None:
    """Raise :class:`QemuAccessError` when QEMU's user cannot reach one of ``what`` (a description
    of each folder: its path); return that user (None when QEMU runs as root)."""
    user = qemu_user(conn.getCapabilities(), domain_type)
    if user is None:
        return None
    for purpose, path in what.items():
        found = unreachable(path, user)
        if found is None:
            continue
        blocked, refused = found
        if refused:
            raise QemuAccessError(f"QEMU runs as {user} and cannot reach {path} ({purpose}): its mode bits "
                                  f"let it through, but entering it as {user.name} failed: {refused}. Look "
                                  f"for an ACL that denies it (getfacl) or a mount it may not enter")
        st = blocked.stat()
        try:
            owner = pwd.getpwuid(st.st_uid).pw_name
        except KeyError:
            owner = str(st.st_uid)
        raise QemuAccessError(
            f"QEMU runs as {user} and cannot reach {path} ({purpose}): {blocked} is mode "
            f"{stat.S_IMODE(st.st_mode):04o}, owner {owner}, and does not let it search. Keep this "
            f"runtime's folders where QEMU can reach them (as under /var/lib), or let it through: "
            f"chmod o+x {blocked}  (or: setfacl -m u:{user.name}:x {blocked})"
        )
    log.info("QEMU runs as %s and reaches %s", user, ", ".join(str(p) for p in what.values()))
    return user


def make_dirs(path: Path) -> Path:
    """Create ``path`` and its missing parents so that others may search them (QEMU's user among
    them) but not list them, whatever the umask; folders that exist keep their mode."""
    missing = []
    probe = path
    while not probe.exists():
        missing.append(probe)
        probe = probe.parent
    for directory in reversed(missing):
        try:
            directory.mkdir(mode=0o711)
        except FileExistsError:
            continue  # made meanwhile by someone else: theirs to set
        os.chmod(directory, 0o711)
    return path
