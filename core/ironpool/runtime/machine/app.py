"""Wiring of the machine runtime: configuration in, a started core plus console and gRPC server out.

Used by ``ironpool libvirt-runtime`` and by anything that embeds the runtime in its own process
(e.g. an all-in-one ``ironpool up``): ``core, console = build(cfg)`` then
``await serve(core, cfg.address, console)``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from ironpool.runtime import libvirt_util
from ironpool.runtime.images import ImageCatalog

from .classes import load_classes
from .console_server import ConsoleServer
from .core import MachineRuntimeCore
from .domain_xml import DomainOptions
from .events import EventRing

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class MachineRuntimeConfig:
    """Everything ``ironpool libvirt-runtime`` takes as flags."""

    classes_file: Path
    images_dir: Path = Path("/var/lib/ironpool/images")
    libvirt_uri: str = "qemu:///system"
    address: str = "unix:///var/run/iri-machineprovider.sock"
    state_dir: Path = Path("/var/lib/ironpool/machine-runtime")
    domain_type: str = "auto"
    machine_type: str = "pc"
    shutdown_timeout: float = 10.0
    streaming_host: str = "127.0.0.1"
    streaming_port: int = 20251
    base_url: str = ""
    event_max: int = 100
    event_ttl: float = 300.0


def build(cfg: MachineRuntimeConfig) -> tuple[MachineRuntimeCore, ConsoleServer]:
    """Load classes, connect to libvirt, rebuild state from it; raises ClassFileError/ConnectionError."""
    classes = load_classes(cfg.classes_file)
    conn = libvirt_util.open_connection(cfg.libvirt_uri)
    dtype = libvirt_util.choose_domain_type(conn, cfg.domain_type)
    log.info("domain type %s, %d machine classes", dtype, len(classes))
    core = MachineRuntimeCore(
        conn,
        classes,
        ImageCatalog(cfg.images_dir),
        cfg.state_dir,
        options=DomainOptions(domain_type=dtype, machine_type=cfg.machine_type),
        shutdown_timeout=cfg.shutdown_timeout,
        events=EventRing(cfg.event_max, cfg.event_ttl),
        reconnect=lambda: libvirt_util.open_connection(cfg.libvirt_uri),
    )
    core.start()
    console = ConsoleServer(core, cfg.streaming_host, cfg.streaming_port, cfg.base_url)
    return core, console
