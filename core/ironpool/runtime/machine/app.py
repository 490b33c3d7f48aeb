"""Wiring of the machine runtime: configuration in, a started driver plus console endpoint out.

Used by ``ironpool libvirt-runtime`` and by anything that runs the runtime in its own process
(``ironpool up``, ``ironpool join``): ``driver, console = build(cfg)`` then ``await serve(driver,
cfg.address, console, stop)``.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path

from ironpool.runtime import libvirt_util
from ironpool.runtime.events import EventRing
from ironpool.runtime.images import open_resolver
from ironpool.runtime.images.cache import DEFAULT_LIMIT

from . import vcpu_slice
from .capacity import CapacityPolicy
from .classes import load_classes
from .console_server import ConsoleServer
from .domain_xml import DomainOptions
from .driver import MachineDriver
from .firmware import OvmfPaths
from .host import Host
from .nics import NetworkSettings

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class MachineRuntimeConfig:
    """Everything ``ironpool libvirt-runtime`` takes as flags."""

    classes_file: Path
    images_dir: Path = Path("/var/lib/ironpool/images")
    image_cache: Path = Path("/var/lib/ironpool/image-cache")
    image_cache_size: int = DEFAULT_LIMIT
    insecure_registries: tuple[str, ...] = ()
    file_images: tuple[Path, ...] = ()
    image_pull_wait: float = 10.0
    libvirt_uri: str = "qemu:///system"
    address: str = "unix:///var/run/iri-machineprovider.sock"
    state_dir: Path = Path("/var/lib/ironpool/machine-runtime")
    domain_type: str = "auto"
    machine_type: str = "pc"
    ovmf: OvmfPaths = field(default_factory=OvmfPaths)
    shutdown_timeout: float = 10.0
    vcpu_slice_ns: int = vcpu_slice.DEFAULT_NS  # 0: the kernel's (see vcpu_slice)
    max_booting: int | None = None  # guests booting at once (see boot_admission); None: the host's CPUs
    streaming_host: str = "127.0.0.1"
    streaming_port: int = 20251
    base_url: str = ""
    event_max: int = 100
    event_ttl: float = 300.0
    networks: NetworkSettings = field(default_factory=NetworkSettings)
    capacity: CapacityPolicy = field(default_factory=CapacityPolicy)


def build(cfg: MachineRuntimeConfig) -> tuple[MachineDriver, ConsoleServer]:
    """Load classes, connect to libvirt, rebuild state from it; raises ClassFileError/ConnectionError."""
    classes = load_classes(cfg.classes_file)
    host = Host(cfg.libvirt_uri)
    dtype = libvirt_util.choose_domain_type(host.conn, cfg.domain_type)
    log.info("domain type %s, %d machine classes", dtype, len(classes))
    driver = MachineDriver(
        host,
        classes,
        open_resolver(cfg.images_dir, cfg.image_cache, cfg.image_cache_size, cfg.insecure_registries,
                      cfg.file_images, cfg.image_pull_wait),
        cfg.state_dir,
        options=DomainOptions(domain_type=dtype, machine_type=cfg.machine_type, ovmf=cfg.ovmf,
                              vcpu_slice_ns=cfg.vcpu_slice_ns),
        shutdown_timeout=cfg.shutdown_timeout,
        events=EventRing(cfg.event_max, cfg.event_ttl),
        networks=cfg.networks,
        capacity=cfg.capacity,
        max_booting=cfg.max_booting,
    )
    driver.start()
    console = ConsoleServer(driver, cfg.streaming_host, cfg.streaming_port, cfg.base_url)
    return driver, console
