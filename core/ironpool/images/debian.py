"""The Debian guests (12 and 13): what goes into its root file system, made with ``mmdebstrap``.

A minimal Debian from Debian's package mirror with what a platform team configures a machine with:
the cloud kernel, systemd, OpenSSH, Python (for Ansible), cloud-init and the QEMU guest agent.
cloud-init reads only the NoCloud seed the runtime attaches (no probing of cloud metadata services,
which would wait for timeouts) and renders the seed's static network config for systemd-networkd, so
a guest needs neither DHCP nor the internet. Everything that would reach out on its own (apt's
daily timers) is masked; host keys and the machine id are made on each guest's first boot.
"""

from __future__ import annotations

import os
import shlex
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from .tools import ImageBuildError, require_tools, run

DEFAULT_MIRROR = "http://deb.debian.org/debian"
EATMYDATA_HOOKS = Path("/usr/share/mmdebstrap/hooks/eatmydata")

# Kept short: every package is download, unpack and configure time, and disk in every guest.
PACKAGES = (
    "linux-image-cloud-amd64", "systemd", "systemd-sysv", "udev", "dbus", "zstd",
    "openssh-server", "python3", "cloud-init", "cloud-guest-utils", "qemu-guest-agent",
    "e2fsprogs", "sudo", "netbase",
)
# Documentation and translations nobody reads on a server, removed after the install (dpkg's
# path-exclude would do it too, but mmdebstrap then matches every file of the essential packages
# against the patterns itself, which costs half a minute).
DROPPED_TREES = ("usr/share/man", "usr/share/info", "usr/share/locale")
DROPPED_DOCS = "usr/share/doc"  # all but each package's copyright

# The initramfs holds only what mounts the root disk (the cloud kernel builds virtio as modules),
# zstd-compressed: smaller, and quicker to unpack on an emulated CPU.
INITRAMFS_CONF = "MODULES=list\nCOMPRESS=zstd\n"
INITRAMFS_HOOK = """\
#!/bin/sh
[ "$1" = prereqs ] && exit 0
. /usr/share/initramfs-tools/hook-functions
manual_add_modules virtio_pci virtio_blk
"""

# Debian's module lists without the modules for other systems (snap, byobu, fan, landscape, lxd, IBM's
# RMC, RightScale, EC2) and without grub-dpkg: GRUB is written into the image when it is built and is
# not a package in the guest, and grub-dpkg alone took 4 s of an emulated boot.
CONFIG_MODULES = ("ssh-import-id", "keyboard", "locale", "set-passwords", "apt-pipelining", "apt-configure",
                  "ntp", "timezone", "runcmd")
FINAL_MODULES = ("package-update-upgrade-install", "write-files-deferred", "puppet", "chef", "mcollective",
                 "salt-minion", "scripts-vendor", "scripts-per-once", "scripts-per-boot",
                 "scripts-per-instance", "scripts-user", "ssh-authkey-fingerprints", "keys-to-console",
                 "install-hotplug", "phone-home", "final-message", "power-state-change")
CLOUD_CFG = """\
# ironpool: the runtime hands each guest a NoCloud seed (a disk labelled cidata); look nowhere else.
datasource_list: [NoCloud, None]
system_info:
  network:
    renderers: [networkd]
# Host keys are made on first boot; RSA keys cost seconds on an emulated CPU.
ssh_genkeytypes: [ed25519, ecdsa]
manage_etc_hosts: true
# The guest has no locales generated beyond C.UTF-8; update-locale would fail.
locale: false
"""


def cloud_cfg(config_stage: bool) -> str:
    """cloud-init's configuration; without ``config_stage`` the config stage's modules run first in
    the final stage, whose process then does the work of both."""
    if config_stage:
        stages = {"cloud_config_modules": CONFIG_MODULES, "cloud_final_modules": FINAL_MODULES}
    else:
        stages = {"cloud_config_modules": (), "cloud_final_modules": CONFIG_MODULES + FINAL_MODULES}
    return CLOUD_CFG + "".join(f"{key}: [{', '.join(modules)}]\n" for key, modules in stages.items())


