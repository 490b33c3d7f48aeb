"""``ironpool down``: stop the ``ironpool up`` of a data dir and, on request, remove all it made.

What belongs to the installation is decided by what only it can have made, never by names that may
repeat across installations: domains whose ironpool metadata names this data dir's machine-runtime
folder as their owner, the libvirt networks of their nat/isolated NICs once no other domain uses
them, the DHCP servers its runtime runs on host bridges, and the storage pool whose folder is this
data dir's ``volumes/`` (and whose owner record, if any, is this installation). Anything else on the
libvirtd is left alone.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import shutil
import signal
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ironpool.allinone.datadir import DataDir, DataDirError, default_storage_pool

log = logging.getLogger(__name__)


class DownError(Exception):
    """``ironpool down`` could not do what it was asked; the message says why and what to do."""


def running_pid(dirs: DataDir) -> int | None:
    """The PID of the ``ironpool up`` holding the data dir's lock, or None if none runs."""
    if not dirs.lock_file.exists():
        return None
    with open(dirs.lock_file) as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            text = fh.read().strip()
            if not text.isdigit():
                raise DownError(f"{dirs.lock_file} is locked but names no PID; stop that process by hand") \
                    from None
            return int(text)
        fcntl.flock(fh, fcntl.LOCK_UN)
    return None


def stop_up(dirs: DataDir, timeout: float = 60.0, tick: Callable[[float], None] | None = None) -> int | None:
    """SIGTERM the running ``ironpool up`` (a clean stop, as Ctrl-C) and wait until it has let go of the
    data dir. Returns its PID, or None if nothing was running."""
    pid = running_pid(dirs)
    if pid is None:
        return None
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return pid  # ended between the lock check and the signal
    except PermissionError as exc:
        raise DownError(f"cannot signal ironpool up (PID {pid}): {exc.strerror}; run as its user") from exc
    started = time.monotonic()
    while running_pid(dirs) is not None:
        waited = time.monotonic() - started
        if waited > timeout:
            raise DownError(f"ironpool up (PID {pid}) did not stop within {timeout:.0f}s; see "
                            f"{dirs.log_file}, or stop it with: kill -9 {pid}")
        if tick is not None:
            tick(waited)
        time.sleep(0.1)
    return pid


@dataclass
class PurgePlan:
    """Everything ``ironpool down --purge`` would remove."""

    data_dir: Path
    libvirt_uri: str
    domains: list[str] = field(default_factory=list)
    networks: list[str] = field(default_factory=list)  # libvirt networks of the domains' NICs
    dhcp_bridges: list[str] = field(default_factory=list)  # host bridges its runtime serves DHCP on
    storage_pool: str | None = None
    volumes: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)  # what is left alone, and why
    client_config: Path | None = None  # the user's client config, when it points at this installation

    def lines(self) -> list[str]:
        out = [f"domain {d} ({self.libvirt_uri})" for d in self.domains]
        out += [f"libvirt network {n} (unless another domain uses it)" for n in self.networks]
        out += [f"DHCP server on bridge {b}" for b in self.dhcp_bridges]
        if self.storage_pool:
            out += [f"volume {v} (storage pool {self.storage_pool})" for v in self.volumes]
            out.append(f"storage pool {self.storage_pool}")
        out.append(f"data dir {self.data_dir} (database, token, images, logs)")
        if self.client_config is not None:
            out.append(f"client config {self.client_config} (its token and CA are this installation's)")
        return out


def own_client_config(dirs: DataDir) -> Path | None:
    """The client config (``$IRONPOOL_CONFIG`` or the default path) if it holds a token of this
    installation's token file: what ``ironpool up`` wrote for it, useless once the data dir is gone.
    A config for anything else is never touched."""
    import yaml

    from ironpool.apiserver.auth import parse_token_file
    from ironpool.client.config import default_config_path

    path = default_config_path()
    try:
        config = yaml.safe_load(path.read_text())
        tokens = parse_token_file(dirs.tokens.read_text(), str(dirs.tokens))
    except (OSError, ValueError, yaml.YAMLError):
        return None
    token = config.get("token") if isinstance(config, dict) else None
    return path if isinstance(token, str) and token in tokens else None


