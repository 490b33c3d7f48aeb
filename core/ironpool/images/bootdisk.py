"""A bootable BIOS disk from a root file system folder, made without mounting anything.

The disk has an MBR partition table (``sfdisk``) with one bootable Linux partition from 1 MiB to the
end, an ext4 file system written straight into it from the folder (``mkfs.ext4 -d`` at the
partition's offset), and GRUB in the MBR and the gap before the partition: ``grub-mkimage`` makes a
core image holding the modules that read the partition and an embedded configuration that boots the
root file system's ``/vmlinuz`` and ``/initrd.img``; GRUB's ``boot.img`` goes into the boot code of
the MBR (its first 440 bytes, before the partition table) and the core image right after it, where
both expect each other. No loop device, no root-only mount, no bootloader installer that probes the
host. The raw disk becomes a sparse qcow2 (``qemu-img convert``).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from pathlib import Path

from .tools import require_tools, run

GRUB_DIR = Path("/usr/lib/grub/i386-pc")
PARTITION_START = 1024**2  # 1 MiB: the gap before it holds GRUB's core image
SECTOR = 512
MBR_BOOT_CODE = 440  # bytes of boot code before the disk signature and partition table
# Enough to find the partition, read ext4 and load Linux; the embedded configuration needs no more.
GRUB_MODULES = ("biosdisk", "part_msdos", "ext2", "linux", "boot", "search_fs_uuid", "normal")
TOOLS = {"sfdisk": "fdisk", "mkfs.ext4": "e2fsprogs", "grub-mkimage": "grub-pc-bin",
         "qemu-img": "qemu-utils"}


def grub_config(fs_uuid: str, cmdline: str) -> str:
    return (
        f"search --no-floppy --fs-uuid --set=root {fs_uuid}\n"
        f"linux /vmlinuz root=UUID={fs_uuid} {cmdline}\n"
        "initrd /initrd.img\n"
        "boot\n"
    )


def make_bootdisk(root: Path, out: Path, size: int, cmdline: str, work: Path,
                  log: Callable[[str], None]) -> None:
    """Write a qcow2 of ``size`` bytes to ``out`` that boots ``root`` with ``cmdline``."""
    require_tools(TOOLS)
    if size % PARTITION_START:
        raise ValueError(f"disk size {size} is not a whole number of MiB")
    fs_uuid = str(uuid.uuid4())
    (root / "etc/fstab").write_text(f"UUID={fs_uuid} / ext4 errors=remount-ro 0 1\n")
    raw = work / "disk.raw"
    with open(raw, "wb") as f:
        f.truncate(size)
    run(["sfdisk", "--quiet", "--no-reread", "--no-tell-kernel", str(raw)], "sfdisk", log,
        stdin=f"label: dos\nstart={PARTITION_START // SECTOR}, type=83, bootable\n")
    fs_kib = (size - PARTITION_START) // 1024
    run(["mkfs.ext4", "-q", "-F", "-L", "root", "-U", fs_uuid, "-E", f"offset={PARTITION_START}",
         "-d", str(root), str(raw), f"{fs_kib}k"], "mkfs.ext4", log)
    config = work / "grub-embedded.cfg"
    config.write_text(grub_config(fs_uuid, cmdline))
    core = work / "core.img"
    run(["grub-mkimage", "-O", "i386-pc", "-d", str(GRUB_DIR), "-o", str(core), "-c", str(config),
         "-p", "(hd0,msdos1)/boot/grub", *GRUB_MODULES], "grub-mkimage", log)
    core_bytes = core.read_bytes()
    if SECTOR + len(core_bytes) > PARTITION_START:
        raise ValueError(f"GRUB's core image ({len(core_bytes)} bytes) does not fit before the partition")
    boot_code = (GRUB_DIR / "boot.img").read_bytes()[:MBR_BOOT_CODE]
    with open(raw, "r+b") as f:
        f.write(boot_code)  # the partition table after it stays
        f.seek(SECTOR)
        f.write(core_bytes)
    run(["qemu-img", "convert", "-q", "-f", "raw", "-O", "qcow2", str(raw), str(out)], "qemu-img convert",
        log)
    raw.unlink()