# Kernel modules udev would load for devices a guest has but never uses: the chipset's IDE controller
# (libata and the SCSI layer come with it; every disk is virtio), KVM (nested virtualisation is not
# offered), the PS/2 raw port. Each costs a second or more on an emulated CPU; `modprobe NAME` still
# loads any of them on purpose.
MODPROBE_BLACKLIST = "".join(f"blacklist {m}\n" for m in (
    "ata_piix", "ata_generic", "pata_acpi", "kvm", "kvm_amd", "kvm_intel", "serio_raw"))
# networkd-wait-online waits for every link by default; one configured link is online enough.
WAIT_ONLINE_DROPIN = (
    "[Service]\nExecStart=\nExecStart=/lib/systemd/systemd-networkd-wait-online --any --timeout=20\n"
)
# An emulated CPU on a busy host can be ten times slower than the machine it emulates: systemd's
# default timeouts (90 s for a device, 3 minutes for journald's watchdog) then fail a boot that
# would have finished.
SYSTEMD_TIMEOUTS = "[Manager]\nDefaultTimeoutStartSec=10min\nDefaultDeviceTimeoutSec=10min\n"
JOURNALD_DROPIN = "[Service]\nWatchdogSec=0\n"
MASKED_UNITS = (
    "apt-daily.timer", "apt-daily-upgrade.timer", "dpkg-db-backup.timer", "e2scrub_all.timer",
    "fstrim.timer", "systemd-firstboot.service", "e2scrub_reap.service",
    # Early-boot units for what a BIOS guest without device mapper, binfmt users or tracing has no use
    # for: each is a process (and a module) on the way to the login prompt.
    "modprobe@drm.service", "modprobe@efi_pstore.service", "systemd-pstore.service",
    "modprobe@dm_mod.service", "systemd-binfmt.service", "proc-sys-fs-binfmt_misc.automount",
    "proc-sys-fs-binfmt_misc.mount", "sys-kernel-debug.mount", "sys-kernel-tracing.mount",
)
# systemd runs every generator before it loads a unit; these act on what the guest does not have (GPT
# partitions, hibernation images, dm-verity and dm-integrity tables, offline updates, systemd.run= on
# the kernel command line), and each costs about half a second of an emulated CPU.
MASKED_GENERATORS = (
    "systemd-gpt-auto-generator", "systemd-hibernate-resume-generator",
    "systemd-integritysetup-generator", "systemd-veritysetup-generator",
    "systemd-system-update-generator", "systemd-run-generator",
)

# ``no_timer_check``: early in boot the kernel busy-waits a few timer ticks and panics ("IO-APIC +
# timer doesn't work!") if the PIT's interrupts did not arrive. An emulated vCPU on a crowded host can
# spin through that wait before QEMU's main loop gets a core to raise them: one guest in 65 did so
# with ten booting on two cores. Fedora's and RHEL's cloud images skip the check for the same reason.
CMDLINE = "ro console=ttyS0 quiet no_timer_check"


@dataclass(frozen=True)
class Recipe:
    """Everything that decides the image's content; its :meth:`describe` keys the cache."""

    name: str
    suite: str
    mirror: str = DEFAULT_MIRROR
    packages: tuple[str, ...] = PACKAGES
    disk_size: int = 2 * 1024**3
    cmdline: str = CMDLINE
    files: dict[str, str] = field(default_factory=dict)
    masked_units: tuple[str, ...] = MASKED_UNITS
    masked_generators: tuple[str, ...] = MASKED_GENERATORS

    def describe(self) -> str:
        lines = [f"name={self.name}", f"suite={self.suite}", f"mirror={self.mirror}",
                 f"packages={','.join(self.packages)}", f"disk_size={self.disk_size}",
                 f"cmdline={self.cmdline}", f"dropped={DROPPED_TREES}",
                 f"initramfs={INITRAMFS_CONF!r}{INITRAMFS_HOOK!r}", f"masked={self.masked_units}",
                 f"masked_generators={self.masked_generators}"]
        lines += [f"file {path}={content!r}" for path, content in sorted(self.files.items())]
        return "\n".join(lines)