def plan_purge(dirs: DataDir, libvirt_uri: str | None = None) -> PurgePlan:
    """What belongs to the installation in ``dirs`` on its libvirtd (nothing is changed)."""
    import libvirt

    from ironpool.runtime.machine.bridge_dhcp import BridgeDhcp
    from ironpool.runtime.machine.domain_xml import parse_metadata
    from ironpool.runtime.machine.model import DOMAIN_PREFIX, METADATA_NS
    from ironpool.runtime.volume.owner import read_owner
    from ironpool.runtime.volume.sidecar import META_DIR_NAME

    record = dirs.read_installation()
    uri = libvirt_uri or record.get("libvirtURI") or "qemu:///system"
    plan = PurgePlan(dirs.root, uri)
    try:
        conn = libvirt.open(uri)
    except libvirt.libvirtError as exc:
        raise DownError(f"cannot connect to libvirt at {uri}: {exc.get_error_message()}") from exc
    try:
        owner_dir = str(dirs.machine_state.absolute())
        for dom in conn.listAllDomains(0):
            if not dom.name().startswith(DOMAIN_PREFIX):
                continue
            try:
                rec = parse_metadata(dom.metadata(libvirt.VIR_DOMAIN_METADATA_ELEMENT, METADATA_NS, 0))
            except (libvirt.libvirtError, ValueError, TypeError, KeyError):
                continue  # not ironpool's, or vanished meanwhile
            if rec.owner == owner_dir:
                plan.domains.append(dom.name())
                plan.networks += [n.network for n in rec.nics
                                  if n.mode in ("nat", "isolated") and n.network not in plan.networks]
        folder = str(dirs.volumes.absolute())
        for pool in conn.listAllStoragePools(0):
            with contextlib.suppress(libvirt.libvirtError):
                if ET.fromstring(pool.XMLDesc(0)).findtext("target/path") != folder:
                    continue
                owner = read_owner(dirs.volumes / META_DIR_NAME)
                if owner is not None and owner != dirs.owner:
                    plan.notes.append(f"storage pool {pool.name()} is recorded for {owner}; left alone")
                    continue
                plan.storage_pool = pool.name()
                if pool.isActive():
                    pool.refresh(0)
                    # The runtime's metadata folder (sidecars) shows up as a volume too; it goes with
                    # the data dir.
                    plan.volumes = sorted(v for v in pool.listVolumes() if v != META_DIR_NAME)
        if plan.storage_pool is None:
            expected = record.get("storagePool") or default_storage_pool(dirs.root)
            plan.notes.append(f"no storage pool serves {folder} (expected {expected})")
    finally:
        conn.close()
    plan.domains.sort()
    plan.networks.sort()
    plan.dhcp_bridges = BridgeDhcp(dirs.machine_state).bridges()
    plan.client_config = own_client_config(dirs)
    return plan


def purge(plan: PurgePlan, say: Callable[[str], None]) -> list[str]:
    """Remove what ``plan`` lists, each step on its own; returns the problems (empty: all removed)."""
    import libvirt

    from ironpool.runtime.machine.bridge_dhcp import BridgeDhcp
    from ironpool.runtime.machine.host_networks import network_in_use, remove_network

    problems: list[str] = []
    conn = libvirt.open(plan.libvirt_uri)
    try:
        for name in plan.domains:
            try:
                dom = conn.lookupByName(name)
                if dom.isActive():
                    dom.destroy()
                dom.undefineFlags(libvirt.VIR_DOMAIN_UNDEFINE_NVRAM
                                  | libvirt.VIR_DOMAIN_UNDEFINE_MANAGED_SAVE
                                  | libvirt.VIR_DOMAIN_UNDEFINE_SNAPSHOTS_METADATA)
                say(f"removed domain {name}")
            except libvirt.libvirtError as exc:
                if exc.get_error_code() != libvirt.VIR_ERR_NO_DOMAIN:
                    problems.append(f"domain {name}: {exc.get_error_message()}")
        for name in plan.networks:
            try:
                if network_in_use(conn, name):
                    say(f"kept libvirt network {name}: another domain uses it")
                    continue
                remove_network(conn.networkLookupByName(name))
                say(f"removed libvirt network {name}")
            except libvirt.libvirtError as exc:
                if exc.get_error_code() != libvirt.VIR_ERR_NO_NETWORK:
                    problems.append(f"libvirt network {name}: {exc.get_error_message()}")
        dhcp = BridgeDhcp(DataDir(plan.data_dir).machine_state)
        for bridge in plan.dhcp_bridges:
            if dhcp.stop(bridge):
                say(f"stopped the DHCP server on bridge {bridge}")
        if plan.storage_pool:
            try:
                pool = conn.storagePoolLookupByName(plan.storage_pool)
                if pool.isActive():
                    pool.refresh(0)
                    for vol in pool.listAllVolumes(0):
                        if vol.name() in plan.volumes:
                            vol.delete(0)
                            say(f"removed volume {vol.name()}")
                    pool.destroy()
                pool.undefine()
                say(f"removed storage pool {plan.storage_pool}")
            except libvirt.libvirtError as exc:
                problems.append(f"storage pool {plan.storage_pool}: {exc.get_error_message()}")
    finally:
        conn.close()
    if problems:
        return problems  # keep the data dir: it says what the leftovers were
    try:
        shutil.rmtree(plan.data_dir)
        say(f"removed data dir {plan.data_dir}")
    except OSError as exc:
        problems.append(f"data dir {plan.data_dir}: {exc.strerror}")
    if plan.client_config is not None:
        try:
            plan.client_config.unlink(missing_ok=True)
            say(f"removed client config {plan.client_config}")
        except OSError as exc:
            problems.append(f"client config {plan.client_config}: {exc.strerror}")
    return problems


def open_data_dir(path: Path) -> DataDir:
    """The data dir of an installation, refusing folders ``ironpool up`` never used."""
    dirs = DataDir(path.absolute())
    if not dirs.root.is_dir():
        raise DataDirError(f"--data-dir {dirs.root}: no such directory")
    if not (dirs.db.exists() or dirs.lock_file.exists() or dirs.installation_file.exists()):
        raise DataDirError(f"--data-dir {dirs.root}: not an ironpool data dir (no ironpool.db, up.lock "
                           "or installation.json)")
    return dirs
