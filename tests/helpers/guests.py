"""What the tiny test guest needs from the host, and the deadlines that follow from it.

Measured on the 2-core machines CI runs on, where guests are emulated (TCG; KVM does not work there):
the tiny image (Debian's cloud kernel and a busybox initramfs) takes 4.1-4.8 s of CPU from
``virsh start`` to its init line, nearly all of it the kernel booting, and an idle guest keeps
using about 5 % of a core. N guests starting at once therefore need N times that CPU, shared with
whatever else runs: test modules that start many (marker ``guests``) run one at a time, so each can
count on one of the two cores, and their deadlines come from here instead of from guesses.
"""

from __future__ import annotations

BOOT_CPU_SECONDS = 5.0  # one tiny guest, start to init line, rounded up
HOST_SHARE = 3.0  # the rest of the host per guest: QEMU's own start, libvirt, the poollet, the apiserver
# One tiny guest's boot, or what it shows afterwards (SSH, an address, a hot-plugged NIC): on a
# machine that a second test run loads as much as this one (load average 15-20 on two cores) a
# guest gets about an eighth of a core, so its 5 CPU-s of boot take 40 s, and QEMU, libvirt and the
# control plane need their share too; 60 s was missed there.
GUEST_SECONDS = 150.0
FLOOR_SECONDS = GUEST_SECONDS  # a single guest on a loaded machine
# A tiny guest under UEFI: OVMF's own start under TCG costs about as much CPU again as the kernel's
# boot (the UEFI test's two boots took 22 s on a quiet host); 120 s was missed at a load average of 12.
UEFI_GUEST_SECONDS = 2 * GUEST_SECONDS


def boot_deadline(guests: int, cores: float = 1.0) -> float:
    """Seconds to allow for ``guests`` tiny guests started at once to be running and booted, with
    ``cores`` cores to themselves."""
    return max(FLOOR_SECONDS, guests * BOOT_CPU_SECONDS * HOST_SHARE / cores)

# A Debian 12 guest (``ironpool image build debian-12``, TCG, one vCPU) answers SSH with its
# cloud-init key about half a minute after it starts on a quiet host; measured 4-9 minutes at a
# load average of 9-14 on two cores, when other guests share them.
DEBIAN_SSH_DEADLINE = 1200.0