def guest_files(config_stage: bool = True) -> dict[str, str]:
    """Configuration files written into the root file system, by path."""
    return {
        "etc/cloud/cloud.cfg.d/90-ironpool.cfg": cloud_cfg(config_stage),
        "etc/systemd/system/systemd-networkd-wait-online.service.d/any.conf": WAIT_ONLINE_DROPIN,
        "etc/systemd/system.conf.d/ironpool-timeouts.conf": SYSTEMD_TIMEOUTS,
        "etc/systemd/system/systemd-journald.service.d/no-watchdog.conf": JOURNALD_DROPIN,
        "etc/modprobe.d/ironpool-guest.conf": MODPROBE_BLACKLIST,
        "etc/hostname": "localhost\n",
        "etc/resolv.conf": "# no name servers: guests get what they need from the host\n",
    }


RECIPES: dict[str, Recipe] = {
    # bookworm's cloud-init (22.4) runs each stage in a process of its own. Starting one (Python,
    # cloud-init's imports, its configuration read and merged) took about 3 s of an emulated CPU, the
    # config stage's modules about 1 s: they run at the start of the final stage instead, and a boot
    # needs about 7 s less CPU (35 s instead of 42 s in QEMU, one guest to the end of cloud-init).
    "debian-12": Recipe(name="debian-12", suite="bookworm", files=guest_files(config_stage=False),
                        masked_units=(*MASKED_UNITS, "cloud-config.service")),
    # trixie's cloud-init (25.1) runs its stages in one process (cloud-init-main) instead of four.
    # No package pulls in iproute2 there, and cloud-init renders for networkd only where `ip` is
    # (without it the guest gets no address); systemd's generator of SSH over AF_VSOCK fails in a
    # guest without a vsock device.
    "debian-13": Recipe(name="debian-13", suite="trixie", files=guest_files(),
                        packages=(*PACKAGES, "iproute2"),
                        masked_generators=(*MASKED_GENERATORS, "systemd-ssh-generator")),
}


def mmdebstrap_command(recipe: Recipe, root: Path, deb_cache: Path) -> list[str]:
    """mmdebstrap into ``root``: downloaded packages are kept in ``deb_cache`` for the next build."""
    cmd = ["mmdebstrap", "--variant=apt", "--mode=root", "--skip=essential/unlink",
           f"--include={','.join(recipe.packages)}"]
    if EATMYDATA_HOOKS.is_dir() and shutil.which("eatmydata"):
        # dpkg syncs every file it writes; a root file system that is thrown away on failure need not.
        cmd.append(f"--hook-dir={EATMYDATA_HOOKS}")
    # Before the kernel is installed, so its first initramfs is already the small one.
    essential = (
        'mkdir -p "$1/etc/initramfs-tools/conf.d" "$1/etc/initramfs-tools/hooks" && '
        f"printf %s {shlex.quote(INITRAMFS_CONF)} > \"$1/etc/initramfs-tools/conf.d/ironpool.conf\" && "
        f"printf %s {shlex.quote(INITRAMFS_HOOK)} > \"$1/etc/initramfs-tools/hooks/ironpool-virtio\" && "
        'chmod 0755 "$1/etc/initramfs-tools/hooks/ironpool-virtio"'
    )
    # Packages downloaded before are not downloaded again; only new ones are copied back.
    cache = shlex.quote(str(deb_cache))
    sync_in = (f'mkdir -p "$1/var/cache/apt/archives" && find {cache} -maxdepth 1 -name "*.deb" '
               '-exec cp -t "$1/var/cache/apt/archives" {} +')
    sync_out = f'find "$1/var/cache/apt/archives" -maxdepth 1 -name "*.deb" -exec cp -n -t {cache} {{}} +'
    # Every package with initramfs hooks (udev, zstd, cloud-init's) would remake the initramfs; it is
    # made once, after the last package, while update-initramfs is diverted to true.
    divert = ('chroot "$1" dpkg-divert --quiet --local --rename --add /usr/sbin/update-initramfs && '
              'ln -s /bin/true "$1/usr/sbin/update-initramfs"')
    undivert = ('rm "$1/usr/sbin/update-initramfs" && '
                'chroot "$1" dpkg-divert --quiet --local --rename --remove /usr/sbin/update-initramfs && '
                'chroot "$1" update-initramfs -c -k all')
    cmd += [
        "--verbose",
        f"--setup-hook={sync_in}",
        f"--essential-hook={essential}",
        f"--essential-hook={divert}",
        f"--customize-hook={sync_out}",
        f"--customize-hook={undivert}",
        recipe.suite, str(root), recipe.mirror,
    ]
    return cmd


def make_root(recipe: Recipe, root: Path, deb_cache: Path, log: Callable[[str], None]) -> None:
    """The root file system of ``recipe`` in the (absent) folder ``root``."""
    require_tools({"mmdebstrap": "mmdebstrap"})
    deb_cache.mkdir(parents=True, exist_ok=True)
    run(mmdebstrap_command(recipe, root, deb_cache), "mmdebstrap", log, timeout=1800)
    configure(recipe, root)


def configure(recipe: Recipe, root: Path) -> None:
    """What makes every guest its own and quiet: config files, masked units, no host keys."""
    for rel, content in recipe.files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
    systemd = root / "etc/systemd/system"
    for unit in recipe.masked_units:
        link = systemd / unit
        link.unlink(missing_ok=True)
        link.symlink_to("/dev/null")
    generators = root / "etc/systemd/system-generators"
    generators.mkdir(parents=True, exist_ok=True)
    for generator in recipe.masked_generators:
        link = generators / generator
        link.unlink(missing_ok=True)
        link.symlink_to("/dev/null")
    wants = systemd / "multi-user.target.wants"
    wants.mkdir(parents=True, exist_ok=True)
    link = wants / "systemd-networkd.service"
    link.unlink(missing_ok=True)
    link.symlink_to("/lib/systemd/system/systemd-networkd.service")
    for tree in DROPPED_TREES:
        shutil.rmtree(root / tree, ignore_errors=True)
    for doc in (root / DROPPED_DOCS).glob("*/*"):
        if doc.name == "copyright":
            continue
        if doc.is_dir() and not doc.is_symlink():
            shutil.rmtree(doc)
        else:
            doc.unlink()
    for key in (root / "etc/ssh").glob("ssh_host_*"):
        key.unlink()
    # An empty machine id: systemd makes one on first boot (a copy of the image is a new machine).
    (root / "etc/machine-id").write_text("")
    dbus_id = root / "var/lib/dbus/machine-id"
    if dbus_id.exists() or dbus_id.is_symlink():
        dbus_id.unlink()
    for stale in ("vmlinuz.old", "initrd.img.old"):
        p = root / stale
        if p.is_symlink():
            p.unlink()


def kernel_version(root: Path) -> str:
    """The version of the kernel the root file system boots (from its /vmlinuz link)."""
    target = os.readlink(root / "vmlinuz")
    name = Path(target).name
    if not name.startswith("vmlinuz-"):
        raise ImageBuildError(f"{root}/vmlinuz points at {target}, not a kernel")
    if not (root / "boot" / f"initrd.img-{name.removeprefix('vmlinuz-')}").is_file():
        raise ImageBuildError(f"no initramfs for {name} in {root}/boot")
    return name.removeprefix("vmlinuz-")

